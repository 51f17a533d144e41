"""``convhub.engine.readers.exact_json``: every source's JSON read with ``json``'s values, through orjson where the two agree."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from convhub.engine.readers import storable
from convhub.engine.readers.exact_json import (
    load_object,
    loads_exact,
    may_hold_long_integer,
)
from convhub.engine.readers.storable import unencodable_field
from convhub.errors import SourceError


@pytest.mark.parametrize(
    "text",
    [
        b'[{"n": -9223372036854775809}]',  # one below int64: orjson would read a float, silently
        b'{"a": [1.5, {"b": 18446744073709551616}]}',
        b"[123456789012345678901234567890,\n  -12345678901234567890123]",
        b'[{"n": 9223372036854775807, "m": -9223372036854775808, "x": 1.5, "z": -0.0}]',
        b'[{"url": "https://x.com/status/1026209343625756672", "n": 3}]',
        b"[NaN, Infinity, -Infinity, 1e400]",
        b'\xef\xbb\xbf{"a": 1}',
        b'["\\ud800 lone surrogate"]',
        b'{"a": 1, "a": 2, "b": -0}',
        '{"会话": "x", "多轮序号": 1}'.encode(),
    ],
)
def test_loads_exact_reads_what_json_reads(text):
    assert repr(loads_exact(text)) == repr(json.loads(text))


def _json_containers(children):
    return st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=3), children, max_size=4)


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(), _json_containers))
def test_loads_exact_reads_any_value_as_json_does(value):
    """A value holding a float is read again by ``json``: it comes back as ``json`` reads it, types included."""
    text = json.dumps(value).encode()
    assert json.dumps(loads_exact(text)) == json.dumps(json.loads(text))


def test_long_digit_runs_inside_strings_do_not_send_a_text_to_json():
    """A tweet id in an img_url is no integer: such texts still take orjson."""
    assert not may_hold_long_integer(b'[{"img_url": ["https://x.com/s/1026209343625756672"]}]')
    assert may_hold_long_integer(b'[{"n": 1026209343625756672}]')
    assert may_hold_long_integer(b"1026209343625756672")


def test_loads_exact_reads_a_text_as_json_reads_it():
    """A text (MNBVC's 扩展字段) is json's text: a lone surrogate is kept, a byte-order mark refused."""
    assert repr(loads_exact('{"a": "\ud800", "b": "北"}')) == repr(json.loads('{"a": "\ud800", "b": "北"}'))
    with pytest.raises(json.JSONDecodeError, match="BOM"):
        loads_exact('\ufeff{"a": 1}')


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b'{"a": ', "not valid JSON: Expecting value"),
        (b'{"a": "\xff"}', "not valid UTF-8"),
        (b"[1, 2]", "expected a JSON object, got list"),
        (b"[" * 5000 + b"]" * 5000, "a value is nested too deeply"),
        (b'{"a": ' + b"1" * 5000 + b"}", "not valid JSON: Exceeds the limit (4300 digits)"),
    ],
)
def test_a_line_that_is_no_json_object_is_named_by_file_and_line(raw, problem):
    with pytest.raises(SourceError) as raised:
        load_object(raw, "f.jsonl", "line 7")
    assert str(raised.value).startswith(f"f.jsonl, record line 7: {problem}")


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ({"sessions": [{"turns": [{"text": "ok"}, {"text": "bad \ud800"}]}]}, "sessions[0].turns[1].text"),
        ({"a": "fine", "b": ["x", {"c": 1}]}, None),
        ({1: "an int key, fine"}, None),  # orjson refuses the key: the walk says the strings are encodable
        ({1: {"t": "\udfff"}}, "1.t"),
        ({"\ud800": 1}, "'\\ud800'"),
        ("\ud800", "$"),
    ],
)
def test_unencodable_field_names_the_string_utf8_cannot_encode(value, field):
    assert unencodable_field(value) == field


@pytest.mark.parametrize("bad_turn", [0, 4095, 4096, 9999])
def test_a_long_list_is_checked_in_pieces_and_its_bad_string_named(monkeypatch, bad_turn):
    """A conversation of many turns is encoded a slice of turns at a time (issue 54), and a lone surrogate in any
    slice is still found and named by the walk; with none, every slice encodes."""
    turns = [{"text": f"t{index}", "images": []} for index in range(10_000)]
    record = {"id": "c", "sessions": [{"session_id": "s", "turns": turns}], "questions": [{"q": "x"}]}
    assert unencodable_field(record) is None
    encoded = []
    monkeypatch.setattr(storable.orjson, "dumps", lambda value, **options: encoded.append(value) or b"")
    unencodable_field(record)
    assert max(len(value) for value in encoded if isinstance(value, list)) == storable.ENCODED_SLICE
    monkeypatch.undo()
    turns[bad_turn]["text"] = "\ud800"
    assert unencodable_field(record) == f"sessions[0].turns[{bad_turn}].text"


def test_a_record_without_a_long_list_is_encoded_in_one_call(monkeypatch):
    record = {"id": "c", "sessions": [{"turns": [{"text": f"t{index}"} for index in range(4096)]}] * 3}
    encoded = []
    monkeypatch.setattr(storable.orjson, "dumps", lambda value, **options: encoded.append(value) or b"")
    assert unencodable_field(record) is None
    assert encoded == [record]
