"""MNBVC: every quirk of SOURCES.md, the regrouping of multi-turn rows, streaming, the build, card and CLI.

Fixtures are JSONL shards the tests write themselves (``write_shard``) and the packaged sample
(``builders/mnbvc/sample``: one gzipped multi-turn shard, one with CRLF endings, a 问答 and a 论坛 shard).
No real MNBVC dialogue shard is available offline, so no test reads ../shared/data.
"""

from __future__ import annotations

import gzip
import itertools
import json
import logging
from collections import Counter
from datetime import datetime
from functools import partial
from pathlib import Path

import datasets
import pytest
from convhub import cli
from convhub.build import build_source, check_source
from convhub.errors import Notes, SourceError
from convhub.mnbvc import builder as builder_module
from convhub.mnbvc import dates, export, files, multiturn, parse, regroup
from convhub.mnbvc import extension as extension_module
from convhub.mnbvc import language as languages
from convhub.mnbvc.builder import MnbvcBuilder
from convhub.mnbvc.extension import parse_extension
from hypothesis import example, given, settings
from hypothesis import strategies as st

SAMPLE = Path(MnbvcBuilder.sample_dir())


# -- fixtures --------------------------------------------------------------------------------------------


def write_shard(path: Path, rows: list, gz: bool = False, crlf: bool = False) -> Path:
    """A JSONL shard; a row given as a string is written as is (to write invalid JSON)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    ending = "\r\n" if crlf else "\n"
    text = "".join(
        (row if isinstance(row, str) else json.dumps(row, ensure_ascii=False)) + ending for row in rows
    )
    data = gzip.compress(text.encode()) if gz else text.encode()
    path.write_bytes(data)
    return path


def pair(conversation, number, question, answer="答", row_id="md5", source="ShareGPT", extension=None, **row):
    """A 多轮对话 row; ``extension`` overrides the 扩展字段 string."""
    if extension is None:
        extension = json.dumps(
            {"会话": conversation, "多轮序号": number, "解析模型": "gpt4"}, ensure_ascii=False
        )
    return {
        "id": row_id,
        "问": question,
        "答": answer,
        "来源": source,
        "时间": "20230517",
        "元数据": {
            "create_time": "20230517 10:41:58",
            "问题明细": '"from": "human"',
            "回答明细": '"from": "gpt"',
            "扩展字段": extension,
        },
        **row,
    }


def thread(thread_id, topic, replies, source="北大树洞", **row):
    return {
        "ID": thread_id,
        "主题": topic,
        "来源": source,
        "回复": replies,
        "时间": "20170924",
        "元数据": {"发帖时间": "20170924 13:53:31", "回复数": len(replies), "扩展字段": ""},
        **row,
    }


def reply(floor, text, **extension):
    return {"楼ID": floor, "回复": text, "扩展字段": json.dumps(extension, ensure_ascii=False)}


def records(data_dir, subsets=None, source_format=None, notes=None) -> list[dict]:
    notes = Notes() if notes is None else notes
    builder = MnbvcBuilder(data_dir=str(data_dir), subsets=subsets, source_format=source_format)
    return [record for _, record in builder.iter_records(notes)]


def by_id(found: list[dict]) -> dict[str, dict]:
    return {record["conversation_id"]: record for record in found}


def texts(record) -> list[tuple[str, str, str]]:
    return [(turn["turn_id"], turn["role"], turn["text"]) for turn in record["sessions"][0]["turns"]]


def extra(value):
    """A Json column as written by the parser (text) or as loaded back (already parsed)."""
    return json.loads(value) if isinstance(value, str) else value


# -- the source rows as they are (rebuilt by convhub.mnbvc.export, `convhub export`) ---------------


def source_rows(folder: Path) -> dict[tuple[str, int], dict]:
    rows = {}
    for path in sorted(folder.rglob("*.jsonl*")):
        name = path.relative_to(folder).as_posix()
        for number, line in files.open_lines(partial(files.open_local, str(path))):
            if line.strip():
                rows[(name, number)] = json.loads(line)
    return rows


# -- 扩展字段 ---------------------------------------------------------------------------------------------


def test_extension_valid_json_is_read_as_json():
    extension = parse_extension('{"会话": "yOKd88p", "多轮序号": 1, "解析模型": "gpt4"}')
    assert extension.value == {"会话": "yOKd88p", "多轮序号": 1, "解析模型": "gpt4"}
    assert extension.problems == ()


def test_extension_unquoted_values_become_text_or_integers():
    extension = parse_extension('{"会话": yOKd88p, "多轮序号": 1, "解析模型": gpt4}')
    assert extension.value == {"会话": "yOKd88p", "多轮序号": 1, "解析模型": "gpt4"}
    assert extension.problems == ("unquoted values",)


def test_extension_empty_value_is_null_and_the_key_stays():
    extension = parse_extension('{"会话": , "多轮序号": 2, "解析模型": gpt4}')
    assert extension.value == {"会话": None, "多轮序号": 2, "解析模型": "gpt4"}
    assert extension.problems == ("empty values", "unquoted values")


def test_extension_empty_string_is_an_empty_object_and_absent_too():
    assert parse_extension("").value == {}
    assert parse_extension("").problems == ("empty",)
    assert parse_extension("   ").value == {}
    assert parse_extension(None).problems == ("absent",)


def test_extension_with_escaped_keys_and_trailing_comma():
    escaped = json.dumps({"回复人": "Bob", "引用ID": 1}, ensure_ascii=True)
    assert "\\u56de" in escaped
    assert parse_extension(escaped).value == {"回复人": "Bob", "引用ID": 1}
    trailing = parse_extension('{ "other_texts": {"cs": "písku"}, }')
    assert trailing.value == {"other_texts": {"cs": "písku"}}
    assert trailing.problems == ("trailing comma",)


@pytest.mark.parametrize(
    "raw",
    [
        '{"会话": "abc", "多轮序号": 1, "解析模型": ',
        "{回复人: 'Dave'",
        "not json at all",
        '{"a": "unterminated}',
    ],
)
def test_unreadable_extension_has_no_value_and_says_why(raw):
    extension = parse_extension(raw)
    assert extension.value is None
    assert extension.problems[0].startswith("unreadable")


def test_extension_that_is_json_but_not_an_object_or_already_an_object():
    assert parse_extension("[1, 2]").value is None
    assert parse_extension({"会话": 3}).value == {"会话": 3}
    assert parse_extension(17).value is None


class _EveryCharacter:
    def __contains__(self, character: str) -> bool:
        return True


_LOOSE_PIECES = st.sampled_from(
    [
        *('"会话"', "会话", '"k"', ":", ",", "}", "{", " ", "", "gpt4", "yOKd88p", "-", "-1", "12", '"x"'),
        *("[1]", "null", "true", "NaN", "-Infinity", "٣", "1.5e3", "0x", '"', "]", "n", "tru"),
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_LOOSE_PIECES, max_size=12).map(lambda pieces: "{" + "".join(pieces)))
def test_loose_values_read_as_when_every_value_went_through_raw_decode(text):
    """``_read_value`` skips ``raw_decode`` where it cannot start a value: the same value and problems."""
    fast = parse_extension(text)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(extension_module, "_JSON_VALUE_STARTS", _EveryCharacter())
        slow = parse_extension(text)
    assert repr(fast) == repr(slow)


# -- dates -------------------------------------------------------------------------------------------


def _json_containers(children):
    return st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=3), children, max_size=4)


def test_dates_in_mnbvc_formats():
    notes = Notes()
    assert dates.parse_date("20240101", "时间", notes) == datetime(2024, 1, 1)
    assert dates.parse_date("07380303", "时间", notes) == datetime(738, 3, 3)
    assert dates.parse_date("20230511 15:56:03", "create_time", notes) == datetime(2023, 5, 11, 15, 56, 3)
    assert dates.parse_date("2023-06-01", "create_time", notes) == datetime(2023, 6, 1)
    assert dates.parse_date("", "回复时间", notes) is None
    assert dates.parse_date(None, "时间", notes) is None
    assert not notes


def test_dates_outside_python_range_or_invalid_are_null_and_counted():
    notes = Notes()
    assert dates.parse_date("-50000101", "时间", notes) is None
    assert dates.parse_date("00000101", "时间", notes) is None
    assert dates.parse_date("20231345", "时间", notes) is None
    assert dates.parse_date("yesterday", "create_time", notes) is None
    assert dates.parse_date(20230101, "时间", notes) is None
    assert notes == {
        "时间 before year 1 (BC) or after 9999 (timestamp null, raw kept)": 2,
        "时间 not a valid date (timestamp null, raw kept)": 1,
        "create_time not a yyyymmdd date (timestamp null, raw kept)": 1,
        "时间 not a yyyymmdd date (timestamp null, raw kept)": 1,
    }


_DATE_CHARACTERS = st.sampled_from([*"0123456789 :-T\t", "２", "٣", "a"])
_DATE_TIMES = st.one_of(
    st.text(_DATE_CHARACTERS, min_size=15, max_size=19),
    st.builds(
        "{:04d}{:02d}{:02d} {:02d}:{:02d}:{:02d}".format,
        *(st.integers(0, high) for high in (10000, 13, 32, 25, 61, 61)),
    ),
)


@settings(max_examples=400, deadline=None)
@given(_DATE_TIMES)
@example("20230229 10:00:00")
@example("20240229 23:59:59")
@example("00000101 00:00:00")
@example("00010101 24:00:00")
@example("20230101 12:60:00")
@example("20230101 12:00:60")
@example(" 20230101 12:00:0")
@example("２0230101 10:00:00")
@example("20230101 1٣:00:00")
@example("20230101T12:00:00")
@example("20230101 12-00:00")
def test_date_iso_reads_every_text_as_parse_date_iso(raw):
    """``date_iso``'s shortcut for ``yyyymmdd HH:MM:SS`` gives ``parse_date_iso``'s text and notes."""
    fast, slow = Notes(), Notes()
    assert dates.date_iso(raw, "回复时间", fast) == dates.parse_date_iso(raw, "回复时间", slow)[1]
    assert fast == slow


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(), _json_containers))
def test_loads_reads_any_value_as_json_does(value):
    """``loads`` re-reads with ``json`` whatever holds a float (the shared ``holds_float``; was a private copy
    of it checked against the shared one): the value comes back as ``json`` reads it, types included."""
    text = json.dumps(value).encode()
    assert json.dumps(files.loads(text)) == json.dumps(json.loads(text))


# -- reading shards ----------------------------------------------------------------------------------------


def test_lines_of_gzipped_and_crlf_shards(tmp_path):
    rows = [pair("a", 1, "你好"), pair("a", 2, "再见")]
    plain = write_shard(tmp_path / "a.jsonl", rows, crlf=True)
    zipped = write_shard(tmp_path / "b.jsonl.gz", rows, gz=True, crlf=True)
    for path in (plain, zipped):
        lines = list(files.open_lines(partial(files.open_local, str(path))))
        assert [number for number, _ in lines] == [1, 2]
        assert all(not line.endswith(b"\r") for _, line in lines)
        assert [json.loads(line)["问"] for _, line in lines] == ["你好", "再见"]


def test_gzip_is_recognized_by_content_not_name(tmp_path):
    path = write_shard(tmp_path / "named-plain.jsonl", [pair("a", 1, "你好")], gz=True)
    assert [
        r["问"] for _, r in files.iter_rows(files.open_lines(partial(files.open_local, str(path))), "x")
    ] == ["你好"]


def test_invalid_json_line_names_file_and_line(tmp_path):
    write_shard(tmp_path / "bad.jsonl", [thread(1, "主题", []), '{"ID": 2, "主题": "x", '])
    with pytest.raises(SourceError, match=r"bad\.jsonl, record line 2: not valid JSON"):
        records(tmp_path)


def test_row_that_is_not_an_object_names_file_and_line(tmp_path):
    write_shard(tmp_path / "list.jsonl", [thread(1, "主题", []), "[1, 2]"])
    with pytest.raises(SourceError, match=r"list\.jsonl, record line 2: expected a JSON object"):
        records(tmp_path)


def test_multiturn_row_without_question_or_answer_fails_before_any_output(tmp_path):
    write_shard(tmp_path / "m.jsonl", [pair("a", 1, "你好"), {"id": 1, "来源": "x", "元数据": {}}])
    with pytest.raises(SourceError, match=r"m\.jsonl, record line 2, field '问'"):
        records(tmp_path)


def test_wrong_metadata_type_is_a_source_error(tmp_path):
    write_shard(tmp_path / "q.jsonl", [{"id": 1, "问": "q", "答": "a", "元数据": "oops"}])
    with pytest.raises(SourceError, match=r"q\.jsonl, record line 1, field '元数据'"):
        records(tmp_path)


# -- format detection and --format ------------------------------------------------------------------------


def test_formats_are_detected_per_shard(tmp_path):
    write_shard(tmp_path / "x/forum.jsonl", [thread(1, "主题", [])])
    write_shard(tmp_path / "y/multi.jsonl.gz", [pair("a", 1, "问题")], gz=True)
    write_shard(
        tmp_path / "z/qa.jsonl",
        [{"id": 0, "问": "q", "答": "a", "来源": "wikihow", "元数据": {"扩展字段": ""}}],
    )
    found = records(tmp_path)
    assert Counter(record["subset"] for record in found) == {
        "forum/北大树洞": 1,
        "multiturn/ShareGPT": 1,
        "qa/wikihow": 1,
    }


def test_shard_of_no_dialogue_format_asks_for_format(tmp_path):
    write_shard(tmp_path / "code.jsonl", [{"来源": "github", "仓库名": "a/b", "text": "print(1)"}])
    with pytest.raises(SourceError, match="--format"):
        records(tmp_path)


def test_format_override_reads_multiturn_rows_as_qa_pairs(tmp_path):
    write_shard(tmp_path / "m.jsonl", [pair("a", 1, "一"), pair("a", 2, "二")])
    assert len(records(tmp_path)) == 1
    as_qa = records(tmp_path, source_format="问答")
    assert [record["subset"] for record in as_qa] == ["qa/ShareGPT", "qa/ShareGPT"]
    with pytest.raises(ValueError, match="unknown MNBVC format"):
        records(tmp_path, source_format="code")


# -- multi-turn regrouping -------------------------------------------------------------------------------


def spread_fixture(folder: Path) -> Path:
    """Three conversations whose rows are out of order, apart, and in three shards (one gzipped, one CRLF)."""
    write_shard(
        folder / "part-1.jsonl.gz",
        [pair("c1", 3, "c1-3"), pair(7, 1, "int-1"), pair("c1", 1, "c1-1"), pair("c2", 2, "c2-2")],
        gz=True,
    )
    write_shard(folder / "part-2.jsonl", [pair("c2", 1, "c2-1"), pair("7", 2, "int-2")], crlf=True)
    write_shard(folder / "sub/part-3.jsonl", [pair("c1", 2, "c1-2"), pair("c1", 4, "c1-4", answer="")])
    return folder


def questions(record) -> list[str]:
    return [turn["text"] for turn in record["sessions"][0]["turns"] if turn["role"] == "user"]


def test_rows_of_a_conversation_are_regrouped_in_order_across_shards(tmp_path):
    notes = Notes()
    found = by_id(records(spread_fixture(tmp_path), notes=notes))
    assert set(found) == {"ShareGPT/c1", "ShareGPT/c2", "ShareGPT/7"}
    assert questions(found["ShareGPT/c1"]) == ["c1-1", "c1-2", "c1-3", "c1-4"]
    assert questions(found["ShareGPT/c2"]) == ["c2-1", "c2-2"]
    assert questions(found["ShareGPT/7"]) == ["int-1", "int-2"]  # 会话 7 and "7" are one conversation
    session_extra = extra(found["ShareGPT/c1"]["sessions"][0]["extra"])
    assert session_extra["files"] == ["part-1.jsonl.gz", "sub/part-3.jsonl"]
    assert session_extra["多轮序号"] == [1, 2, 3, 4]
    assert notes["multi-turn conversation spread over several files"] == 3


def test_partitioning_gives_the_same_conversations_whatever_the_partition_count(tmp_path, monkeypatch):
    folder = spread_fixture(tmp_path)
    one = by_id(records(folder))
    monkeypatch.setattr(MnbvcBuilder, "PARTITION_BYTES", 100, raising=False)
    builder = MnbvcBuilder(data_dir=str(folder))
    shards = builder.shards(datasets.DownloadManager(data_dir=str(folder)))["train"]
    assert len(shards) > 3  # one partition per ~100 bytes of input
    many = {}
    for shard in shards:
        for record in builder.parse_shard(shard, Notes()):
            many[record["conversation_id"]] = record
    assert many == one


def test_partition_memory_holds_offsets_not_rows(tmp_path):
    """The sorted index of a partition keeps (group, order, offset) per row, never the row's text."""
    long_answer = "长" * 5000
    shard = write_shard(tmp_path / "m.jsonl", [pair("c", n, f"q{n}", answer=long_answer) for n in (2, 1)])
    [pieces] = regroup.write_partitions([("m.jsonl", str(shard))], str(tmp_path), 1)
    index = regroup._sorted_index(pieces)
    assert [entry[4] for entry in index] == [1, 2]
    assert all(len(repr(entry)) < 200 for entry in index)


