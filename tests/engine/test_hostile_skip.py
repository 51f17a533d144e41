"""Hostile input with ``on_bad_record="skip"``, for every source: the good records are built, every rejected one
is in the quarantine file beside the output with its reason, and the card and ``convhub check`` count them; under
``num_proc``, after a clean build, with every record bad, with an unreadable file.
"""

from __future__ import annotations

import base64
import gzip
from pathlib import Path

import pytest

from convhub.cli import main as cli
from convhub.engine.build import build_source, check_source
from convhub.engine.checks import quarantine
from convhub.errors import SourceError
from tests.support.hostile_sources import (
    NAMES,
    SOURCES,
    bad_record,
    hostile_mix,
    load,
    read_quarantine,
)

# -- skip: the good records are built, the bad ones are quarantined, the card counts them -----------------


@pytest.mark.parametrize("name", NAMES)
def test_skip_builds_the_good_records_and_quarantines_the_rest(tmp_path, name):
    source = SOURCES[name]
    data_dir = tmp_path / "data"
    bad = hostile_mix(source, data_dir)
    output = tmp_path / "out" / "built"
    result = build_source(name, output, data_dir=str(data_dir), on_bad_record="skip")
    sessions = load(output, "sessions")
    if name == "gigamemory":
        question_ids = [q["question_id"] for questions in sessions["questions"] for q in questions]
        assert question_ids == ["0", "2", "4"]
    else:
        assert sessions["conversation_id"] == [source.conversation_id(i) for i in (0, 2, 4)]
    entries = read_quarantine(result)
    assert len(entries) == bad == result.skipped
    for entry in entries:
        assert Path(entry["file"]).name == Path(source.file_name).name
        assert entry["reason"] and entry["kind"] and entry["raw"] is not None
        assert entry["record"] is not None
    fields = [entry["field"] or "" for entry in entries]
    assert any(source.wrong_type[1] in field for field in fields)
    assert any(source.missing[1] in field for field in fields)
    skipped_notes = {k: v for k, v in result.notes.items() if k.startswith(quarantine.NOTE_PREFIX)}
    assert sum(skipped_notes.values()) == bad
    card = (output / "README.md").read_text(encoding="utf-8")
    for kind in skipped_notes:
        assert kind.replace("|", "\\|")[:40] in card or kind[:40] in card
    assert not any(path.name.startswith("quarantine") for path in output.rglob("*"))
    # the same input with the default policy fails and leaves the earlier build and its quarantine alone
    with pytest.raises(SourceError):
        build_source(name, output, data_dir=str(data_dir))
    assert (output / "README.md").is_file() and result.quarantine.is_file()


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_skip_under_num_proc_merges_every_workers_quarantine(tmp_path, name):
    source = SOURCES[name]
    data_dir = tmp_path / "data"
    for part in ("a", "b"):
        file_name = {"convlab": f"{part}/data/dialogues.json"}.get(
            name, f"{part}{Path(source.file_name).suffix}"
        )
        records = [source.record(0), bad_record(source, "missing", 1), source.record(2)]
        if name == "convlab":
            records = [r | {"dataset": part, "dialogue_id": f"{part}-{i}"} for i, r in enumerate(records)]
        if name == "locomo":
            records = [r | {"sample_id": f"{part}-{i}"} for i, r in enumerate(records)]
        source.write(data_dir, records, file_name)
    result = build_source(name, tmp_path / "out", data_dir=str(data_dir), num_proc=2, on_bad_record="skip")
    entries = read_quarantine(result)
    files = sorted(
        Path(entry["file"]).parts[-3] if name == "convlab" else Path(entry["file"]).name.split(".")[0]
        for entry in entries
    )
    assert files == ["a", "b"] and result.skipped == 2
    assert result.statistics.total().conversations == 4
    assert len(load(result.output, "sessions")["conversation_id"]) == 4


def test_a_later_clean_build_removes_the_stale_quarantine(tmp_path):
    source = SOURCES["mnbvc"]
    data_dir = tmp_path / "data"
    hostile_mix(source, data_dir)
    output = tmp_path / "out"
    result = build_source("mnbvc", output, data_dir=str(data_dir), on_bad_record="skip")
    assert result.quarantine.is_file()
    source.write(data_dir, [source.record(0)])
    clean = build_source("mnbvc", output, data_dir=str(data_dir), on_bad_record="skip")
    assert clean.skipped == 0 and clean.quarantine is None
    assert not quarantine.path_beside(output).exists()


def test_skip_with_every_record_bad_fails_and_keeps_the_quarantine(tmp_path):
    source = SOURCES["gigamemory"]
    data_dir = tmp_path / "data"
    source.write(data_dir, [bad_record(source, "missing", 0), bad_record(source, "wrong_type", 1)])
    output = tmp_path / "out" / "built"
    with pytest.raises(SourceError, match="no record left to build: all 2 rejected"):
        build_source("gigamemory", output, data_dir=str(data_dir), on_bad_record="skip")
    assert not output.exists()
    assert len(quarantine.path_beside(output).read_text().splitlines()) == 2


