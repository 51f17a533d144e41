"""Reading a LoCoMo file: the fast readers (orjson, yajl one sample at a time) give what ``json.loads`` gives."""

from __future__ import annotations

import gc
import io
import json

import pytest
from convhub.errors import Notes, SourceError
from convhub.jsonio import holds_lone_surrogate_escape, may_hold_long_integer
from convhub.locomo import parse, read
from locomo_samples import tiny_sample

# -- the fast paths give what the plain code gives --------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '[{"n": -9223372036854775809}]',  # one below int64: orjson would read a float
        '[{"n": 18446744073709551616}]',
        "[123456789012345678901234567890,\n  -12345678901234567890123]",
        '[{"n": 9223372036854775807, "m": -9223372036854775808, "x": 1.5, "z": -0.0}]',
        '[{"url": "https://x.com/status/1026209343625756672", "n": 3}]',
        "[NaN, Infinity, -Infinity, 1e400]",
        '["\\ud800 lone surrogate"]',
        '{"a": 1, "a": 2}',
    ],
)
def test_a_file_reads_as_json_loads_reads_it(text):
    assert repr(read.load_json(text.encode("utf-8"))) == repr(json.loads(text))


def test_long_digit_runs_inside_strings_do_not_send_a_file_to_json_loads():
    """A tweet id in an img_url is no integer: such files (the real one) still take the fast reader."""
    assert not may_hold_long_integer(b'[{"img_url": ["https://x.com/s/1026209343625756672"]}]')
    assert may_hold_long_integer(b'[{"n": 1026209343625756672}]')
    assert may_hold_long_integer(b"1026209343625756672")


def test_an_integer_beyond_64_bits_in_an_unknown_key_is_kept_exactly(tmp_path):
    sample = tiny_sample()
    sample["qa"][0]["big"] = 123456789012345678901234567890
    path = tmp_path / "big.json"
    path.write_text(json.dumps([sample]), encoding="utf-8")
    [record] = parse.parse_file(path, Notes())
    assert '"big": 123456789012345678901234567890' in record["questions"][0]["extra"]


def test_the_parser_leaves_the_cycle_collector_as_the_caller_set_it(tmp_path):
    """A caller that holds a record, stops iterating or raises finds the collector as it left it."""
    path = tmp_path / "two.json"
    path.write_text(json.dumps([tiny_sample("conv-1"), tiny_sample("conv-2")]), encoding="utf-8")
    records = parse.parse_indexed(path, Notes())
    next(records)
    assert gc.isenabled()
    assert [index for index, _ in records] == [1]
    assert gc.isenabled()
    gc.disable()  # a caller that runs without the collector keeps it off
    try:
        assert len(list(parse.parse_file(path, Notes()))) == 2
        assert not gc.isenabled()
    finally:
        gc.enable()


# -- a file is read one sample at a time -------------------------------------------------------------------

#: Files whose reading must not change with the streaming reader: the fast path, each of its refusals
#: (NaN, long integers, float overflow, lone surrogates), and broken or odd files.
FILE_TEXTS = [
    '[{"a": 1, "b": [1.5, -0.0, 1e2, "x"]}, [1], 3, "s", null]',
    '[{"n": 123456789012345678901234567890}, {"m": 2}]',
    '[{"x": 1}, {"x": NaN}, {"x": Infinity}]',
    '[{"x": 1}, {"x": 1.5e400}]',
    '[{"x": "\\ud83d\\ude00 an emoji written by ensure_ascii"}]',
    '[{"x": "fine"}, {"x": "\\ud800 lone high"}]',
    '[{"x": "\\udc00 lone low"}]',
    '[{"x": "a\\\\ud83d\\ude00: an escaped backslash, then a lone low surrogate"}]',
    '[{"a": 1, "a": 2}]',
    '  \n[{"a": 1}]  \n',
    '{"a": 1}',
    "[]",
    "",
    '[{"a": 1}] trailing',
    '[{"a": 1}, {"a": 2}',
    '\ufeff[{"a": 1}]',
]


def _read(function, path):
    try:
        return repr(list(function(path)))
    except SourceError as error:
        return f"SourceError: {error}"


@pytest.mark.parametrize("text", FILE_TEXTS)
def test_a_file_streams_as_read_samples_reads_it(tmp_path, text):
    path = tmp_path / "f.json"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    assert _read(read.iter_samples, path) == _read(read.read_samples, path)


def test_samples_come_before_the_end_of_the_file_is_read(tmp_path):
    """Memory follows one sample, not the file: the first samples arrive although the file is broken
    further on, and the break is the error read_samples gives for the file."""
    path = tmp_path / "broken.json"
    path.write_text(json.dumps([tiny_sample("conv-1"), tiny_sample("conv-2")])[:-1] + ", {", encoding="utf-8")
    records = parse.parse_indexed(path, Notes())
    assert [next(records)[1]["conversation_id"], next(records)[1]["conversation_id"]] == ["conv-1", "conv-2"]
    with pytest.raises(SourceError, match="broken or truncated"):
        next(records)


@pytest.mark.parametrize(
    ("text", "lone"),
    [
        ('"\\ud83d\\ude00"', False),
        ('"\\ud83d\\ude00\\ud83d\\ude00"', False),
        ('"\\ud800x"', True),
        ('"\\udc00"', True),
        ('"\\ud83d"', True),
        ('"\\ud83d\\ud83d\\ude00"', True),
        ('"\\ud83d\\ude00\\ude00"', True),
    ],
)
def test_lone_surrogate_escapes_are_found_and_read_as_json_reads_them(tmp_path, text, lone):
    """yajl would read a lone surrogate escape as "?": every one must send the file to json; a pair
    must not (the file streams)."""
    assert any(0xD800 <= ord(char) <= 0xDFFF for char in json.loads(text)) == lone
    data = ("[" + '"x",' * 20 + text + "," + '"y",' * 20 + "1]").encode()
    assert holds_lone_surrogate_escape(data) == lone
    path = tmp_path / "f.json"
    path.write_bytes(data)
    assert repr(list(read.iter_samples(path))) == repr(json.loads(data))
    for first in range(1, len(data) + 1):  # wherever yajl's reads cut the bytes
        for size in (1, 5, 64):
            watch = read._LoneSurrogateWatch(io.BytesIO(data))
            try:
                watch.read(first)
                while watch.read(size):
                    pass
                found = False
            except read._LoneSurrogateFound:
                found = True
            assert found == lone, (first, size)