def conversation_ids(builder: MnbvcBuilder, shards) -> list[str]:
    return [record["conversation_id"] for shard in shards for record in builder.parse_shard(shard, Notes())]


def test_slices_of_a_partition_give_its_conversations_in_the_same_order(tmp_path, monkeypatch):
    """A partition read as n slices (shards of similar size) gives the conversations one read gives."""
    folder = tmp_path / "data"
    rows = [pair(f"c{n % 7}", n // 7, f"q{n}") for n in range(40)]
    write_shard(folder / "a.jsonl", rows[::2])
    write_shard(folder / "b.jsonl", rows[1::2])
    manager = datasets.DownloadManager(data_dir=str(folder))
    whole = MnbvcBuilder(data_dir=str(folder))
    [shard] = whole.shards(manager)["train"]
    assert shard["part"] == (0, 1)
    monkeypatch.setattr(MnbvcBuilder, "SLICE_BYTES", 500, raising=False)
    sliced = MnbvcBuilder(data_dir=str(folder))
    shards = sliced.shards(manager)["train"]
    assert [shard["part"] for shard in shards] == [(number, len(shards)) for number in range(len(shards))]
    assert len(shards) > 3
    one = conversation_ids(whole, [shard])
    assert one == sorted(one) and len(one) == 7
    assert conversation_ids(sliced, shards) == one
    assert conversation_ids(sliced, shards[::-1]) == [
        i for shard in shards[::-1] for i in conversation_ids(sliced, [shard])
    ]


def qa_row(number, question, source="wikihow"):
    return {
        "id": number,
        "问": question,
        "答": "答" * (number % 5),
        "来源": source,
        "元数据": {"扩展字段": ""},
    }


def range_fixture(folder: Path) -> Path:
    """A forum file and a 问答 file of lines of uneven lengths (with a blank line and CRLF endings)."""
    threads = [thread(n, f"主题{n}" * (n % 4 + 1), [reply(1, "回" * (n % 6))]) for n in range(30)]
    write_shard(folder / "forum/a.jsonl", [*threads[:12], "", *threads[12:]])
    write_shard(folder / "qa/b.jsonl", [qa_row(n, f"问{n}" * (n % 3 + 1)) for n in range(25)], crlf=True)
    return folder


def test_big_forum_and_qa_files_read_as_line_ranges_give_the_same_rows(tmp_path, monkeypatch):
    """A plain 论坛/问答 file bigger than RANGE_BYTES is read as several line-aligned byte ranges: the same
    records (ids hold the line numbers) in the same order as one read of the file."""
    folder = range_fixture(tmp_path / "data")
    manager = datasets.DownloadManager(data_dir=str(folder))
    whole = MnbvcBuilder(data_dir=str(folder))
    assert ["range" in shard for shard in whole.shards(manager)["train"]] == [False, False]
    expected = records(folder)
    monkeypatch.setattr(MnbvcBuilder, "RANGE_BYTES", 400, raising=False)
    shards = MnbvcBuilder(data_dir=str(folder)).shards(manager)["train"]
    names = [shard["name"] for shard in shards]
    assert names.count("forum/a.jsonl") > 3 and names.count("qa/b.jsonl") > 3
    assert [shard["range"][2] for shard in shards][:2] == [1, shards[1]["range"][2]]
    assert records(folder) == expected
    assert [r["conversation_id"] for r in expected][-25:] == [f"qa/b.jsonl:{n}" for n in range(1, 26)]


def test_gzipped_forum_file_is_not_split_into_ranges(tmp_path, monkeypatch):
    threads = [thread(n, f"主题{n}", [reply(1, "回")]) for n in range(20)]
    write_shard(tmp_path / "forum.jsonl", threads, gz=True)
    monkeypatch.setattr(MnbvcBuilder, "RANGE_BYTES", 100, raising=False)
    builder = MnbvcBuilder(data_dir=str(tmp_path))
    [shard] = builder.shards(datasets.DownloadManager(data_dir=str(tmp_path)))["train"]
    assert "range" not in shard
    assert len(records(tmp_path)) == 20


def test_error_in_a_later_range_names_the_files_own_line(tmp_path, monkeypatch):
    rows = [thread(n, f"主题{n}", [reply(1, "回复")]) for n in range(40)]
    rows[33] = '{"ID": 33, "主题": oops}'
    write_shard(tmp_path / "forum.jsonl", rows)
    monkeypatch.setattr(MnbvcBuilder, "RANGE_BYTES", 500, raising=False)
    builder = MnbvcBuilder(data_dir=str(tmp_path))
    shards = builder.shards(datasets.DownloadManager(data_dir=str(tmp_path)))["train"]
    later = [shard for shard in shards if shard["range"][2] <= 34 < shard["range"][2] + 100][-1]
    assert later["range"][2] > 1
    with pytest.raises(SourceError, match=r"^forum\.jsonl, record line 34: not valid JSON"):
        list(builder.parse_shard(later, Notes()))
    with pytest.raises(SourceError, match=r"^forum\.jsonl, record line 34: not valid JSON"):
        records(tmp_path)


def test_line_ranges_move_a_cut_inside_a_line_to_its_end(tmp_path):
    path = tmp_path / "f.jsonl"
    lines = [b'{"a": 1}', b"", b'{"b": "' + b"x" * 40 + b'"}', b'{"c": 3}\r', b'{"d": 4}', b'{"e": 5}']
    path.write_bytes(b"\n".join(lines))  # no LF after the last line
    size = path.stat().st_size  # lines start at bytes 0, 9, 10, 60, 70, 79
    assert size == 87
    # range_bytes 27: cuts at 21, 43, 65 fall inside lines 3 (→ byte 60), 3 (skipped) and 4 (→ 70)
    assert files.line_ranges(str(path), 27) == [(0, 60, 1), (60, 70, 4), (70, 87, 5)]
    # range_bytes 10: a cut at 9, right after an LF, starts a range there
    assert files.line_ranges(str(path), 10) == [(0, 9, 1), (9, 60, 2), (60, 70, 4), (70, 79, 5), (79, 87, 6)]
    assert files.line_ranges(str(path), 10**6) == [(0, size, 1)]
    whole = list(files.open_lines(partial(files.open_local, str(path)), "f.jsonl"))
    for range_bytes in (1, 5, 10, 27, 44, 86, 87, 88):  # 1: cuts inside the last line
        ranges = files.line_ranges(str(path), range_bytes)
        assert ranges[0][0] == 0 and ranges[-1][1] == size
        assert all(end == start for (_, end, _), (start, _, _) in itertools.pairwise(ranges))
        read = [line for r in ranges for line in files.range_lines(str(path), "f.jsonl", *r)]
        assert read == whole, range_bytes


def test_build_with_line_ranges_in_two_processes_equals_one_whole_read(tmp_path, monkeypatch):
    folder = range_fixture(tmp_path / "data")
    one = build_source("mnbvc", tmp_path / "one", str(folder), ["sessions"], num_proc=1)
    monkeypatch.setattr(MnbvcBuilder, "RANGE_BYTES", 400, raising=False)
    two = build_source("mnbvc", tmp_path / "two", str(folder), ["sessions"], num_proc=2)
    load = lambda result: datasets.load_dataset(str(result.output), "sessions", split="train")  # noqa: E731
    assert len(load(one)) == 55
    assert list(load(one)) == list(load(two))
    assert one.notes == two.notes


def test_partition_writers_in_several_processes_write_the_same_partitions(tmp_path):
    files = []
    for index in range(3):
        rows = [pair(f"c{n % 5}", n, f"f{index}-{n}") for n in range(6)]
        files.append((f"f{index}.jsonl", str(write_shard(tmp_path / f"f{index}.jsonl", rows))))
    names = [name for name, _ in files]

    def partitions(processes: int) -> list[list[str]]:
        folder = tmp_path / f"p{processes}"
        folder.mkdir()
        written = regroup.write_partitions(files, str(folder), 3, processes=processes)
        assert all(len(pieces) == min(processes, 3) for pieces in written)  # one piece per writer
        return [
            [
                record["conversation_id"] + str(questions(record))
                for record in regroup.read_partition(p, names, Notes())
            ]
            for p in written
        ]

    assert partitions(2) == partitions(1)
    assert sum(map(len, partitions(3))) == 5


def test_parallel_partition_pass_raises_the_error_a_serial_pass_meets_first(tmp_path):
    """Writers stop at their own first bad row; the error raised is the one of the earliest file, even
    when the writer of a later file (here the first writer, which takes the biggest file) fails too."""
    big_bad = [pair("c", 1, "q" * 3000), "[1, 2]"]
    files = [
        ("f0.jsonl", write_shard(tmp_path / "f0.jsonl", [pair("c", 2, "q" * 200), "{not json"])),
        ("f1.jsonl", write_shard(tmp_path / "f1.jsonl", [pair("c", 3, "q")])),
        ("f2.jsonl", write_shard(tmp_path / "f2.jsonl", big_bad)),
    ]
    files = [(name, str(path)) for name, path in files]
    sizes = [Path(path).stat().st_size for _, path in files]
    assert regroup.share_files(sizes, 2) == [[2], [0, 1]]
    for processes in (1, 2):
        folder = tmp_path / f"p{processes}"
        folder.mkdir()
        with pytest.raises(SourceError, match=r"^f0\.jsonl, record line 2: not valid JSON"):
            regroup.write_partitions(files, str(folder), 2, processes=processes)


def test_rows_are_converted_in_the_partition_pass_and_a_bad_one_is_still_rejected_alone_later(tmp_path):
    """The partition pass converts each row; a row it cannot convert (元数据 not an object) is rejected by
    ``read_partition`` alone, with its raw line, its normalizations dropped, its conversation built from
    the other rows."""
    loose = '{"会话": c, "多轮序号": %d, "解析模型": gpt4}'
    rows = [pair("c", n, f"q{n}", extension=loose % n) for n in (3, 2, 1)]
    rows[1]["元数据"] = ["not", "an", "object"]  # line 2, 多轮序号 2 (its 扩展字段 is then absent)
    shard = write_shard(tmp_path / "m.jsonl", rows)
    [pieces] = regroup.write_partitions([("m.jsonl", str(shard))], str(tmp_path), 1)
    rejected, notes = [], Notes()
    [record] = regroup.read_partition(pieces, ["m.jsonl"], notes, reject=lambda *args: rejected.append(args))
    assert questions(record) == ["q1", "q3"]
    [(error, raw)] = rejected
    assert (error.path, error.record, error.field) == ("m.jsonl", "line 2", "元数据")
    assert raw == shard.read_bytes().splitlines()[1]
    assert notes["元数据.扩展字段: unquoted values"] == 2  # the rejected row's count is dropped
    assert [turn["turn_id"] for turn in record["sessions"][0]["turns"]] == ["0q", "0a", "1q", "1a"]


def test_a_row_rejected_after_partitioning_does_not_win_over_a_later_unreadable_line(tmp_path):
    """Which error a build raises is unchanged: the partition pass raises only for lines it cannot read
    (here line 3), not for the row it converts to an error (line 1), which ``read_partition`` raises."""
    bad_metadata = pair("c", 1, "q1", 元数据="text")
    shard = write_shard(tmp_path / "m.jsonl", [bad_metadata, pair("c", 2, "q2"), "{not json"])
    with pytest.raises(SourceError, match=r"record line 3: not valid JSON"):
        regroup.write_partitions([("m.jsonl", str(shard))], str(tmp_path), 1)
    write_shard(tmp_path / "m.jsonl", [bad_metadata, pair("c", 2, "q2")])
    [pieces] = regroup.write_partitions([("m.jsonl", str(shard))], str(tmp_path), 1)
    with pytest.raises(SourceError, match=r"record line 1, field '元数据'"):
        list(regroup.read_partition(pieces, ["m.jsonl"], Notes()))


def test_unreadable_extension_warnings_follow_conversation_order_and_the_cap(tmp_path, caplog):
    """Warnings about unreadable 扩展字段 are logged by ``read_partition`` in conversation order (not in
    the partition pass's file order), at most ``MAX_WARNINGS_PER_FILE`` per file, then one summary."""
    count = parse.MAX_WARNINGS_PER_FILE + 5
    broken = '{"会话": "c", "多轮序号": %d, "解析模型": '
    rows = [pair(None, None, f"q{n}", row_id="same", extension=broken % n, 时间=str(n)) for n in range(count)]
    rows = [pair("d", 1, "first"), *rows[::-1]]
    shard = write_shard(tmp_path / "m.jsonl", rows)
    [pieces] = regroup.write_partitions([("m.jsonl", str(shard))], str(tmp_path), 1)
    notes = Notes()
    with caplog.at_level(logging.WARNING, logger="convhub.mnbvc.parse"):
        found = list(regroup.read_partition(pieces, ["m.jsonl"], notes))
    assert len(found) == 2
    lines = [
        int(message.split(", line ")[1].split(",")[0]) for message in caplog.messages if ", line " in message
    ]
    assert lines == sorted(range(2, count + 2))[: parse.MAX_WARNINGS_PER_FILE]  # sorted by (key, line)
    assert caplog.messages[-1] == "m.jsonl: more unreadable 扩展字段 strings; counted in the normalizations"
    assert notes["元数据.扩展字段 unreadable (raw string kept)"] == count


def test_key_lines_keep_integers_past_64_bits_exactly(tmp_path):
    """多轮序号 beyond 64 bits: orjson cannot write it, so its key line is json's, read back exactly.
    (Negative: a gap check over a huge positive 多轮序号 would enumerate every missing number.)"""
    big = -(2**70)
    rows = [pair("c", str(big + 1), "second"), pair("c", str(big), "first"), pair("c", 3, "third")]
    shard = write_shard(tmp_path / "m.jsonl", rows)
    [pieces] = regroup.write_partitions([("m.jsonl", str(shard))], str(tmp_path), 1)
    assert [entry[4] for entry in regroup._sorted_index(pieces)] == [big, big + 1, 3]
    [record] = regroup.read_partition(pieces, ["m.jsonl"], Notes())
    assert questions(record) == ["first", "second", "third"]


@pytest.mark.parametrize(
    "text",
    [
        b'{"a": 123456789012345678901234567890}',  # orjson would read a float, silently
        b'{"a": [1.5, {"b": 18446744073709551616}]}',
        b'{"a": NaN, "b": -Infinity}',
        b'\xef\xbb\xbf{"a": 1}',
        b'{"a": "\\ud800"}',
        b'{"a": 1, "a": 2, "b": -0}',
        '{"会话": "x", "多轮序号": 1}',
    ],
)
def test_loads_reads_what_json_reads(text):
    value, expected = files.loads(text), json.loads(text)
    assert repr(value) == repr(expected)


def test_gaps_and_duplicates_in_sequence_are_reported_and_rows_kept(tmp_path):
    write_shard(
        tmp_path / "m.jsonl",
        [
            pair("d", 1, "一"),
            pair("d", 2, "二a"),
            pair("d", 2, "二b"),
            pair("d", 5, "五"),
            pair("d", "x", "无序号"),
        ],
    )
    notes = Notes()
    [record] = records(tmp_path, notes=notes)
    assert questions(record) == ["一", "二a", "二b", "五", "无序号"]
    session_extra = extra(record["sessions"][0]["extra"])
    assert session_extra["duplicate_多轮序号"] == [2]
    assert session_extra["missing_多轮序号"] == [3, 4]
    assert session_extra["多轮序号"] == [1, 2, 2, 5, "x"]
    assert notes["multi-turn conversation with a duplicate 多轮序号 (all rows kept)"] == 1
    assert notes["multi-turn conversation with a gap in 多轮序号"] == 1
    assert notes["multi-turn row without an integer 多轮序号 (ordered after the numbered rows)"] == 1


def test_huge_sequence_number_gap_is_listed_as_ranges_without_enumerating_it(tmp_path):
    """多轮序号 2**40: the gap check walks the distinct numbers (it used to build range(1, 2**40 + 1),
    which never finishes); a gap of more than MAX_MISSING_LISTED numbers is listed as ranges."""
    huge = 2**40
    write_shard(
        tmp_path / "m.jsonl",
        [pair("h", 1, "一"), pair("h", huge, "末"), pair("h", 3, "三"), pair("h", 3, "三b")],
    )
    notes = Notes()
    [record] = records(tmp_path, notes=notes)
    assert questions(record) == ["一", "三", "三b", "末"]
    session_extra = extra(record["sessions"][0]["extra"])
    assert "missing_多轮序号" not in session_extra
    assert session_extra["missing_多轮序号_ranges"] == [[2, 2], [4, huge - 1]]
    assert session_extra["duplicate_多轮序号"] == [3]
    assert session_extra["多轮序号"] == [1, 3, 3, huge]
    assert notes["multi-turn conversation with a gap in 多轮序号"] == 1
    assert (
        notes[
            f"multi-turn conversation missing over {multiturn.MAX_MISSING_LISTED} 多轮序号 (gaps listed as ranges)"
        ]
        == 1
    )


def test_missing_ranges_match_the_enumerated_gaps():
    for numbers in ([], [1], [2], [-3, 0, 4], [1, 2, 2, 5], [7, 3, 3, 10, 1], [-5]):
        expected = sorted(set(range(1, max(numbers, default=0) + 1)) - set(numbers))
        listed = [n for first, last in multiturn.missing_ranges(numbers) for n in range(first, last + 1)]
        assert listed == expected, numbers


@pytest.mark.parametrize("missing", [multiturn.MAX_MISSING_LISTED, multiturn.MAX_MISSING_LISTED + 1])
def test_gap_is_listed_number_by_number_up_to_the_limit(tmp_path, missing):
    write_shard(tmp_path / "m.jsonl", [pair("g", 1, "一"), pair("g", missing + 2, "末")])
    [record] = records(tmp_path)
    session_extra = extra(record["sessions"][0]["extra"])
    if missing <= multiturn.MAX_MISSING_LISTED:
        assert session_extra["missing_多轮序号"] == list(range(2, missing + 2))
        assert "missing_多轮序号_ranges" not in session_extra
    else:
        assert session_extra["missing_多轮序号_ranges"] == [[2, missing + 1]]
        assert "missing_多轮序号" not in session_extra


def test_integers_past_the_int_string_limit_are_bad_input_not_a_crash(tmp_path):
    """Python refuses to read an integer of over 4300 digits (a ValueError that used to escape): a row
    holding one is a SourceError naming its line, a 扩展字段 holding one is unreadable (raw string kept),
    and a 多轮序号 string of such digits is ordered as text."""
    digits = "9" * 5000
    with pytest.raises(SourceError, match=r"^q\.jsonl, record line 3: not valid JSON"):
        files.load_row(('{"id": ' + digits + "}").encode(), "q.jsonl", 3)
    assert parse_extension('{"会话": 1, "多轮序号": ' + digits + "}").value is None
    assert parse_extension("{会话: 1, 多轮序号: " + digits + "}").value is None
    write_shard(tmp_path / "m.jsonl", [pair("t", digits, "长"), pair("t", 1, "一")])
    notes = Notes()
    [record] = records(tmp_path, notes=notes)
    assert questions(record) == ["一", "长"]
    assert extra(record["sessions"][0]["extra"])["多轮序号"] == [1, digits]
    assert notes["multi-turn row without an integer 多轮序号 (ordered after the numbered rows)"] == 1


def test_empty_session_key_falls_back_to_id_then_to_the_line(tmp_path):
    write_shard(
        tmp_path / "m.jsonl",
        [
            pair(None, 1, "甲1", row_id="md5-a", extension='{"会话": , "多轮序号": 1}'),
            pair(None, 1, "乙", row_id=None, extension='{"会话": "", "多轮序号": 1}'),
            pair(None, 2, "甲2", row_id="md5-a", extension='{"会话": , "多轮序号": 2}'),
        ],
    )
    notes = Notes()
    found = by_id(records(tmp_path, notes=notes))
    assert questions(found["ShareGPT/id:md5-a"]) == ["甲1", "甲2"]
    assert found["ShareGPT/id:md5-a"]["sessions"][0]["session_id"] == "id:md5-a"
    assert questions(found["ShareGPT/line:m.jsonl:2"]) == ["乙"]
    assert notes["multi-turn row with an empty or missing 会话 (grouped by id)"] == 2
    assert notes["multi-turn row with an empty or missing 会话 (grouped by line)"] == 1


def test_same_session_key_from_two_sources_stays_two_conversations(tmp_path):
    write_shard(tmp_path / "m.jsonl", [pair(1, 1, "a", source="ShareGPT"), pair(1, 2, "b", source="知乎")])
    assert set(by_id(records(tmp_path))) == {"ShareGPT/1", "知乎/1"}


def test_unquoted_extension_rows_are_grouped_by_their_session(tmp_path):
    write_shard(
        tmp_path / "m.jsonl",
        [
            pair(None, None, "一", extension='{"会话": yOKd88p, "多轮序号": 1, "解析模型": gpt4}'),
            pair(None, None, "二", extension='{"会话": yOKd88p, "多轮序号": 2, "解析模型": gpt4}'),
        ],
    )
    notes = Notes()
    [record] = records(tmp_path, notes=notes)
    assert record["conversation_id"] == "ShareGPT/yOKd88p"
    assert notes["元数据.扩展字段: unquoted values"] == 2
    first = extra(record["sessions"][0]["turns"][0]["extra"])
    assert first["扩展字段"] == {"会话": "yOKd88p", "多轮序号": 1, "解析模型": "gpt4"}
    assert first["row"]["元数据"]["扩展字段"] == '{"会话": yOKd88p, "多轮序号": 1, "解析模型": gpt4}'


def test_unreadable_extension_is_logged_with_file_and_line_and_kept_raw(tmp_path, caplog):
    broken = '{"会话": "abc", "多轮序号": 1, "解析模型": '
    write_shard(
        tmp_path / "m.jsonl", [pair("z", 1, "好"), pair(None, None, "坏", row_id="md5-b", extension=broken)]
    )
    notes = Notes()
    with caplog.at_level(logging.WARNING, logger="convhub.mnbvc.parse"):
        found = by_id(records(tmp_path, notes=notes))
    assert any("m.jsonl, line 2, 元数据.扩展字段: unreadable" in message for message in caplog.messages)
    assert notes["元数据.扩展字段 unreadable (raw string kept)"] == 1
    kept = extra(found["ShareGPT/id:md5-b"]["sessions"][0]["turns"][0]["extra"])
    assert kept["扩展字段"] is None
    assert kept["row"]["元数据"]["扩展字段"] == broken
    assert kept["扩展字段_problems"][0].startswith("unreadable")


def test_pair_turns_and_an_empty_answer(tmp_path):
    write_shard(tmp_path / "m.jsonl", [pair("a", 1, "问一", "答一"), pair("a", 2, "问二", "")])
    notes = Notes()
    [record] = records(tmp_path, notes=notes)
    assert texts(record) == [("0q", "user", "问一"), ("0a", "assistant", "答一"), ("1q", "user", "问二")]
    turns = record["sessions"][0]["turns"]
    assert turns[1]["reply_to"] == "0q"
    assert [turn["speaker"] for turn in turns] == ["问", "答", "问"]
    assert record["speakers"] == ["问", "答"]
    assert notes["empty 答 (question with no answer: no assistant turn)"] == 1


def test_ids_keep_their_type_and_times_their_raw_string(tmp_path):
    row = pair("a", 1, "问", row_id=20230517001)
    del row["时间"]
    write_shard(tmp_path / "m.jsonl", [row])
    notes = Notes()
    [record] = records(tmp_path, notes=notes)
    kept = extra(record["sessions"][0]["turns"][0]["extra"])
    assert kept["row"]["id"] == 20230517001
    assert "时间" not in kept["keys"]
    assert record["sessions"][0]["date_time"] == "20230517 10:41:58"
    assert record["sessions"][0]["timestamp"] == datetime(2023, 5, 17, 10, 41, 58)
    assert kept["create_timestamp"] == "2023-05-17T10:41:58"
    assert notes["时间 absent (session date_time from create_time)"] == 1


# -- 问答 -------------------------------------------------------------------------------------------------------


def test_qa_rows_are_one_conversation_each_with_typed_ids(tmp_path):
    write_shard(
        tmp_path / "qa.jsonl",
        [
            {
                "id": 0,
                "问": "如何?",
                "答": "这样。",
                "来源": "wikihow",
                "时间": "20230517",
                "元数据": {"扩展字段": ""},
            },
            {
                "id": "x1",
                "问": "出处?",
                "答": "论语。",
                "来源": "古籍",
                "时间": "-04790101",
                "元数据": {"扩展字段": "{}"},
            },
        ],
    )
    notes = Notes()
    found = by_id(records(tmp_path, notes=notes))
    assert set(found) == {"qa.jsonl:1", "qa.jsonl:2"}
    first, second = found["qa.jsonl:1"], found["qa.jsonl:2"]
    assert first["sessions"][0]["session_id"] == "0"
    assert extra(first["sessions"][0]["turns"][0]["extra"])["row"]["id"] == 0
    assert second["sessions"][0]["date_time"] == "-04790101"
    assert second["sessions"][0]["timestamp"] is None
    assert notes["int id → string (raw type kept in the row)"] == 1
    assert notes["时间 before year 1 (BC) or after 9999 (timestamp null, raw kept)"] == 1


# -- 论坛 -------------------------------------------------------------------------------------------------------


def test_forum_thread_turns_speakers_replies_and_times(tmp_path):
    replies = [
        reply("1", "有意者可加洞主微信", 回复人="洞主", 回复时间="20170924 13:54:21"),
        reply(2, "搭车转", 回复人="Alice", 回复时间="20170924 14:31:48", 点赞数=2),
        reply("3", "已出", 回复人="洞主", 引用ID=2, 引用人="Alice", 回复时间=""),
        reply("4", "楼上", 回复人="Bob", 引用ID="", 引用人="洞主"),
    ]
    write_shard(tmp_path / "forum.jsonl", [thread(275957, "出一张票", replies)])
    notes = Notes()
    [record] = records(tmp_path, notes=notes)
    turns = record["sessions"][0]["turns"]
    assert [(t["turn_id"], t["speaker"], t["role"], t["reply_to"]) for t in turns] == [
        ("topic", "楼主", "user", None),
        ("1", "洞主", "user", None),
        ("2", "Alice", "assistant", None),
        ("3", "洞主", "user", "2"),
        ("4", "Bob", "assistant", None),
    ]
    assert extra(turns[1]["extra"])["timestamp"] == "2017-09-24T13:54:21"
    assert extra(turns[3]["extra"])["timestamp"] is None
    assert extra(turns[0]["extra"])["timestamp"] == "2017-09-24T13:53:31"
    assert extra(turns[2]["extra"])["reply"]["楼ID"] == 2
    assert record["sessions"][0]["session_id"] == "275957"
    assert record["speakers"] == ["楼主", "洞主", "Alice", "Bob"]
    assert notes["int 楼ID → string (raw type kept in the row)"] == 1


def test_forum_empty_topic_escaped_keys_and_missing_speaker(tmp_path):
    escaped = {
        "楼ID": 1,
        "回复": "链接挂了",
        "扩展字段": json.dumps({"回复人": "Bob", "回复时间": ""}, ensure_ascii=True),
    }
    nobody = {"楼ID": 2, "回复": "?", "扩展字段": ""}
    write_shard(tmp_path / "forum.jsonl", [thread("t-1", "", [escaped, nobody])])
    notes = Notes()
    [record] = records(tmp_path, notes=notes)
    assert texts(record)[0] == ("topic", "user", "")
    assert record["sessions"][0]["turns"][1]["speaker"] == "Bob"
    assert record["sessions"][0]["turns"][2]["speaker"] == ""
    assert notes["forum thread with an empty 主题 (kept as an empty topic turn)"] == 1
    assert notes["forum reply without 回复人 (speaker empty)"] == 1


def test_forum_repeated_floor_and_quote_of_no_reply(tmp_path):
    replies = [reply("1", "a", 回复人="A"), reply("1", "b", 回复人="B", 引用ID="99")]
    write_shard(tmp_path / "forum.jsonl", [thread(1, "t", replies)])
    notes = Notes()
    [record] = records(tmp_path, notes=notes)
    assert [turn["turn_id"] for turn in record["sessions"][0]["turns"]] == ["topic", "1", "1~2"]
    assert notes["forum reply with a repeated 楼ID (turn_id suffixed ~n, raw kept)"] == 1
    assert notes["forum 引用ID naming no reply of the thread (reply_to kept as written)"] == 1


def test_forum_replies_that_are_not_a_list_fail_with_field(tmp_path):
    write_shard(tmp_path / "forum.jsonl", [thread(1, "t", [])])
    write_shard(tmp_path / "forum2.jsonl", [{**thread(2, "t", []), "回复": "none"}])
    with pytest.raises(SourceError, match=r"forum2\.jsonl, record line 1, field '回复'"):
        records(tmp_path)


# -- language and subsets -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("长城是中国古代修建的军事防御工程", "zh"),
        ("Sure, here's a Shakespearean script about a girl.", "en"),
        ("用Python写一个web server", "zh"),
        ("「こんにちは」です。", "ja"),
        ("안녕하세요 반갑습니다", "ko"),
        ("", "zh"),
    ],
)
def test_language_detection(text, language):
    assert languages.detect_language([text]) == language


