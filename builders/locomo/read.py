"""Reading a LoCoMo file (one JSON list of samples) one sample at a time, with ``json.loads``'s values and errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import ijson
from convhub.errors import SourceError
from convhub.folders import open_file
from convhub.jsonio import holds_lone_surrogate_escape, loads_exact


def load_json(raw: bytes) -> Any:
    """``json.loads(raw.decode("utf-8"))`` (a BOM is an error, as it always was), through orjson where
    orjson gives the same value (:func:`convhub.jsonio.loads_exact`)."""
    return loads_exact(raw, lambda raw: json.loads(raw.decode("utf-8")))


def read_samples(path: str | Path) -> list[Any]:
    """The samples of one LoCoMo file, read whole; an error names the file when it is not a JSON list.

    Each sample is checked by the parser, so that one bad sample can be skipped alone.
    """
    try:
        with open_file(path) as handle:
            data = load_json(handle.read())
    except UnicodeDecodeError as error:
        problem = f"not valid UTF-8 JSON (the bytes are not UTF-8): {error}"
        raise SourceError(path, None, None, problem) from error
    except json.JSONDecodeError as error:
        if not error.doc.strip():
            raise SourceError(path, None, None, "the file is empty (a LoCoMo file is a JSON list)") from None
        problem = f"not valid UTF-8 JSON (the JSON is broken or truncated): {error}"
        raise SourceError(path, None, None, problem) from error
    if not isinstance(data, list):
        raise SourceError(path, None, None, f"expected a JSON list of samples, got {type(data).__name__}")
    if not data:
        raise SourceError(path, None, None, "no samples: the list is empty")
    return data


def _yajl_backend():
    """ijson's C backend; None where it is not built (its pure-Python backend is 20x slower than json)."""
    try:
        return ijson.get_backend("yajl2_c")
    except ImportError:
        return None


YAJL = _yajl_backend()


class _LoneSurrogateFound(Exception):
    """Raised through yajl's read when the bytes read so far hold a lone surrogate escape."""


class _LoneSurrogateWatch:
    """A binary file whose ``read`` raises once the bytes read so far hold a lone surrogate escape, which yajl
    would read as ``?`` (a record holding one must be rejected by name: tests/test_hostile_input.py).

    Judged chunk by chunk as yajl reads, so the file is read once and never held whole; a pair cut by a
    chunk's end is judged on the next read, when both halves are in sight (``holds_lone_surrogate_escape``'s
    ``checked`` and ``final``).
    """

    def __init__(self, handle: BinaryIO):
        self.handle = handle
        self.tail = b""  # the end of the last chunk: a pair may straddle two chunks

    def read(self, size: int = -1) -> bytes:
        chunk = self.handle.read(size)
        window = self.tail + chunk
        if holds_lone_surrogate_escape(window, max(0, len(self.tail) - 6), final=not chunk):
            raise _LoneSurrogateFound
        self.tail = window[-19:]  # what the next call still judges, with its partner and a byte before
        return chunk


def _starts_a_list(handle: BinaryIO) -> bool:
    """Whether the file's first non-whitespace byte opens a JSON list; the handle is left at its start."""
    head = handle.read(4096)
    handle.seek(0)
    return head.lstrip(b" \t\n\r").startswith(b"[")


def iter_samples(path: str | Path) -> Iterator[Any]:
    """The samples of one LoCoMo file, one at a time: the values and errors of :func:`read_samples`.

    Why stream: read whole, a file's objects take about five times its size, so peak memory grew with the
    input (four 52 MB files built with a peak of 525 MiB, files a quarter that size with 354 MiB), which
    misses the benchmark's memory-growth target (input x4 at most 1.25x the memory). ijson's C parser
    (yajl) builds one sample at a time at orjson's speed, so memory follows the largest sample instead
    (bench at scale 0.2: 1.10x and 1.20x in two runs on a shared machine).

    yajl reads every valid file as ``json.loads`` does, except that it reads a lone surrogate escape as
    ``?`` and refuses NaN, infinities, float overflow and integers beyond 64 bits. At its first refusal, or
    at the first lone surrogate escape in the bytes, the rest of the file comes from :func:`read_samples`: the same values, and
    the same error for a broken file (the samples before the break have been yielded by then; ``skip``
    keeps them, as other sources do).
    """
    yielded = 0
    with open_file(path) as handle:
        if YAJL and _starts_a_list(handle):
            samples = YAJL.items(_LoneSurrogateWatch(handle), "item", use_float=True)
            while True:
                try:
                    sample = next(samples)
                except StopIteration:
                    if yielded:
                        return
                    break  # an empty list: read_samples says so
                except (ijson.JSONError, UnicodeDecodeError, _LoneSurrogateFound):
                    break  # yajl decodes strings strictly: read_samples names bytes it refuses
                yield sample
                yielded += 1
    yield from read_samples(path)[yielded:]
