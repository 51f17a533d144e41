"""A JSON Lines file as Arrow batches of its lines, for a source that converts rows on columns.

Each batch has ``number`` (the line's number, from 1) and ``line`` (its bytes without the LF or CRLF, a UTF-8
byte-order mark left out of line 1): what ``json_lines.iter_lines`` gives, line for line, without a Python step
per line. Blank lines (empty or only ASCII whitespace, which ``json_lines.read_objects`` skips) are not rows.

The file is read a block of ``BLOCK_BYTES`` at a time (memory follows the block, or the longest line when one is
longer) and split with numpy. A gzip (told by its first bytes, as ``json_lines.decompressed`` tells) is read as
``iter_lines`` reads it, ``io.DEFAULT_BUFFER_SIZE`` of text at a time, so that a corrupt or truncated one gives
the very lines ``iter_lines`` gives before it fails, then the same SourceError naming the line where reading
failed.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa

from convhub.engine.json_lines import (
    BYTE_ORDER_MARK,
    READ_ERRORS,
    Opener,
    decompressed,
    line_place,
    open_source,
)
from convhub.errors import SourceError

#: Bytes of text split at a time.
BLOCK_BYTES = 4 * 2**20
LINE_SCHEMA = pa.schema([pa.field("number", pa.int64(), nullable=False), pa.field("line", pa.binary())])
_LF, _CR = 10, 13
#: What ``bytes.isspace`` calls whitespace: a line of only these is blank.
_WHITESPACE = np.zeros(256, dtype=bool)
_WHITESPACE[[9, 10, 11, 12, 13, 32]] = True


def line_batches(
    path: str | os.PathLike,
    name: str | None = None,
    place: Callable[[int], str] = line_place,
    opener: Opener = open_source,
    block_bytes: int = BLOCK_BYTES,
) -> Iterator[pa.RecordBatch]:
    """Batches of ``LINE_SCHEMA``: the non-blank lines of the file, in order, about ``block_bytes`` at a time.
    A file that cannot be read on raises, after the lines read before, the SourceError ``iter_lines`` raises."""
    name = str(name or path)
    with decompressed(path, opener) as (stream, gzipped):
        chunks = _gzip_chunks(stream) if gzipped else iter(lambda: stream.read(block_bytes), b"")
        held: list[bytes] = []  # text read and not yet split (a long line is not copied per block)
        held_size, first, failure = 0, 1, None  # first: the number of the first line held
        try:
            for chunk in chunks:
                held.append(chunk)
                held_size += len(chunk)
                if held_size < block_bytes or chunk.rfind(b"\n") < 0:  # only the last piece may hold a LF
                    continue
                data = b"".join(held)
                cut = data.rfind(b"\n") + 1
                batch, count = split_lines(data[:cut], first)
                held, held_size, first = [data[cut:]], len(data) - cut, first + count
                if batch.num_rows:
                    yield batch
        except READ_ERRORS as error:
            failure = error
        data = b"".join(held)
        if failure is None:
            batch, _ = split_lines(data, first) if data else (None, 0)
            if batch is not None and batch.num_rows:
                yield batch
            return
        cut = data.rfind(b"\n") + 1  # the lines read whole before the failure, as iter_lines gives them
        if cut:
            batch, count = split_lines(data[:cut], first)
            first += count
            if batch.num_rows:
                yield batch
        kind = "corrupt or truncated gzip" if gzipped else "unreadable file"
        problem = f"cannot read the file ({kind}): {failure}"
        raise SourceError(name, place(first), None, problem) from failure


def _gzip_chunks(stream: io.BufferedIOBase) -> Iterator[bytes]:
    """A gzip's text in the reads ``iter_lines``' ``readline`` makes (``read1`` of the buffer's size): where it
    is corrupt, the text before is exactly the text ``iter_lines`` got."""
    size = io.DEFAULT_BUFFER_SIZE
    while chunk := stream.read1(size):
        yield chunk


def split_lines(data: bytes, first: int) -> tuple[pa.RecordBatch, int]:
    """(the non-blank lines of ``data`` as a batch, how many lines it holds): ``data`` ends with a LF, or is the
    file's last line without one; its first line is line ``first`` (line 1 loses a byte-order mark).

    The lines' bytes are ``data`` without the bytes that are no line's: LFs, the CRs before them, a byte-order
    mark and blank lines (in the usual block only LFs go, by ``bytes.replace``)."""
    text = np.frombuffer(data, dtype=np.uint8)
    newlines = np.flatnonzero(text == _LF)
    ends = newlines if len(newlines) and newlines[-1] == len(text) - 1 else np.append(newlines, len(text))
    count = len(ends)
    starts = np.concatenate([[0], ends[:-1] + 1])
    dropped = []  # bytes other than LFs that are no line's
    while True:  # ``rstrip(b"\r\n")``: a line loses every CR before its LF
        crs = (ends > starts) & (text[np.maximum(ends - 1, 0)] == _CR)
        if not crs.any():
            break
        ends = np.where(crs, ends - 1, ends)
        dropped.append(ends[crs])
    if first == 1 and ends[0] - starts[0] >= len(BYTE_ORDER_MARK) and data.startswith(BYTE_ORDER_MARK):
        starts[0] += len(BYTE_ORDER_MARK)
        dropped.append(np.arange(len(BYTE_ORDER_MARK)))
    # a blank line is empty, or begins with whitespace and is only whitespace (few lines are looked at)
    maybe = np.flatnonzero((ends == starts) | _WHITESPACE[text[np.minimum(starts, max(len(text) - 1, 0))]])
    blank = [i for i in maybe.tolist() if starts[i] == ends[i] or data[starts[i] : ends[i]].isspace()]
    kept = np.ones(count, dtype=bool)
    kept[blank] = False
    dropped.extend(np.arange(starts[i], ends[i]) for i in blank)
    if dropped:
        keep = np.ones(len(text), dtype=bool)
        keep[newlines] = False
        for positions in dropped:
            keep[positions] = False
        body = text[keep]
    else:
        body = data.replace(b"\n", b"")
    starts, ends = starts[kept], ends[kept]
    offsets = np.concatenate([[0], np.cumsum(ends - starts)]).astype(np.int32)
    lines = pa.Array.from_buffers(pa.binary(), len(starts), [None, pa.py_buffer(offsets), pa.py_buffer(body)])
    numbers = pa.array(np.arange(first, first + count, dtype=np.int64)[kept], pa.int64())
    return pa.RecordBatch.from_arrays([numbers, lines], schema=LINE_SCHEMA), count