def test_subsets_by_format_by_source_and_both(tmp_path):
    write_shard(
        tmp_path / "m.jsonl", [pair("a", 1, "q", source="ShareGPT"), pair("b", 1, "q", source="知乎")]
    )
    write_shard(tmp_path / "f.jsonl", [thread(1, "t", []), thread(2, "t", [], source="清华树洞")])
    assert {r["subset"] for r in records(tmp_path, subsets=("forum",))} == {
        "forum/北大树洞",
        "forum/清华树洞",
    }
    assert {r["subset"] for r in records(tmp_path, subsets=("知乎",))} == {"multiturn/知乎"}
    assert {r["subset"] for r in records(tmp_path, subsets=("forum/清华树洞", "ShareGPT"))} == {
        "forum/清华树洞",
        "multiturn/ShareGPT",
    }


# -- streaming ---------------------------------------------------------------------------------------------


def test_streaming_reads_every_format_directly(tmp_path):
    write_shard(
        tmp_path / "m.jsonl.gz", [pair("a", 2, "a2"), pair("a", 1, "a1"), pair("b", 1, "b1")], gz=True
    )
    write_shard(tmp_path / "f.jsonl", [thread(1, "t", [reply("1", "r", 回复人="X")])], crlf=True)
    builder = MnbvcBuilder(data_dir=str(tmp_path))
    streamed = builder.as_streaming_dataset(split="train")
    assert isinstance(streamed, datasets.IterableDataset)
    found = by_id(list(streamed))
    assert set(found) == {"ShareGPT/a", "ShareGPT/b", "f.jsonl:1"}
    assert questions(found["ShareGPT/a"]) == ["a1", "a2"]
    assert streamed.features == builder.info.features


