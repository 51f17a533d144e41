"""``convhub export`` reads a build as someone else's input: the line numbers its rows claim are bounded, and a
build that changes while it is read is refused, never exported as a mixture of two builds."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from convhub.cli import main as cli
from convhub.engine.build import build_source
from convhub.export import files as export_files

# -- line numbers -------------------------------------------------------------------------------------------


def _with_claimed_line(build: Path, tmp_path: Path, line) -> tuple[Path, str, str]:
    """A copy of the MNBVC sample build whose first conversation's first row claims ``line`` of its file;
    returns the copy, the file and the conversation id."""
    folder = tmp_path / "claimed"
    shutil.copytree(build, folder)
    [path] = (folder / "sessions").glob("*.parquet")
    rows = pq.read_table(path).to_pylist()
    turn = rows[0]["sessions"][0]["turns"][0]
    extra = json.loads(turn["extra"])
    extra["line"] = line
    turn["extra"] = json.dumps(extra, ensure_ascii=False)
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(path)), path)
    return folder, extra["file"], rows[0]["conversation_id"]


@pytest.mark.parametrize("line", [3_000_000_000, 10**11])
def test_a_row_claiming_a_line_far_past_what_the_build_explains_is_refused_before_writing(
    sample_builds, tmp_path, capsys, line
):
    """Line 3,000,000,000 wrote a 2.8 GB file of newlines, 10^11 ran out of memory: now one line, nothing written."""
    folder, file, conversation = _with_claimed_line(sample_builds["mnbvc"].output, tmp_path, line)
    output = tmp_path / "export"
    code = cli.main(["export", "mnbvc", "--from", str(folder), "--output", str(output)])
    [message] = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert message.startswith(f"convhub export: error: {folder}: the row of conversation {conversation!r}")
    assert f"claims {file} line {line:,}" in message
    assert not output.exists()
    assert [path.name for path in tmp_path.iterdir()] == ["claimed"]  # no staging folder left either


def test_a_gap_the_build_can_explain_is_written_as_empty_lines(sample_builds, tmp_path, monkeypatch):
    """Within the bound, a missing stretch of lines (rows of a subset a build left out) is still kept empty."""
    monkeypatch.setattr(export_files, "GAP_LINES_FLOOR", 100)
    monkeypatch.setattr(export_files, "GAP_LINES_PER_ROW", 0)
    folder, file, _ = _with_claimed_line(sample_builds["mnbvc"].output, tmp_path, 90)
    output = tmp_path / "export"
    assert cli.main(["export", "mnbvc", "--from", str(folder), "--output", str(output)]) == 0
    lines = (output / file).read_bytes().split(b"\n")
    assert len(lines) == 91 and lines[90] == b""  # 90 lines, each ended by a newline
    assert json.loads(lines[89])  # the row, at its claimed line
    assert lines[30:89] == [b""] * 59  # the lines no row holds, empty
    folder, _, _ = _with_claimed_line(sample_builds["mnbvc"].output, tmp_path / "more", 200)
    assert cli.main(["export", "mnbvc", "--from", str(folder), "--output", str(tmp_path / "refused")]) == 1


@pytest.mark.parametrize("line", ["12", 2.5, True, 0, None])
def test_a_line_number_that_is_no_positive_integer_is_one_line(sample_builds, tmp_path, capsys, line):
    folder, file, conversation = _with_claimed_line(sample_builds["mnbvc"].output, tmp_path, line)
    code = cli.main(["export", "mnbvc", "--from", str(folder), "--output", str(tmp_path / "export")])
    [message] = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert (
        f"the row of conversation {conversation!r} claims {file} line {line!r}: not a line number" in message
    )


def test_a_gigamemory_row_claiming_a_far_line_is_refused(tmp_path, capsys):
    from convhub import registry

    sample = registry.get("gigamemory").sample_dir()
    build = build_source("gigamemory", tmp_path / "built", data_dir=sample).output
    path = sorted((build / "sessions").rglob("*.parquet"))[0]
    rows = pq.read_table(path).to_pylist()
    question = rows[0]["questions"][0]
    extra = json.loads(question["extra"])
    extra["line"] = 3_000_000_000
    question["extra"] = json.dumps(extra, ensure_ascii=False)
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(path)), path)
    capsys.readouterr()  # the build's own output
    code = cli.main(["export", "gigamemory", "--from", str(build), "--output", str(tmp_path / "export")])
    [message] = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert (
        f"the row of conversation {rows[0]['conversation_id']!r} claims {extra['file']} line 3,000,000,000"
        in message
    )
    assert not (tmp_path / "export").exists()


# -- a build that changes while it is read ------------------------------------------------------------------


def _changed_sample(folder: Path) -> Path:
    """The MNBVC sample with every 的 written 之: the same files and layout, other rows in every file."""
    import gzip

    from convhub import registry

    shutil.copytree(registry.get("mnbvc").sample_dir(), folder)
    for path in folder.rglob("*.jsonl*"):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as handle:
            data = handle.read().replace("的".encode(), "之".encode())
        with opener(path, "wb") as handle:
            handle.write(data)
    return folder


@pytest.mark.slow
def test_a_rebuild_swapped_in_between_two_file_reads_is_refused_never_mixed(tmp_path, monkeypatch, capsys):
    """The rebuild has the same shard layout (two ``sessions`` files); it is swapped in after the first file was
    read. The export must hold one build's rows or refuse: before, it exported the first file of one build and the
    second of the other, and said nothing."""
    from convhub import registry
    from convhub.export import exporter as export
    from convhub.storage.staging import _swap_in

    first = build_source("mnbvc", tmp_path / "first", registry.get("mnbvc").sample_dir(), num_proc=2).output
    second = build_source("mnbvc", tmp_path / "second", str(_changed_sample(tmp_path / "data")), num_proc=2)
    layout = sorted(path.relative_to(first) for path in first.rglob("*.parquet"))
    assert layout == sorted(path.relative_to(second.output) for path in second.output.rglob("*.parquet"))
    assert len(list((first / "sessions").glob("*.parquet"))) == 2
    wholes = {}
    for name, build in (("first", first), ("second", second.output)):
        target = tmp_path / f"export-{name}"
        export.export_source("mnbvc", build, target)
        wholes[name] = {path.relative_to(target): path.read_bytes() for path in target.rglob("*.jsonl*")}
    assert wholes["first"] != wholes["second"]

    live = tmp_path / "live"
    shutil.copytree(first, live)
    opened = []
    real = export.parquet_file

    def swap_before_the_second_file(path, **options):
        opened.append(path)
        if len(opened) == 2:
            rebuilt = tmp_path / "rebuilt"
            shutil.copytree(second.output, rebuilt)
            _swap_in(rebuilt, live)  # as convhub build puts a rebuild in place
        return real(path, **options)

    monkeypatch.setattr(export, "parquet_file", swap_before_the_second_file)
    capsys.readouterr()
    output = tmp_path / "export"
    code = cli.main(["export", "mnbvc", "--from", str(live), "--output", str(output)])
    assert len(opened) >= 2
    if code == 0:
        got = {path.relative_to(output): path.read_bytes() for path in output.rglob("*.jsonl*")}
        assert got in (wholes["first"], wholes["second"]), "the export mixed two builds"
    else:
        assert code == 1
        assert capsys.readouterr().err.strip().splitlines() == [
            f"convhub export: error: the build at {live} changed while it was read; run export again"
        ]
        assert not output.exists()


def test_many_files_each_within_its_bound_are_refused_together_before_writing(
    sample_builds, tmp_path, monkeypatch, capsys
):
    """300 one-row files, each claiming a line within its own file's bound, wrote 288 MB of newlines together: the
    bound is the whole export's too (here scaled down: 100 empty lines, none more per row)."""
    monkeypatch.setattr(export_files, "GAP_LINES_FLOOR", 100)
    monkeypatch.setattr(export_files, "GAP_LINES_PER_ROW", 0)
    folder = tmp_path / "many"
    shutil.copytree(sample_builds["mnbvc"].output, folder)
    files = 0
    for path in sorted((folder / "sessions").rglob("*.parquet")):
        rows = pq.read_table(path).to_pylist()
        for row in rows:
            for session in row["sessions"]:
                for turn in session["turns"]:
                    extra = json.loads(turn["extra"] or "{}")
                    if (
                        "line" in extra
                    ):  # each row alone in a file of its own, at line 90: 89 empty lines each
                        extra["file"], extra["line"] = f"many/{files}.jsonl", 90
                        turn["extra"] = json.dumps(extra, ensure_ascii=False)
                        files += 1
        pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(path)), path)
    assert files >= 3
    output = tmp_path / "export"
    code = cli.main(["export", "mnbvc", "--from", str(folder), "--output", str(output)])
    [message] = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert message.startswith(f"convhub export: error: {folder}: the rows of ")
    assert f"leave {89 * files:,} empty lines" in message and "explain at most 100" in message
    assert not output.exists()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["many"]
