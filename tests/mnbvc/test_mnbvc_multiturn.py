"""多轮对话: regrouping a conversation's rows wherever they are (partitions, slices, processes), their order,
gaps and duplicates in 多轮序号, and bad rows rejected alone."""

from __future__ import annotations

import json
import logging
from datetime import datetime

import datasets
import pytest

from convhub.build import build_source
from convhub.builders.mnbvc import multiturn, parse
from convhub.builders.mnbvc.builder import MnbvcBuilder
from convhub.builders.mnbvc.extension import parse_extension
from convhub.engine.grouping import local_groupby
from convhub.engine.readers.exact_json import load_object
from convhub.errors import Notes, SourceError
from tests.mnbvc.mnbvc_rows import (
    by_id,
    extra,
    pair,
    partition,
    partition_records,
    questions,
    records,
    spread_fixture,
    texts,
    write_shard,
)

# -- multi-turn regrouping -------------------------------------------------------------------------------


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
    shards = builder.local_shards(datasets.DownloadManager(data_dir=str(folder)))["train"]
    assert len(shards) > 3  # one partition per ~100 bytes of input
    many = {}
    for shard in shards:
        for record in builder.records_of(shard, Notes()):
            many[record["conversation_id"]] = record
    assert many == one


def test_partition_memory_holds_offsets_not_rows(tmp_path):
    """The sorted index of a partition keeps (group, order, offset) per row, never the row's text."""
    long_answer = "长" * 5000
    shard = write_shard(tmp_path / "m.jsonl", [pair("c", n, f"q{n}", answer=long_answer) for n in (2, 1)])
    partitioned = partition([("m.jsonl", str(shard))], str(tmp_path), 1)
    [(group, rows)] = local_groupby.partition_keys(partitioned, 0)
    assert group == ("ShareGPT", "会话", "c")
    assert [row[0][1] for row in rows] == [1, 2]
    assert all(len(repr(row)) < 100 for row in rows)


def conversation_ids(builder: MnbvcBuilder, shards) -> list[str]:
    return [record["conversation_id"] for shard in shards for record in builder.records_of(shard, Notes())]