def test_streaming_and_building_from_a_url(tmp_path):
    """An fsspec URL as data_dir: streamed from the URL, or downloaded by the build (memory:// stands in)."""
    import fsspec

    memory = fsspec.filesystem("memory")
    multiturn = write_shard(tmp_path / "m.jsonl.gz", [pair("a", 1, "a1"), pair("a", 2, "a2")], gz=True)
    forum = write_shard(tmp_path / "f.jsonl", [thread(1, "t", [])])
    memory.pipe(
        {"/mnbvc-test/sub/m.jsonl.gz": multiturn.read_bytes(), "/mnbvc-test/f.jsonl": forum.read_bytes()}
    )
    try:
        builder = MnbvcBuilder(data_dir="memory://mnbvc-test", cache_dir=str(tmp_path / "cache"))
        streamed = by_id(builder.as_streaming_dataset(split="train"))
        assert set(streamed) == {"ShareGPT/a", "f.jsonl:1"}
        assert questions(streamed["ShareGPT/a"]) == ["a1", "a2"]
        assert set(by_id(records("memory://mnbvc-test"))) == {"ShareGPT/a", "f.jsonl:1"}
    finally:
        memory.rm("/mnbvc-test", recursive=True)


def test_streaming_non_adjacent_rows_come_in_pieces_and_are_counted(tmp_path):
    write_shard(tmp_path / "m.jsonl", [pair("a", 1, "a1"), pair("b", 1, "b1"), pair("a", 2, "a2")])
    notes = Notes()
    shard = {
        "kind": "stream",
        "format": parse.MULTITURN,
        "name": "m.jsonl",
        "path": str(tmp_path / "m.jsonl"),
    }
    found = by_id(MnbvcBuilder(data_dir=str(tmp_path)).parse_shard(shard, notes))
    assert set(found) == {"ShareGPT/a", "ShareGPT/b", "ShareGPT/a#2"}
    assert notes["streamed multi-turn conversation whose rows are not adjacent (emitted in pieces)"] == 1
    assert set(by_id(records(tmp_path))) == {"ShareGPT/a", "ShareGPT/b"}  # the build regroups them