def test_a_skipped_unreadable_file_does_not_stop_the_others(tmp_path):
    source = SOURCES["gigamemory"]
    data_dir = tmp_path / "data"
    source.write(data_dir, [source.record(0)], "good.jsonl")
    (data_dir / "empty.jsonl").write_bytes(b"")
    packed = gzip.compress(source.encode([source.record(i + 10, "y" * 3000 + str(i)) for i in range(30)]))
    (data_dir / "cut.jsonl.gz").write_bytes(packed[: len(packed) // 2])
    result = build_source("gigamemory", tmp_path / "out", data_dir=str(data_dir), on_bad_record="skip")
    entries = read_quarantine(result)
    by_file = {Path(entry["file"]).name: entry for entry in entries}
    assert set(by_file) == {"empty.jsonl", "cut.jsonl.gz"}
    assert by_file["cut.jsonl.gz"]["scope"] == "file"
    assert "corrupt or truncated gzip" in by_file["cut.jsonl.gz"]["reason"]
    subsets = set(load(result.output, "sessions")["subset"])
    assert "good" in subsets  # the lines of cut.jsonl.gz before the damage may be kept too
    questions = sum(len(q) for q in load(result.output, "sessions")["questions"])
    assert questions >= 1


def test_quarantine_entry_of_a_huge_or_undecodable_record_is_cut_and_marked():
    error = SourceError("f.jsonl", "line 1", None, "not valid JSON: Unterminated string")
    huge = quarantine.entry(error, b'{"x": "' + b"a" * (3 * quarantine.RAW_LIMIT))
    assert huge["raw_truncated"] and len(huge["raw"]) == quarantine.RAW_LIMIT
    assert huge["raw_size"] == 3 * quarantine.RAW_LIMIT + 7 and huge["line"] == 1
    undecodable = quarantine.entry(error, b"\xff\xfe")
    assert undecodable["raw_encoding"] == "base64" and base64.b64decode(undecodable["raw"]) == b"\xff\xfe"


# -- the command line ------------------------------------------------------------------------------------


def test_cli_build_skip_warns_and_check_counts(tmp_path, capsys):
    source = SOURCES["mnbvc"]
    data_dir = tmp_path / "data"
    bad = hostile_mix(source, data_dir)
    output = tmp_path / "out"
    assert cli.main(["build", "mnbvc", "--data-dir", str(data_dir), "--output", str(output)]) == 1
    err = capsys.readouterr().err
    assert "qa.jsonl, record line 4, field '问'" in err and not output.exists()  # format detection first
    args = ["build", "mnbvc", "--data-dir", str(data_dir), "--output", str(output), "--on-bad-record", "skip"]
    assert cli.main(args) == 0
    err = capsys.readouterr().err
    assert f"{bad} bad record(s) skipped" in err and str(quarantine.path_beside(output)) in err
    checked = tmp_path / "check.quarantine.jsonl"
    args = [
        "check",
        "mnbvc",
        "--data-dir",
        str(data_dir),
        "--on-bad-record",
        "skip",
        "--quarantine",
        str(checked),
    ]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert f"OK after skipping {bad} bad record(s), each with its reason in {checked}" in out
    assert checked.read_text("utf-8") == quarantine.path_beside(output).read_text("utf-8")  # as the build's
    notes, statistics = check_source("mnbvc", str(data_dir), on_bad_record="skip")
    assert statistics.total().conversations == 3
    assert sum(v for k, v in notes.items() if k.startswith(quarantine.NOTE_PREFIX)) == bad


def test_cli_build_says_which_file_could_not_be_read_to_its_end(tmp_path, capsys):
    """A cut gzip loses the records after the cut, uncounted: the warning says so and names the file."""
    source = SOURCES["gigamemory"]
    data_dir = tmp_path / "data"
    source.write(data_dir, [source.record(0)], "good.jsonl")
    packed = gzip.compress(source.encode([source.record(i + 10, "y" * 3000 + str(i)) for i in range(30)]))
    (data_dir / "cut.jsonl.gz").write_bytes(packed[: len(packed) // 2])
    output = tmp_path / "out"
    args = ["build", "gigamemory", "--data-dir", str(data_dir), "--output", str(output)]
    assert cli.main([*args, "--on-bad-record", "skip"]) == 0
    err = capsys.readouterr().err
    assert (
        "warning: 1 bad record(s) skipped, and the rest of 1 file(s) could not be read (cut.jsonl.gz;" in err
    )
    assert f"each with its reason in {quarantine.path_beside(output)}" in err
