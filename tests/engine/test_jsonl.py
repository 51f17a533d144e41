"""The engine's JSON Lines reading (``convhub.engine.jsonl``): lines numbered from 1 in plain, gzipped and CRLF
files, byte ranges that read as the whole file does, rows with their bad lines rejected by name."""

from __future__ import annotations

import gzip
import logging
import os
from functools import partial

import pytest

from convhub.engine import jsonl
from convhub.errors import FieldError, Notes, SourceError


def write(path, text: str, gz: bool = False):
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    return str(path)


def lines_of(path: str) -> list[tuple[int, bytes]]:
    return list(jsonl.open_lines(partial(jsonl.open_local, path), "f.jsonl"))


@pytest.mark.parametrize("gz", [False, True])
def test_lines_are_numbered_without_their_endings(tmp_path, gz):
    path = write(tmp_path / "f.jsonl", '{"a": 1}\r\n\n{"a": 2}\n', gz=gz)
    assert lines_of(path) == [(1, b'{"a": 1}'), (2, b""), (3, b'{"a": 2}')]
    assert jsonl.is_gzip(path) is gz


def test_byte_ranges_read_the_lines_of_the_whole_file(tmp_path):
    path = write(tmp_path / "f.jsonl", "".join(f'{{"n": {n}, "pad": "{"x" * n}"}}\n' for n in range(40)))
    ranges = jsonl.line_ranges(path, 100)
    assert len(ranges) > 5 and ranges[0][0] == 0 and ranges[-1][1] == os.path.getsize(path)
    read = [line for byte_range in ranges for line in jsonl.range_lines(path, "f.jsonl", *byte_range)]
    assert read == lines_of(path)


def test_bad_lines_are_rejected_with_their_line_and_good_ones_kept(tmp_path):
    path = write(tmp_path / "f.jsonl", '{"a": 1}\n[1]\n{"a": \n\n{"a": 2}\n')
    rejected = []
    rows = jsonl.numbered_rows(
        lines_of(path), "f.jsonl", "X", lambda error, raw: rejected.append((error, raw))
    )
    assert [(number, row) for number, row, _ in rows] == [(1, {"a": 1}), (5, {"a": 2})]
    assert [(error.record, raw) for error, raw in rejected] == [("line 2", b"[1]"), ("line 3", b'{"a": ')]
    assert "expected a JSON object" in rejected[0][0].problem


def test_a_json_document_is_one_error_naming_the_reader(tmp_path):
    path = write(tmp_path / "f.jsonl", '[\n  {"a": 1},\n  {"a": 2}\n]\n')
    with pytest.raises(SourceError, match=r"not JSON Lines.*and X reads one JSON object per line"):
        list(jsonl.iter_rows(lines_of(path), "f.jsonl", "X"))


def test_convert_rows_names_the_line_and_counts_only_converted_rows():
    def convert(number, row, notes):
        notes.add("seen")
        if row.get("bad"):
            raise FieldError("bad", "not allowed")
        return {"line": number, **row}

    notes, rejected = Notes(), []
    rows = [(1, {"a": 1}), (2, {"bad": True}), (3, {"a": 3})]
    converted = list(jsonl.convert_rows("f.jsonl", rows, convert, notes, lambda e, raw: rejected.append(e)))
    assert converted == [{"line": 1, "a": 1}, {"line": 3, "a": 3}]
    assert notes == {"seen": 2}
    assert str(rejected[0]) == str(SourceError("f.jsonl", "line 2", "bad", "not allowed"))


def test_line_warnings_stop_at_their_limit(caplog):
    warn = jsonl.LineWarnings("f.jsonl", logging.getLogger("test.jsonl"), 2, "odd values")
    with caplog.at_level(logging.WARNING):
        for number in range(1, 6):
            warn(number, "field", "odd")
    assert [record.getMessage() for record in caplog.records] == [
        "f.jsonl, line 1, field: odd (raw string kept)",
        "f.jsonl, line 2, field: odd (raw string kept)",
        "f.jsonl: more odd values; counted in the normalizations",
    ]


def test_rebuilt_row_keeps_the_key_order():
    row = jsonl.rebuilt_row(["id", "q", "meta", "gone"], {"id": 1, "meta": None}, {"q": "text"})
    assert list(row.items()) == [("id", 1), ("q", "text"), ("meta", None)]


def test_local_files_are_found_once_in_path_order(tmp_path):
    for name in ("b.jsonl", "a/c.jsonl.gz", ".hidden.jsonl", "notes.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}\n")
    (tmp_path / "loop").symlink_to(tmp_path)
    found = [path[len(str(tmp_path)) + 1 :] for path in jsonl.local_shard_paths(str(tmp_path))]
    assert found == ["a/c.jsonl.gz", "b.jsonl"]