def test_streaming_turns_config(tmp_path):
    write_shard(tmp_path / "m.jsonl", [pair("a", 1, "a1", "r1"), pair("a", 2, "a2", "")])
    streamed = MnbvcBuilder(config_name="turns", data_dir=str(tmp_path)).as_streaming_dataset(split="train")
    assert [(row["turn_id"], row["text"]) for row in streamed] == [("0q", "a1"), ("0a", "r1"), ("1q", "a2")]


# -- default download --------------------------------------------------------------------------------------


def test_default_download_failure_asks_for_data_dir(monkeypatch):
    def offline():
        raise OSError("no network")

    monkeypatch.setattr(builder_module, "list_default_shards", offline)
    with pytest.raises(FileNotFoundError, match=r"liwu/MNBVC.*--data-dir"):
        records_default()
    monkeypatch.setattr(builder_module, "list_default_shards", lambda: [])
    with pytest.raises(FileNotFoundError, match="--data-dir"):
        records_default()


def records_default():
    builder = MnbvcBuilder()
    return builder.shards(datasets.DownloadManager())


def test_cli_without_data_dir_prints_the_message(monkeypatch, capsys):
    monkeypatch.setattr(
        builder_module, "list_default_shards", lambda: (_ for _ in ()).throw(OSError("offline"))
    )
    assert cli.main(["check", "mnbvc"]) == 1
    assert "--data-dir" in capsys.readouterr().err