def test_slices_of_a_partition_give_its_conversations_in_the_same_order(tmp_path, monkeypatch):
    """A partition read as n slices (shards of similar size) gives the conversations one read gives."""
    folder = tmp_path / "data"
    rows = [pair(f"c{n % 7}", n // 7, f"q{n}") for n in range(40)]
    write_shard(folder / "a.jsonl", rows[::2])
    write_shard(folder / "b.jsonl", rows[1::2])
    manager = datasets.DownloadManager(data_dir=str(folder))
    whole = MnbvcBuilder(data_dir=str(folder))
    [shard] = whole.local_shards(manager)["train"]
    assert shard.part == (0, 1)
    monkeypatch.setattr(MnbvcBuilder, "SLICE_BYTES", 500, raising=False)
    sliced = MnbvcBuilder(data_dir=str(folder))
    shards = sliced.local_shards(manager)["train"]
    assert [shard.part for shard in shards] == [(number, len(shards)) for number in range(len(shards))]
    assert len(shards) > 3
    one = conversation_ids(whole, [shard])
    assert one == sorted(one) and len(one) == 7
    assert conversation_ids(sliced, shards) == one
    assert conversation_ids(sliced, shards[::-1]) == [
        i for shard in shards[::-1] for i in conversation_ids(sliced, [shard])
    ]


@pytest.mark.slow
def test_partition_writers_in_several_processes_write_the_same_partitions(tmp_path):
    files = []
    for index in range(3):
        rows = [pair(f"c{n % 5}", n, f"f{index}-{n}") for n in range(6)]
        files.append((f"f{index}.jsonl", str(write_shard(tmp_path / f"f{index}.jsonl", rows))))
    names = [name for name, _ in files]

    def partitions(processes: int) -> list[list[str]]:
        folder = tmp_path / f"p{processes}"
        folder.mkdir()
        written = partition(files, str(folder), 3, processes=processes)
        assert len(written.rows) == min(processes, 3)  # one file of converted rows per writer
        return [
            [
                record["conversation_id"] + str(questions(record))
                for record in partition_records(written, p, names, Notes())
            ]
            for p in range(3)
        ]

    assert partitions(2) == partitions(1)
    assert sum(map(len, partitions(3))) == 5


def test_rows_are_converted_in_the_partition_pass_and_a_bad_one_is_still_rejected_alone_later(tmp_path):
    """The partition pass converts each row; a row it cannot convert (元数据 not an object) is rejected by
    ``read_partition`` alone, with its raw line, its normalizations dropped, its conversation built from
    the other rows."""
    loose = '{"会话": c, "多轮序号": %d, "解析模型": gpt4}'
    rows = [pair("c", n, f"q{n}", extension=loose % n) for n in (3, 2, 1)]
    rows[1]["元数据"] = ["not", "an", "object"]  # line 2, 多轮序号 2 (its 扩展字段 is then absent)
    shard = write_shard(tmp_path / "m.jsonl", rows)
    partitioned = partition([("m.jsonl", str(shard))], str(tmp_path), 1)
    rejected, notes = [], Notes()
    [record] = partition_records(
        partitioned, 0, ["m.jsonl"], notes, reject=lambda *args: rejected.append(args)
    )
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
        partition([("m.jsonl", str(shard))], str(tmp_path), 1)
    write_shard(tmp_path / "m.jsonl", [bad_metadata, pair("c", 2, "q2")])
    partitioned = partition([("m.jsonl", str(shard))], str(tmp_path), 1)
    with pytest.raises(SourceError, match=r"record line 1, field '元数据'"):
        list(partition_records(partitioned, 0, ["m.jsonl"], Notes()))


def test_unreadable_extension_warnings_follow_conversation_order_and_the_cap(tmp_path, caplog):
    """Warnings about unreadable 扩展字段 are logged by ``read_partition`` in conversation order (not in
    the partition pass's file order), at most ``MAX_WARNINGS_PER_FILE`` per file, then one summary."""
    count = parse.MAX_WARNINGS_PER_FILE + 5
    broken = '{"会话": "c", "多轮序号": %d, "解析模型": '
    rows = [pair(None, None, f"q{n}", row_id="same", extension=broken % n, 时间=str(n)) for n in range(count)]
    rows = [pair("d", 1, "first"), *rows[::-1]]
    shard = write_shard(tmp_path / "m.jsonl", rows)
    partitioned = partition([("m.jsonl", str(shard))], str(tmp_path), 1)
    notes = Notes()
    with caplog.at_level(logging.WARNING, logger="convhub.builders.mnbvc.parse"):
        found = list(partition_records(partitioned, 0, ["m.jsonl"], notes))
    assert len(found) == 2
    lines = [
        int(message.split(", line ")[1].split(",")[0]) for message in caplog.messages if ", line " in message
    ]
    assert lines == sorted(range(2, count + 2))[: parse.MAX_WARNINGS_PER_FILE]  # sorted by (key, line)
    assert caplog.messages[-1] == "m.jsonl: more unreadable 扩展字段 strings; counted in the normalizations"
    assert notes["元数据.扩展字段 unreadable (raw string kept)"] == count


def test_keys_keep_integers_past_64_bits_exactly(tmp_path):
    """多轮序号 beyond 64 bits: no engine column holds it, so a key keeps a conversation's order as Python values
    and Python sorts them. (Negative: a gap check over a huge positive 多轮序号 would enumerate every missing
    number.)"""
    big = -(2**70)
    rows = [pair("c", str(big + 1), "second"), pair("c", str(big), "first"), pair("c", 3, "third")]
    shard = write_shard(tmp_path / "m.jsonl", rows)
    partitioned = partition([("m.jsonl", str(shard))], str(tmp_path), 1)
    [(_, rows)] = local_groupby.partition_keys(partitioned, 0)
    assert [row[0][1] for row in rows] == [big, big + 1, 3]
    [record] = partition_records(partitioned, 0, ["m.jsonl"], Notes())
    assert questions(record) == ["first", "second", "third"]


def test_the_engine_sorts_conversations_in_pythons_order_of_their_texts(tmp_path):
    """DuckDB sorts 来源, how and key as UTF-8 bytes: the order Python gives the texts, a lone surrogate (kept
    through ``surrogatepass``), characters past the BMP and a prefix included; each slice of the partition is
    a run of that order, and the slices cover it once."""
    sessions = ["b", "a", "中", "\ud800x", "\U0001f600", "ab", "a b", "\ue000", "\ud7ff", "A"]
    extension = '{"会话": "%s", "多轮序号": 1, "解析模型": "gpt4"}'
    rows = [
        pair(None, None, f"q{n}", extension=extension % json.dumps(text)[1:-1], source=source)
        for n, text in enumerate(sessions)
        for source in ("来源b", "来源a")
    ]
    shard = write_shard(tmp_path / "m.jsonl", rows)
    partitioned = partition([("m.jsonl", str(shard))], str(tmp_path), 1)
    whole = list(local_groupby.partition_keys(partitioned, 0))
    assert [group for group, _ in whole] == sorted(
        (source, "会话", text) for text in sessions for source in ("来源b", "来源a")
    )
    slices = [list(local_groupby.partition_keys(partitioned, 0, (number, 3))) for number in range(3)]
    assert [len(part) for part in slices] == [6, 7, 7]
    assert [conversation for part in slices for conversation in part] == whole
    records = list(partition_records(partitioned, 0, ["m.jsonl"], Notes()))
    assert [record["sessions"][0]["session_id"] for record in records] == [group[2] for group, _ in whole]


@pytest.mark.slow
@pytest.mark.parametrize("where", ["会话", "来源", "id"])
def test_a_lone_surrogate_in_a_conversation_key_is_a_named_bad_record_not_a_crash(tmp_path, where):
    """The regrouping hashes and sorts the key as UTF-8 with surrogates passed, so a key Parquet cannot store
    reaches the check every record meets (it crashed the partition pass with a UnicodeEncodeError before)."""
    if where == "会话":
        bad = pair(None, None, "bad", extension='{"会话": "\\ud800", "多轮序号": 1, "解析模型": "gpt4"}')
    elif where == "来源":
        bad = pair("c", 1, "bad", source="\ud800")
    else:
        bad = pair(None, None, "bad", extension='{"多轮序号": 1}', row_id="\ud800")
    shard = tmp_path / "data" / "multiturn" / "m.jsonl"
    text = "".join(json.dumps(row) + "\n" for row in [bad, pair("ok", 1, "good")])  # ASCII: escapes kept
    shard.parent.mkdir(parents=True)
    shard.write_text(text, encoding="utf-8")
    with pytest.raises(SourceError, match="lone surrogate") as raised:
        build_source("mnbvc", tmp_path / "raise", data_dir=str(tmp_path / "data"), num_proc=1)
    assert raised.value.path == "multiturn/m.jsonl"
    result = build_source("mnbvc", tmp_path / "skip", data_dir=str(tmp_path / "data"), on_bad_record="skip")
    assert result.skipped == 1
    sessions = datasets.load_dataset(str(tmp_path / "skip"), "sessions", split="train")
    assert sessions["conversation_id"] == ["ShareGPT/ok"]


def test_a_lone_surrogate_after_clean_conversations_is_still_a_named_bad_record(tmp_path, monkeypatch):
    """A partition's records are checked one by one only from the first row that may hold a lone surrogate on
    (``SurrogateScreen``): the conversation made before it is kept unchecked, the bad one rejected by name, and
    the conversations kept are those the check of every record kept."""
    rows = [
        pair("a", 1, "一"),
        pair("a", 2, "二"),
        pair("b", 1, "三"),
        pair("c", 1, "\ud800"),
        pair("d", 1, "四"),
    ]
    shard = tmp_path / "data" / "multiturn" / "m.jsonl"
    shard.parent.mkdir(parents=True)
    shard.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")  # ASCII: escapes kept
    checked = []
    storable = MnbvcBuilder._storable

    def counted(self, value, shard, record):
        checked.append(record)
        return storable(self, value, shard, record)

    monkeypatch.setattr(MnbvcBuilder, "_storable", counted)
    with pytest.raises(SourceError, match="lone surrogate") as raised:
        build_source("mnbvc", tmp_path / "raise", data_dir=str(tmp_path / "data"), num_proc=1)
    assert (raised.value.path, raised.value.record) == ("multiturn/m.jsonl", "ShareGPT/c")
    assert raised.value.field == "sessions[0].turns[0].text"
    checked.clear()
    result = build_source("mnbvc", tmp_path / "skip", data_dir=str(tmp_path / "data"), on_bad_record="skip")
    assert result.skipped == 1
    sessions = datasets.load_dataset(str(tmp_path / "skip"), "sessions", split="train")
    assert sessions["conversation_id"] == ["ShareGPT/a", "ShareGPT/b", "ShareGPT/d"]
    assert "ShareGPT/a" not in checked and {"ShareGPT/c", "ShareGPT/d"} <= set(checked)


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
        load_object(('{"id": ' + digits + "}").encode(), "q.jsonl", "line 3")
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
    with caplog.at_level(logging.WARNING, logger="convhub.builders.mnbvc.parse"):
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
