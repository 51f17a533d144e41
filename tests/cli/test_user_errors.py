"""User errors are one clear line on stderr and a non-zero exit, never a traceback, for build and check alike.

Each case fails before any work where it can (bad options, a missing folder, offline with nothing local);
bad file contents fail at the file, naming it.
"""

from __future__ import annotations

import json

import datasets.config
import huggingface_hub.constants
import pytest

from convhub import registry
from convhub.cli import main as cli

COMMANDS = ("build", "check")


def run(command: str, arguments: list[str], tmp_path) -> int:
    """``convhub COMMAND ...``; a build writes under ``tmp_path``."""
    extra = ["--output", str(tmp_path / "out")] if command == "build" else []
    return cli.main([command, *arguments, *extra])


def one_error_line(capsys, command: str) -> str:
    """The only line on stderr, which must be ``convhub COMMAND: error: ...``; returns it."""
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"convhub {command}: error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("command", COMMANDS)
def test_offline_without_data_dir_says_pass_data_dir_or_sample(command, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    assert run(command, ["locomo"], tmp_path) != 0
    line = one_error_line(capsys, command)
    assert "offline" in line and "--data-dir" in line and "--sample" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("source", registry.names())
def test_missing_data_dir_does_not_exist(command, source, tmp_path, capsys):
    missing = tmp_path / "nowhere"
    assert run(command, [source, "--data-dir", str(missing)], tmp_path) != 0
    line = one_error_line(capsys, command)
    assert f"{missing} does not exist" in line


@pytest.mark.parametrize("value", ["0", "-2"])
def test_num_proc_below_one_is_an_argument_error(value, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["build", "locomo", "--sample", "--num-proc", value, "--output", str(tmp_path / "out")])
    assert exit_.value.code != 0
    err = capsys.readouterr().err
    assert "convhub build: error: argument --num-proc: must be 1 or more" in err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", COMMANDS)
def test_sample_with_data_dir_contradict(command, tmp_path, capsys):
    assert run(command, ["locomo", "--sample", "--data-dir", str(tmp_path)], tmp_path) != 0
    line = one_error_line(capsys, command)
    assert "--sample" in line and "--data-dir" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", COMMANDS)
def test_format_for_a_source_without_formats_names_it(command, tmp_path, capsys):
    assert run(command, ["gigamemory", "--sample", "--format", "qa"], tmp_path) != 0
    line = one_error_line(capsys, command)
    assert "--format" in line and "'gigamemory'" in line
    assert not (tmp_path / "out").exists()


def test_format_for_mnbvc_is_still_taken(capsys):
    assert cli.main(["check", "mnbvc", "--sample", "--format", "forum", "--subset", "forum"]) == 0


# -- one JSON document given where JSON Lines are expected --------------------------------------------------

SAMPLE_ROWS = {
    "gigamemory": ("builders/gigamemory/sample/dialogues.jsonl", 3),
    "mnbvc": ("builders/mnbvc/sample/qa/wikihow-and-classics.jsonl", 3),
}


def _rows(source: str) -> list[dict]:
    path, count = SAMPLE_ROWS[source]
    with open(path, encoding="utf-8") as handle:
        return [json.loads(text) for text in handle if text.strip()][:count]


def _document(rows: list[dict], layout: str) -> str:
    """The rows as one JSON document over several lines, as users hand them in by mistake."""
    if layout == "indented array":  # json.dump(rows, f, indent=2): the first line is "["
        return json.dumps(rows, ensure_ascii=False, indent=2)
    if layout == "indented object":  # one row, pretty-printed: the first line is "{"
        return json.dumps(rows[0], ensure_ascii=False, indent=2) + "\n"
    if layout == "array on one line":  # json.dump(rows, f): one line, which is valid JSON
        return json.dumps(rows, ensure_ascii=False) + "\n"
    # an array with one row a line: the first line is '[{...},' (a whole row, yet not JSON)
    return "[" + ",\n".join(json.dumps(row, ensure_ascii=False) for row in rows) + "]\n"


LAYOUTS = ["indented array", "indented object", "array with a row a line", "array on one line"]


def _document_folder(tmp_path, source: str, layout: str):
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "mine.jsonl").write_text(_document(_rows(source), layout), encoding="utf-8")
    return folder


def _says_document(text: str, layout: str) -> bool:
    if layout == "array on one line":
        return text.startswith("this is one JSON document, not JSON Lines: line 1 is a whole JSON array")
    kind = "object" if layout == "indented object" else "array"
    return (
        "this is one JSON document, not JSON Lines" in text
        and f"begins a JSON {kind} written over several lines" in text
    )


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("source", sorted(SAMPLE_ROWS))
@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_json_document_is_one_line_naming_the_file(command, source, layout, tmp_path, capsys):
    """Not "not valid JSON" for its first line: one line naming the file and saying what it is, for both
    sources that read JSON Lines."""
    folder = _document_folder(tmp_path, source, layout)
    assert run(command, [source, "--data-dir", str(folder)], tmp_path) != 0
    line = one_error_line(capsys, command)
    assert "mine.jsonl: " in line and _says_document(line.split("mine.jsonl: ", 1)[1], layout)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("source", sorted(SAMPLE_ROWS))
@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_json_document_is_one_quarantined_file_under_skip(source, layout, tmp_path, capsys):
    """With ``--on-bad-record skip`` the document is one quarantine entry for the whole file saying what it
    is, not one "not valid JSON" entry for each of its lines."""
    folder = _document_folder(tmp_path, source, layout)
    quarantine = tmp_path / "q.jsonl"
    arguments = [
        source,
        "--data-dir",
        str(folder),
        "--on-bad-record",
        "skip",
        "--quarantine",
        str(quarantine),
    ]
    run("check", arguments, tmp_path)
    entries = [json.loads(text) for text in quarantine.read_text(encoding="utf-8").splitlines()]
    assert len(entries) == 1, entries
    assert entries[0]["file"].endswith("mine.jsonl") and entries[0]["scope"] == "file"
    assert _says_document(entries[0]["reason"], layout)


@pytest.mark.parametrize("source", sorted(SAMPLE_ROWS))
def test_a_cut_short_first_line_is_still_a_bad_line_not_a_document(source, tmp_path, capsys):
    """A JSON Lines file whose first line is cut short (``{"id": 1, "qu``) is not taken for a document:
    its first line is named as not valid JSON."""
    folder = tmp_path / "data"
    folder.mkdir()
    rows = [json.dumps(row, ensure_ascii=False) for row in _rows(source)]
    (folder / "mine.jsonl").write_text("\n".join([rows[0][:25], *rows[1:]]) + "\n", encoding="utf-8")
    assert run("check", [source, "--data-dir", str(folder)], tmp_path) != 0
    line = one_error_line(capsys, "check")
    assert "mine.jsonl" in line and "line 1" in line and "not valid JSON" in line
    assert "JSON document" not in line


def test_only_configs_with_no_row_is_one_line_and_no_folder(tmp_path, capsys):
    """MNBVC's sample has no question, so ``--config qa`` builds nothing: one line naming it, and no output
    folder (it failed in writing the card: ``max() arg is an empty sequence``)."""
    assert run("build", ["mnbvc", "--sample", "--config", "qa"], tmp_path) != 0
    err = capsys.readouterr().err  # the bars of the work done, then the error
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        "convhub build: error: mnbvc: nothing to build: qa had no row in this data "
        "(a config with no row is left out of a build)"
    )
    assert not (tmp_path / "out").exists()
