"""MNBVC's columnar pass 2 (``MnbvcBuilder.grouped_tables``, ``builders.mnbvc.multiturn_tables``) gives the rows
the reference gives (``multiturn.records_from_sorted`` of ``keyed_columns.payload_rows``): equal tables, schema
and bytes included, the same notes, warnings and rejected lines, over inputs cut into tables so small that
conversations cross their batches."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from mnbvc_rows import SAMPLE, pair, write_shard
from mnbvc_tables import assert_same, both_ways

from builders.mnbvc import parse

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import mnbvc_synthetic


def test_the_sample_is_made_on_columns(tmp_path):
    reference, columns = both_ways(SAMPLE / "multiturn", tmp_path)
    assert_same(reference, columns)
    assert columns.tables() > 0
    assert len(reference.items) > 1


def test_a_synthetic_input_of_four_shards(tmp_path):
    """Rows scattered over shards, the unquoted and empty 会话 variants (payload rows: their 扩展字段 is noted),
    integer 会话, empty 答s, English conversations."""
    folder = tmp_path / "in"
    mnbvc_synthetic.generate(folder, 0.3, 4, False, 7)
    reference, columns = both_ways(folder, tmp_path / "work", rows=50, batch_rows=16)
    assert_same(reference, columns)
    assert columns.tables() > 0 and columns.records() > 0  # both ways taken
    assert reference.notes["conversation detected as en, not zh"] > 0


def test_gaps_duplicates_ranges_and_rows_without_an_integer_sequence(tmp_path):
    rows = [
        pair("gaps", 5, "g5"),
        pair("gaps", 2, "g2"),
        pair("gaps", 9, "g9"),
        pair("dup", 1, "d1"),
        pair("dup", 2, "d2a"),
        pair("dup", 2, "d2b"),
        pair("dup", 2, "d2c"),
        pair("dup", 4, "d4"),
        pair("dup", 4, "d4b"),
        pair("far", 1, "f1"),
        pair("far", 5000, "f5000"),
        pair("far", 7000, "f7000"),
        pair("neg", -3, "n-3"),
        pair("neg", 0, "n0"),
        pair("neg", 3, "n3"),
        pair("limit", 1001, "l1001"),  # exactly 1000 missing: still listed
        pair("text", "x", "tx"),  # 多轮序号 not an integer: a payload row
        pair("text", 1, "t1"),
        pair("text", "2", "t2"),  # an integer string: a payload row too
        pair("big", 2**70, "b70"),  # past 64 bits
        pair("big", 1, "b1"),
        pair("none", None, "no"),
    ]
    folder = tmp_path / "in"
    write_shard(folder / "m.jsonl", rows)
    reference, columns = both_ways(folder, tmp_path / "work")
    assert_same(reference, columns)
    assert columns.records() == 3  # text, big, none
    assert (
        reference.notes["multi-turn conversation missing over 1000 多轮序号 (gaps listed as ranges)"] == 2
    )  # far, big


def test_a_conversation_spread_over_files_and_empty_answers(tmp_path):
    folder = tmp_path / "in"
    write_shard(folder / "a.jsonl", [pair("s", 3, "s3"), pair("t", 1, "t1", answer=""), pair("s", 1, "s1")])
    write_shard(folder / "b.jsonl.gz", [pair("s", 2, "s2", answer=""), pair("t", 2, "t2")], gz=True)
    write_shard(folder / "sub/c.jsonl", [pair("s", 2, "s2 again"), pair("u", 1, "u1", answer="")])
    reference, columns = both_ways(folder, tmp_path / "work", rows=2, batch_rows=1)
    assert_same(reference, columns)
    assert columns.records() == 0
    assert reference.notes["multi-turn conversation spread over several files"] == 2


def _without(row: dict, key: str) -> dict:
    return {name: value for name, value in row.items() if name != key}


def test_dates_from_time_or_create_time(tmp_path):
    def created(row, value):
        return {**row, "元数据": {**row["元数据"], "create_time": value}}

    rows = [
        _without(pair("a", 1, "no 时间"), "时间"),
        pair("a", 2, "later 时间 is not read"),
        created(_without(pair("b", 1, "bad create_time"), "时间"), "yesterday"),
        created(_without(pair("c", 1, "empty create_time"), "时间"), ""),
        created(_without(pair("d", 1, "no create_time"), "时间"), None),
        pair("e", 1, "bad 时间", 时间="2023-13-45"),
        pair("f", 1, "empty 时间", 时间=""),
        pair("g", 1, "BC", 时间="-50000101"),
        pair("h", 1, "with a time", 时间="20230517 10:41:58"),
        pair("i", 1, "bad 时间 again", 时间="2023-13-45"),
        created(_without(pair("j", 1, "a second bad create_time"), "时间"), "yesterday"),
    ]
    folder = tmp_path / "in"
    write_shard(folder / "m.jsonl", rows)
    reference, columns = both_ways(folder, tmp_path / "work")
    assert_same(reference, columns)
    assert columns.records() == 2  # a bad create_time is noted by the row's conversion: a payload row
    assert reference.notes["时间 absent (session date_time from create_time)"] == 5


@pytest.mark.parametrize(
    ("question", "answer", "language"),
    [
        ("What is the capital of France?", "Paris is the capital of France.", "en"),
        ("日本の首都はどこですか", "東京です。ひらがなとカタカナ", "ja"),
        ("한국의 수도는 어디입니까", "서울입니다", "ko"),
        ("中国的首都是哪里", "北京", "zh"),
        ("😀" * 1500 + "abc", "x" * 900, "en"),  # past the BMP, and the sample's end inside a text
    ],
)
def test_languages(tmp_path, question, answer, language):
    rows = [pair("x", n, question, answer) for n in range(1, 4)] + [pair("y", 1, "中文问题", answer)]
    folder = tmp_path / "in"
    write_shard(folder / "m.jsonl", rows)
    reference, columns = both_ways(folder, tmp_path / "work")
    assert_same(reference, columns)
    assert reference.items[0]["language"] == language


def test_a_conversation_of_5000_rows(tmp_path):
    rows = [pair("long", n, f"q{n}", "" if n % 3 == 0 else f"a{n}") for n in range(5002, 0, -1)]
    folder = tmp_path / "in"
    write_shard(folder / "m.jsonl", [*rows, pair("short", 1, "s")])
    reference, columns = both_ways(folder, tmp_path / "work", rows=1000, batch_rows=700)
    assert_same(reference, columns)
    assert columns.records() == 0


def test_a_lone_surrogate_goes_the_python_way(tmp_path):
    """A text UTF-8 cannot hold is a payload row; its record comes as a dict, which the writer refuses."""
    bad = json.dumps(pair("s", 2, "\ud800"))  # ASCII JSON: the surrogate as an escape
    folder = tmp_path / "in"
    write_shard(folder / "m.jsonl", [pair("a", 1, "a1"), pair("s", 1, "s1"), bad, pair("z", 1, "z1")])
    reference, columns = both_ways(folder, tmp_path / "work")
    assert_same(reference, columns, encodable=False)
    kinds = [type(item).__name__ for item in columns.items]
    assert kinds == ["Table", "dict", "Table"]


def test_a_row_refused_mid_conversation_is_rejected_alone(tmp_path):
    """Grouped by id (no 会话): the row whose 元数据 is not an object still belongs to its conversation, is
    rejected when its conversation is made, and the others make the conversation."""
    extension = json.dumps({"多轮序号": 1})
    rows = [pair(None, None, "first", row_id="md5-a", extension=extension)]
    rows.append({**pair(None, None, "refused", row_id="md5-a"), "元数据": "not an object"})
    rows.append(pair(None, None, "third", row_id="md5-a", extension=json.dumps({"多轮序号": 3})))
    rows.append(pair("other", 1, "other"))
    folder = tmp_path / "in"
    write_shard(folder / "m.jsonl", rows)
    reference, columns = both_ways(folder, tmp_path / "work")
    assert_same(reference, columns)
    [rejected] = [json.loads(line) for line in columns.rejected]
    assert (rejected["line"], rejected["field"]) == (2, "元数据")
    assert columns.records() == 1 and reference.items[0]["speakers"] == ["问", "答"]


def test_grouped_by_id_and_by_line_and_escaped_ids(tmp_path):
    rows = [
        pair(None, 2, "by id 2", row_id="md5#1"),
        pair("", 1, "by id 1", row_id="md5#1"),
        pair(None, 1, "by line", row_id=None),
        pair(None, 1, "by line too", row_id=""),
        pair("a:b%c#d", 1, "escaped 会话", source="x/y%z"),
        pair(7, 1, "integer 会话"),
        pair("7", 2, "its string"),
    ]
    folder = tmp_path / "in"
    write_shard(folder / "m.jsonl", rows)
    reference, columns = both_ways(folder, tmp_path / "work")
    assert_same(reference, columns)
    assert columns.records() == 0
    ids = {item["conversation_id"] for item in reference.items}
    assert "x%2Fy%25z/a%3Ab%25c%23d" in ids


def test_warnings_keep_the_limit_per_file_across_conversations(tmp_path):
    """Unreadable 扩展字段 in many conversations: the Python way's warnings stop at the same limit."""
    broken = '{"会话": "c%d", "多轮序号": 1, "解析模型": '
    count = parse.MAX_WARNINGS_PER_FILE + 4
    rows = [pair(None, None, f"q{n}", row_id=f"id{n}", extension=broken % n) for n in range(count)]
    rows += [pair(f"ok{n}", 1, "fine") for n in range(count)]
    folder = tmp_path / "in"
    write_shard(folder / "m.jsonl", rows)
    reference, columns = both_ways(folder, tmp_path / "work")
    assert_same(reference, columns)
    assert len(reference.warnings) == parse.MAX_WARNINGS_PER_FILE + 1
