"""``line_batches`` gives the lines ``json_lines.iter_lines`` gives (numbers, bytes without LF or CRLF, no
byte-order mark on line 1), blank lines left out, whatever the block size: CRLF, gzip, a last line without a
LF, a line longer than a block, an empty file, and a corrupt or truncated gzip (the same lines, then the same
error)."""

from __future__ import annotations

import gzip

import pytest

from convhub.engine import json_lines
from convhub.engine.line_batches import line_batches
from convhub.errors import SourceError

TEXTS = {
    "lf": b'{"a": 1}\n{"b": 2}\n',
    "crlf": b'{"a": 1}\r\n{"b": 2}\r\n\r\n{"c": 3}\r\r\n',
    "bom": b'\xef\xbb\xbf{"a": 1}\n{"b": 2}\n',
    "bom only": b"\xef\xbb\xbf\n{}\n",
    "bom alone": b"\xef\xbb\xbf",
    "blank lines": b'\n\n  \t\n{"a": 1}\n\x0b\x0c\n\n{"b": 2}\n \n',
    "no final newline": b'{"a": 1}\n{"b": 2}',
    "long line": b'{"a": 1}\n{"long": "' + b"x" * 5000 + b'"}\n{"c": 3}\n',
    "empty": b"",
    "only newlines": b"\n\n\r\n",
    "one line": b"abc",
    "bom later": b'{"a": 1}\n\xef\xbb\xbf{"b": 2}\n',
}


def expected(path) -> list[tuple[int, bytes]]:
    """``iter_lines``' lines that are not blank, as ``read_objects`` skips them."""
    return [(n, raw) for n, _, raw in json_lines.iter_lines(path) if raw and not raw.isspace()]


def batches_lines(path, block_bytes) -> list[tuple[int, bytes]]:
    batches = list(line_batches(path, block_bytes=block_bytes))
    assert all(batch.num_rows for batch in batches)
    return [(row["number"], row["line"]) for batch in batches for row in batch.to_pylist()]


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("block_bytes", [1, 7, 64, 4 * 2**20])
@pytest.mark.parametrize("case", list(TEXTS))
def test_lines_are_iter_lines_lines_without_blank_ones(tmp_path, case, block_bytes, gz):
    path = tmp_path / ("rows.jsonl.gz" if gz else "rows.jsonl")
    path.write_bytes(gzip.compress(TEXTS[case]) if gz else TEXTS[case])
    lines = batches_lines(path, block_bytes)
    assert lines == expected(path)
    if case == "long line":
        assert [number for number, _ in lines] == [1, 2, 3] and len(lines[1][1]) == 5012


def many_lines(count: int) -> bytes:
    return b"".join(b'{"n": %d, "text": "%s"}\n' % (n, b"y" * (n % 97)) for n in range(count))


@pytest.mark.parametrize("block_bytes", [1000, 4 * 2**20])
def test_many_lines_in_many_blocks(tmp_path, block_bytes):
    path = tmp_path / "many.jsonl"
    path.write_bytes(many_lines(5000))
    lines = batches_lines(path, block_bytes)
    assert len(lines) == 5000 and lines == expected(path)


def read_until_error(reader):
    lines = []
    with pytest.raises(SourceError) as raised:
        for item in reader:
            lines.extend(item if isinstance(item, list) else [item])
    return lines, raised.value


@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
def test_a_broken_gzip_gives_the_same_lines_then_the_same_error(tmp_path, damage):
    data = bytearray(gzip.compress(many_lines(20000), compresslevel=1))
    if damage == "truncated":
        data = data[: len(data) * 2 // 3]
    else:
        data[len(data) // 2 : len(data) // 2 + 64] = b"\xff" * 64
    path = tmp_path / "broken.jsonl.gz"
    path.write_bytes(bytes(data))
    reference, error = read_until_error(
        [(n, raw)] for n, _, raw in json_lines.iter_lines(path, name="broken") if raw
    )
    ours, our_error = read_until_error(
        [(row["number"], row["line"]) for row in batch.to_pylist()]
        for batch in line_batches(path, name="broken", block_bytes=100_000)
    )
    assert reference and ours == reference
    assert (our_error.path, our_error.record, our_error.problem) == (error.path, error.record, error.problem)
