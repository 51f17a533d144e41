"""MNBVC's pure readers: the tolerant ``扩展字段`` reader, dates, JSONL lines (gzip, CRLF, byte ranges, exact JSON)
and format detection."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from convhub.builders.mnbvc import dates
from convhub.builders.mnbvc import extension as extension_module
from convhub.builders.mnbvc.extension import parse_extension
from convhub.engine.readers import json_lines
from convhub.errors import Notes, SourceError
from tests.mnbvc.mnbvc_rows import pair, records, thread, write_shard

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


# -- reading shards ----------------------------------------------------------------------------------------


def test_lines_of_gzipped_and_crlf_shards(tmp_path):
    rows = [pair("a", 1, "你好"), pair("a", 2, "再见")]
    plain = write_shard(tmp_path / "a.jsonl", rows, crlf=True)
    zipped = write_shard(tmp_path / "b.jsonl.gz", rows, gz=True, crlf=True)
    for path in (plain, zipped):
        lines = list(json_lines.iter_lines(path))
        assert [number for number, _, _ in lines] == [1, 2]
        assert all(not line.endswith(b"\r") for _, _, line in lines)
        assert [json.loads(line)["问"] for _, _, line in lines] == ["你好", "再见"]


def test_gzip_is_recognized_by_content_not_name(tmp_path):
    path = write_shard(tmp_path / "named-plain.jsonl", [pair("a", 1, "你好")], gz=True)
    assert [row["问"] for _, _, _, row in json_lines.read_objects(path, "MNBVC")] == ["你好"]


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