def test_missing_data_dir_is_reported(tmp_path):
    with pytest.raises(FileNotFoundError, match="neither a folder nor a file"):
        records(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"no MNBVC \*\.jsonl"):
        records(tmp_path / "empty")


# -- the packaged sample: nothing lost, the build, the card, the CLI -----------------------------------------


SAMPLE_NOTES = {
    "multi-turn conversation spread over several files": 3,
    "multi-turn row with an empty or missing 会话 (grouped by id)": 3,
    "multi-turn conversation with a duplicate 多轮序号 (all rows kept)": 1,
    "multi-turn conversation with a gap in 多轮序号": 1,
    "元数据.扩展字段: unquoted values": 5,
    "元数据.扩展字段: empty values": 2,
    "元数据.扩展字段 unreadable (raw string kept)": 1,
    "回复.扩展字段 unreadable (raw string kept)": 1,
    "empty 答 (question with no answer: no assistant turn)": 2,
    "时间 before year 1 (BC) or after 9999 (timestamp null, raw kept)": 1,
    "时间 absent (session date_time from create_time)": 1,
    "时间 absent (session date_time from 发帖时间)": 1,
    "forum thread with an empty 主题 (kept as an empty topic turn)": 1,
    "conversation detected as en, not zh": 1,
    "conversation detected as ja, not zh": 1,
}


