"""``convhub.engine.readers.json_list``: a top-level JSON list read one element at a time gives ``json.loads``'s values, exact
byte ranges, and errors that name the file's byte, whatever the chunk a read cuts."""

from __future__ import annotations

import io
import json

import pytest

from convhub.engine.readers.json_list import scan_json_array
from convhub.errors import Reject, SourceError

CHUNK_SIZES = (1, 7, 64, 1 << 22)


def keeping(breaks: list) -> Reject:
    """An ``on_break`` (called as a ``Reject``, scope ``span``) keeping each break's (error, bytes skipped,
    elements they held)."""

    def on_break(error: SourceError, skipped, scope: str, records: int) -> None:
        assert scope == "span"
        breaks.append((error, skipped, records))

    return on_break


#: Lists whose values json reads with a twist another parser might not give: integers past 64 bits, NaN,
#: infinities and float overflow, lone surrogates (ijson's C parser read them as "?"), a pair written by
#: ``ensure_ascii``, a repeated key, a BOM and whitespace around the list.
GOOD_TEXTS = [
    '[{"a": 1, "b": [1.5, -0.0, 1e2, "x"]}, [1], 3, "s", null]',
    '[{"n": 123456789012345678901234567890}, {"m": -9223372036854775809}]',
    '[{"x": 1}, {"x": NaN}, {"x": Infinity}, {"x": -Infinity}, {"x": 1.5e400}]',
    '[{"x": "\\ud83d\\ude00 an emoji written by ensure_ascii"}]',
    '[{"x": "fine"}, {"x": "\\ud800 lone high"}, {"x": "\\udc00 lone low"}]',
    '[{"x": "a\\\\ud83d\\ude00: an escaped backslash, then a lone low surrogate"}]',
    '[{"a": 1, "a": 2}]',
    '  \n[{"a": 1}]  \n',
    "[]",
    '[{"t": "北山 } ] {"}, {"t": "\\n"}]',
]


@pytest.mark.parametrize("text", GOOD_TEXTS)
@pytest.mark.parametrize("chunk_size", CHUNK_SIZES)
def test_values_are_json_loads_values_and_ranges_are_their_exact_bytes(text, chunk_size):
    raw = text.encode("utf-8")
    found = list(scan_json_array(io.BytesIO(raw), "f.json", chunk_size=chunk_size))
    assert repr([value for *_, value in found]) == repr(json.loads(text))
    assert [repr(json.loads(raw[start:end])) for start, end, *_ in found] == [repr(v) for *_, v in found]
    assert [position for _, _, position, _ in found] == list(range(len(found)))


@pytest.mark.parametrize("indent", [None, 0, 2, "\t"])
def test_indented_and_compact_files_give_the_same_values(indent):
    elements = [{"id": f"x-{i}", "nested": {"a": [{"b": "} \n }"}]}, "n": i / 3} for i in range(30)]
    raw = json.dumps(elements, indent=indent).encode()
    for chunk_size in CHUNK_SIZES:
        found = list(scan_json_array(io.BytesIO(raw), "f.json", chunk_size=chunk_size))
        assert [value for *_, value in found] == elements


def test_a_bom_before_the_list_is_skipped_and_counted_in_the_ranges():
    raw = '\ufeff[ {"a": 1} ]'.encode()
    [(start, end, _, value)] = scan_json_array(io.BytesIO(raw), "f.json")
    assert value == {"a": 1} and raw[start:end] == b'{"a": 1}'


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", r"f\.json: the file is empty \(expected a JSON list of samples\)"),
        ('{"a": 1}', r"f\.json: expected a JSON list of samples"),
        ('[{"a": 1}] trailing', r"f\.json: data after the end of the top-level list"),
        (
            '[{"a": 1}, {"a": 2}',
            r"f\.json, record 2: expected ',' or ']' after sample 1, got the end of the file",
        ),
        (
            '[{"a": 1}, {"a": "tw',
            r"f\.json, record 1: not valid JSON: Unterminated string starting at byte 17",
        ),
        ('[{"a": 1} {"a": 2}]', r"f\.json, record 1: expected ',' or ']' after sample 0, got '\{'"),
        ('[{"a": 1}, {"a": tru}]', r"f\.json, record 1: not valid JSON: Expecting value at byte 17"),
    ],
)
def test_a_broken_list_names_the_file_the_element_and_the_byte_at_any_chunk_size(text, problem):
    for chunk_size in CHUNK_SIZES:
        with pytest.raises(SourceError, match=f"^{problem}"):
            list(
                scan_json_array(io.BytesIO(text.encode()), "f.json", chunk_size=chunk_size, element="sample")
            )


def test_the_elements_before_a_break_come_before_its_error():
    elements = scan_json_array(io.BytesIO(b'[{"a": 1}, {"a": 2}, {"a": '), "f.json", chunk_size=4)
    assert [next(elements)[3], next(elements)[3]] == [{"a": 1}, {"a": 2}]
    with pytest.raises(SourceError, match="record 2: not valid JSON"):
        next(elements)


