"""``benchmarks/large_record.py``: one very large record of each source, and issue 33's conversation of many tiny
turns, built for real beside the same record at its own size. The figures are reported, not asserted here."""

from __future__ import annotations

import json

import large_record
import pyarrow.parquet as pq
import pytest

from convhub.cli import main as cli
from tests.support.bench_output import table_rows


@pytest.mark.slow
def test_the_large_record_benchmark_grows_one_text_and_compares_with_the_record_as_it_is(tmp_path, capsys):
    record = {"id": "x", "turns": [{"text": "short"}, {"text": "the longest one"}], "扩展字段": "{" * 40}
    grown = large_record.with_long_string(record, 0.001, "ab ")
    assert grown["turns"][1]["text"] == "ab " * 349 and grown["turns"][0] == record["turns"][0]
    assert grown["扩展字段"] == record["扩展字段"]  # a JSON string is not a text field

    assert large_record.main(["--mb", "2", "--source", "gigamemory"]) == 0
    [row] = table_rows(capsys.readouterr().out)
    assert row[0] == "gigamemory" and 2.0 <= float(row[1]) < 2.1
    assert float(row[3]) > float(row[2]) > 0  # the large record's build peaks higher


@pytest.mark.slow
@pytest.mark.parametrize("source", ["locomo", "gigamemory", "convlab", "mnbvc", "longmemeval"])
def test_the_large_record_benchmark_has_an_input_for_every_source_that_builds_with_its_long_text(
    source, tmp_path
):
    """``large_record.py`` measures every source: its one record builds, and the ``sessions`` row holds the grown
    text whole."""
    assert source in large_record.SOURCES
    folder = large_record.write_input(source, tmp_path / "in", 0.05)
    assert cli.main(["build", source, "--data-dir", str(folder), "--output", str(tmp_path / "out")]) == 0
    sessions = pq.read_table(tmp_path / "out" / "sessions")
    unit = "中文对话 " if source == "mnbvc" else "a long turn "
    grown = unit * int(0.05 * 2**20 / len(unit.encode("utf-8")))
    assert sessions.num_rows == 1
    assert json.dumps(sessions.to_pylist(), ensure_ascii=False, default=str).count(grown) >= 1


@pytest.mark.slow
def test_the_large_record_benchmark_makes_one_conversation_of_many_tiny_turns(tmp_path, capsys):
    """``--tiny-turns``: one MNBVC conversation that many turns long (every third answer empty), built beside the
    same conversation of one row; the build finds exactly one conversation with those turns."""
    folder = large_record.write_many_turns(tmp_path / "in", 5000)
    lines = (folder / "multiturn" / "one.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3000
    assert cli.main(["build", "mnbvc", "--data-dir", str(folder), "--output", str(tmp_path / "out")]) == 0
    turns = pq.read_table(tmp_path / "out" / "turns")
    assert (turns.num_rows, len(set(turns.column("conversation_id").to_pylist()))) == (5000, 1)

    assert large_record.main(["--tiny-turns", "20000"]) == 0
    [row] = table_rows(capsys.readouterr().out)
    assert row[0] == "mnbvc" and float(row[3]) > float(row[2]) > 0