def test_sample_covers_every_quirk():
    notes, statistics = check_source("mnbvc", str(SAMPLE))
    for kind, count in SAMPLE_NOTES.items():
        assert notes[kind] == count, kind
    subsets = {subset for _, subset in statistics.by_split_subset}
    assert subsets == {"multiturn/ShareGPT", "qa/wikihow", "qa/古籍问答", "forum/北大树洞", "forum/清华树洞"}
    raw = (SAMPLE / "multiturn/sharegpt-0002.jsonl").read_bytes()
    assert raw.count(b"\r\n") == raw.count(b"\n") > 0
    assert (SAMPLE / "multiturn/sharegpt-0001.jsonl.gz").read_bytes()[:2] == b"\x1f\x8b"


def test_every_sample_row_rebuilds_exactly_from_the_built_sessions(sample_builds):
    result = sample_builds["mnbvc"]
    sessions = datasets.load_dataset(str(result.output), "sessions", split="train")
    rebuilt = {}
    for record in sessions:
        for file, line, row in export.rows_from_record(record):
            assert (file, line) not in rebuilt
            rebuilt[(file, line)] = row
    original = source_rows(SAMPLE)
    assert rebuilt.keys() == original.keys()
    for key, row in original.items():
        assert json.dumps(rebuilt[key], ensure_ascii=False) == json.dumps(row, ensure_ascii=False), key