def test_invalid_utf8_is_named_by_its_byte_in_the_file_at_any_chunk_size():
    """The decoder counts from its chunk: the error names the file's byte, also for a character a chunk cut."""
    raw = '[{"id": "北京", "x": "'.encode() + b"\xe5\x8c" + b'A"}]'
    bad = raw.rindex(b"\xe5\x8c")
    for chunk_size in (1, 2, 7, bad, bad + 1, 1 << 22):
        with pytest.raises(SourceError, match=f"not valid UTF-8 at byte {bad}: invalid continuation byte"):
            list(scan_json_array(io.BytesIO(raw), "f.json", chunk_size=chunk_size))


def test_reading_on_after_a_break_needs_the_elements_key():
    with pytest.raises(ValueError, match="needs the key"):
        list(scan_json_array(io.BytesIO(b"[]"), "f.json", on_break=lambda *args, **kwargs: None))


def test_reading_on_after_a_break_keeps_positions_in_the_file():
    """The broken element is counted: the one after it is still the file's third."""
    breaks = []
    raw = b'[{"k": 1}, {"k": 2, oops}, {"k": 3}]'
    found = scan_json_array(io.BytesIO(raw), "f.json", on_break=keeping(breaks), key="k")
    assert [(position, value) for _, _, position, value in found] == [(0, {"k": 1}), (2, {"k": 3})]
    [(error, skipped, held)] = breaks
    assert skipped == b'{"k": 2, oops}, ' and held == 1 and error.record == 1


@pytest.mark.parametrize("chunk_size", [5, 4096, 1 << 22])
def test_a_long_skipped_stretch_is_counted_not_held(chunk_size):
    """Garbage of 100 KB after a break: the reader hands on its first bytes and its size, and counts the elements
    it held (each ``"k":`` once, also one cut between two chunks), at any chunk size."""
    from convhub.errors import RAW_LIMIT, SkippedBytes

    lost = '{"k": 9, "x": [1, 2,' + ' "filler"' * 1000 + "oops"
    garbage = "#" * (100 << 10) + lost * 3
    raw = f'[{{"k": 1}}, {garbage}, {{"k": 2}}]'.encode()
    breaks = []
    found = scan_json_array(
        io.BytesIO(raw), "f.json", chunk_size=chunk_size, on_break=keeping(breaks), key="k"
    )
    assert [(position, value) for *_, position, value in found] == [(0, {"k": 1}), (4, {"k": 2})]
    [(error, skipped, held)] = breaks
    assert isinstance(skipped, SkippedBytes) and held == 3 and error.record == 1
    assert skipped.head == raw[len('[{"k": 1}, ') :][:RAW_LIMIT]
    assert skipped.size == len(garbage) + 2  # (", " before the next element)


def test_a_stretch_that_runs_to_the_end_of_the_file_counts_a_cut_element():
    breaks = []
    raw = b'[{"k": 1}, {"k": 2}, {"k": 3, "x": "cut'
    found = scan_json_array(io.BytesIO(raw), "f.json", on_break=keeping(breaks), key="k")
    assert [value for *_, value in found] == [{"k": 1}, {"k": 2}]
    [(error, skipped, held)] = breaks
    assert skipped == b'{"k": 3, "x": "cut' and held == 1 and error.record == 2


@pytest.mark.parametrize("chunk_size", CHUNK_SIZES)
def test_reading_on_an_element_that_is_not_utf8_is_reported_with_its_exact_bytes(chunk_size):
    """Read on after a break, a byte that is not UTF-8 costs the element that holds it (its exact bytes handed
    on), not the rest of the file; between elements it is part of the skipped stretch."""
    bad = b'{"k": 2, "x": "\xe5\x8c"}'
    raw = b'[{"k": 1}, ' + bad + b', {"k": 3}, \xff {"k": 4}]'
    breaks = []
    found = scan_json_array(
        io.BytesIO(raw), "f.json", chunk_size=chunk_size, on_break=keeping(breaks), key="k"
    )
    assert [(start, end, position, value) for start, end, position, value in found] == [
        (1, 9, 0, {"k": 1}),
        (raw.index(b'{"k": 3}'), raw.index(b'{"k": 3}') + 8, 2, {"k": 3}),
        (raw.index(b'{"k": 4}'), raw.index(b'{"k": 4}') + 8, 3, {"k": 4}),
    ]
    [(not_utf8, held, one), (garbage, skipped, none)] = breaks
    assert held == bad and one == 1 and not_utf8.record == 1
    assert str(not_utf8).endswith(f"not valid UTF-8 at byte {raw.index(bad) + 15}")
    assert skipped == b"\xff " and none == 0 and garbage.record == 3
