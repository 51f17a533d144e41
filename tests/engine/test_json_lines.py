"""The engine's JSON Lines reader (``convhub.engine.readers.json_lines``): line numbers and offsets, gzip, CRLF,
URLs, byte ranges that read as the whole file does, errors naming file and line, the lines read again by their
offsets, and memory that follows one line."""

from __future__ import annotations

import gzip
import json
import tracemalloc

import fsspec
import pytest

from convhub.engine.readers import json_lines
from convhub.errors import Notes, SourceError

ROWS = [{"id": 1, "text": "один"}, {"id": 2, "text": "два"}, {"id": 3, "text": "один"}]


def write(path, rows, newline="\n", prefix=b""):
    data = prefix + "".join(json.dumps(row, ensure_ascii=False) + newline for row in rows).encode()
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return path


@pytest.mark.parametrize("name", ["rows.jsonl", "rows.jsonl.gz"])
def test_lines_come_with_numbers_and_offsets_that_read_them_again(tmp_path, name):
    path = write(tmp_path / name, ROWS, newline="\r\n", prefix=b"\xef\xbb\xbf")
    lines = list(json_lines.iter_lines(path))
    assert [number for number, _, _ in lines] == [1, 2, 3]
    assert [json.loads(raw) for _, _, raw in lines] == ROWS
    assert lines[0][1] == 3  # past the byte-order mark
    spots = [json_lines.spot_of(number, offset, raw) for number, offset, raw in lines]
    assert list(json_lines.lines_at(str(path), spots[1:])) == [raw for _, _, raw in lines[1:]]


def test_objects_skip_blank_lines_and_reject_bad_ones_by_line(tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b'{"id": 1}\n\n   \nnot json\n[1]\n{"id": 2}')
    rejected, notes = [], Notes()
    objects = json_lines.read_objects(
        path, "Test", lambda error, raw, *rest: rejected.append((error, raw)), notes
    )
    assert [(number, value) for number, _, _, value in objects] == [(1, {"id": 1}), (6, {"id": 2})]
    assert [(error.record, raw) for error, raw in rejected] == [("line 4", b"not json"), ("line 5", b"[1]")]
    assert rejected[0][0].problem.startswith("not valid JSON")
    assert notes == {"blank line (skipped)": 2}


def test_a_json_document_is_one_error_naming_the_file(tmp_path):
    path = tmp_path / "array.jsonl"
    path.write_text(json.dumps(ROWS, indent=2), encoding="utf-8")
    with pytest.raises(
        SourceError, match=r"one JSON document, not JSON Lines.*Test reads one JSON object per line"
    ) as raised:
        list(json_lines.read_objects(path, "Test"))
    assert raised.value.record is None and raised.value.path == str(path)


@pytest.mark.parametrize("gz", [False, True])
def test_gzip_is_told_by_its_bytes_not_its_name(tmp_path, gz):
    path = tmp_path / "f.jsonl"
    text = b'{"a": 1}\r\n\n{"a": 2}\n'
    path.write_bytes(gzip.compress(text) if gz else text)
    assert [(n, raw) for n, _, raw in json_lines.iter_lines(path)] == [
        (1, b'{"a": 1}'),
        (2, b""),
        (3, b'{"a": 2}'),
    ]


def test_a_truncated_gz_names_the_line_and_keeps_the_lines_before(tmp_path):
    path = write(tmp_path / "cut.jsonl.gz", [{"id": n, "text": "x" * 50} for n in range(200)])
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(
        SourceError, match=r"record line \d+: cannot read the file \(corrupt or truncated gzip\)"
    ):
        list(json_lines.iter_lines(path))
    rejected = []
    kept = list(
        json_lines.read_objects(path, "Test", lambda error, raw, scope="record": rejected.append(scope))
    )
    assert rejected == ["file"] and 0 < len(kept) < 200


def test_a_changed_line_is_refused_when_read_again(tmp_path):
    path = write(tmp_path / "rows.jsonl", ROWS)
    spots = [json_lines.spot_of(number, offset, raw) for number, offset, raw in json_lines.iter_lines(path)]
    path.write_bytes(path.read_bytes().replace("два".encode(), "три".encode()))
    with pytest.raises(SourceError, match="record line 2: the file changed while it was being converted"):
        list(json_lines.lines_at(str(path), spots))


def test_a_file_at_a_url_is_read_there_and_where_its_copy_is_missing(bucket, tmp_path):
    path = write(tmp_path / "rows.jsonl.gz", ROWS)
    url = str(bucket / "rows.jsonl.gz")
    with fsspec.open(url, "wb") as handle:
        handle.write(path.read_bytes())
    lines = list(json_lines.iter_lines(url))
    assert lines == list(json_lines.iter_lines(path))
    spots = [json_lines.spot_of(number, offset, raw) for number, offset, raw in lines]
    missing_copy = str(tmp_path / "not-here.jsonl.gz")
    assert list(json_lines.lines_at(missing_copy, spots, name=url)) == [raw for _, _, raw in lines]


def test_memory_follows_the_longest_line_not_the_file(tmp_path):
    """Lines of 1 MB each: reading forty holds no more than reading four (one line at a time)."""

    def peak_reading(lines: int) -> int:
        path = write(tmp_path / f"{lines}.jsonl", [{"id": n, "text": "x" * 2**20} for n in range(lines)])
        tracemalloc.start()
        try:
            assert sum(1 for _ in json_lines.read_objects(path, "Test")) == lines
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    assert peak_reading(40) < peak_reading(4) + 2**20