def test_sample_build_counts_timestamps_and_configs(sample_builds):
    result = sample_builds["mnbvc"]
    assert set(result.configs) == {"sessions", "turns", "messages"}  # no memory questions: no qa config
    sessions = datasets.load_dataset(str(result.output), "sessions", split="train")
    assert sessions.num_rows == 15
    found = {row["conversation_id"]: row for row in sessions}
    assert found["qa/wikihow-and-classics.jsonl:3"]["sessions"][0]["timestamp"] == datetime(738, 3, 3)
    assert found["qa/wikihow-and-classics.jsonl:2"]["sessions"][0]["timestamp"] is None
    assert found["qa/wikihow-and-classics.jsonl:2"]["sessions"][0]["date_time"] == "-04790101"
    assert questions(found["ShareGPT/1"]) == [
        "长城是什么时候开始修建的？",
        "用一句话介绍一下长城。",
        "那它有多长？",
    ]
    messages = datasets.load_dataset(str(result.output), "messages", split="train")
    assert all(
        message["content"] or message["role"] == "user" for row in messages for message in row["messages"]
    )
    card = (result.output / "README.md").read_text()
    assert "MNBVC in this schema" in card
    assert "| multi-turn conversation with a gap in 多轮序号 | 1 |" in card
    assert "回复 by anyone else | `assistant`" in card


def test_build_with_two_processes_equals_one(tmp_path, monkeypatch):
    monkeypatch.setattr(MnbvcBuilder, "PARTITION_BYTES", 2000, raising=False)
    one = build_source("mnbvc", tmp_path / "one", str(SAMPLE), ["sessions"], num_proc=1)
    two = build_source("mnbvc", tmp_path / "two", str(SAMPLE), ["sessions"], num_proc=2)
    assert len(two.configs["sessions"].files["train"]) == 2  # one Parquet file per process
    load = lambda result: datasets.load_dataset(str(result.output), "sessions", split="train")  # noqa: E731
    assert list(load(one)) == list(load(two))  # the same rows in the same order
    assert one.notes == two.notes


def test_cli_check_and_build_with_format_and_subset(tmp_path, capsys):
    assert cli.main(["check", "mnbvc", "--sample", "--subset", "forum"]) == 0
    printed = capsys.readouterr().out
    assert "forum/北大树洞" in printed and "multiturn/ShareGPT" not in printed
    write_shard(tmp_path / "data/m.jsonl", [pair("a", 1, "一"), pair("a", 2, "二")])
    output = tmp_path / "out"
    args = ["build", "mnbvc", "--data-dir", str(tmp_path / "data"), "--output", str(output), "--format", "qa"]
    assert cli.main(args) == 0
    built = datasets.load_dataset(str(output), "sessions", split="train")
    assert built["subset"] == ["qa/ShareGPT", "qa/ShareGPT"]


def test_partitions_are_removed_after_check(tmp_path, monkeypatch):
    monkeypatch.setenv("CONVHUB_TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    records(spread_fixture(tmp_path / "data"))
    leftovers = [path for path in (tmp_path / "tmp").rglob("*") if path.is_file()]
    assert leftovers == []


def test_script_counts_are_the_regex_counts():
    """detect_language counts scripts with numpy; the counts are those of the module's patterns."""
    import random

    def regex_counts(sample: str) -> tuple[int, ...]:
        scripts = (languages.KANA, languages.HANGUL, languages.CJK)
        return (
            *(sum(map(len, s.findall(sample))) for s in scripts),
            len(languages.LATIN_WORD.findall(sample)),
        )

    rng = random.Random(0)
    alphabet = "abcXYZ 123,。的一是あいアイ한국어\ud800\U0001f600ＡＢ\u3400\uf900\u4dbf\u9fff\u30ff\u3040@[`{"
    for _ in range(3000):
        sample = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        assert languages._script_counts(sample) == regex_counts(sample)


def test_detect_language_decides_as_its_rule_on_every_count():
    """detect_language counts Latin words only when they can decide; its answer is the rule's on the full
    counts (samples from mostly-Latin to mostly-Hangul, so each branch is taken)."""
    import random

    def by_the_rule(text: str) -> str:
        kana, hangul, cjk, latin_words = languages._script_counts(text[: languages.LANGUAGE_SAMPLE_CHARS])
        if kana and kana * 5 >= cjk:
            return "ja"
        if hangul > cjk and hangul >= latin_words:
            return "ko"
        return "en" if latin_words > cjk else "zh"

    rng = random.Random(1)
    pieces = ["ab", "a b", "X", " ", "的", "一是", "あ", "한국", "\U0001f600", "\ud800", "1", "。"]
    seen = Counter()
    for _ in range(3000):
        weights = [rng.random() for _ in pieces]
        text = "".join(rng.choices(pieces, weights, k=rng.randint(0, 30)))
        seen[languages.detect_language([text])] += 1
        assert languages.detect_language([text]) == by_the_rule(text)
    assert set(seen) == {"zh", "en", "ja", "ko"}


def test_conversation_ids_are_unambiguous_where_parts_hold_separators(tmp_path):
    """Joined as they were, each pair below gave one id: the second conversation was called a duplicate."""
    write_shard(
        tmp_path / "data" / "m.jsonl",
        [
            pair("c", 1, "甲", source="a/b"),
            pair("b/c", 1, "乙", source="a"),
            pair("id:md5-a", 1, "丙"),
            pair(None, 1, "丁", row_id="md5-a", extension="{}"),
            pair("x%2Fy", 1, "戊", source="s"),
            pair("x/y", 1, "己", source="s"),
        ],
    )
    found = by_id(records(tmp_path / "data"))
    assert len(found) == 6
    assert questions(found["a%2Fb/c"]) == ["甲"]
    assert questions(found["a/b/c"]) == ["乙"]
    assert questions(found["ShareGPT/id%3Amd5-a"]) == ["丙"]
    assert questions(found["ShareGPT/id:md5-a"]) == ["丁"]
    assert questions(found["s/x%252Fy"]) == ["戊"]
    assert questions(found["s/x/y"]) == ["己"]
    result = build_source("mnbvc", tmp_path / "out", data_dir=str(tmp_path / "data"), on_bad_record="skip")
    assert result.skipped == 0


def test_symlink_loops_read_each_file_once_and_finish(tmp_path):
    data = tmp_path / "data"
    write_shard(data / "a" / "m.jsonl", [pair("c1", 1, "甲"), pair("c1", 2, "乙"), pair("c2", 1, "丙")])
    (data / "a" / "back").symlink_to(data)  # a loop: data/a/back/a/back/...
    (data / "b").symlink_to(data / "a")  # the same file under a second name
    (data / "b" / "deeper").symlink_to(data / "b")  # and a second loop
    found = records(data)
    assert sorted(record["conversation_id"] for record in found) == ["ShareGPT/c1", "ShareGPT/c2"]
    assert sum(len(record["sessions"][0]["turns"]) for record in found) == 6


def test_regrouping_a_json_document_is_one_error_naming_the_file(tmp_path):
    """The multi-turn regrouping reads files itself: a JSON document there is the same one error naming
    the file, not "not valid JSON" at its line 1."""
    shard = tmp_path / "m.jsonl"
    shard.write_text(json.dumps([pair("c", n, f"q{n}") for n in (1, 2)], ensure_ascii=False, indent=1))
    with pytest.raises(SourceError) as raised:
        regroup.write_partitions([("m.jsonl", str(shard))], str(tmp_path), 1)
    assert raised.value.path == "m.jsonl" and raised.value.record is None
    assert raised.value.problem.startswith("this is one JSON document, not JSON Lines: its first line '['")
