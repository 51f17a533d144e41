"""JSON Lines read a line at a time (:func:`iter_lines`), each line as its object (:func:`read_objects`), lines read
again by offset (:func:`lines_at`: a source that keeps only where each line is, GigaMemory's); :class:`JsonLines`
is the reader a source of one record per line names. Memory follows the longest line: a line is read, parsed and
handed on before the next one is read. Every error names the file and the line.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import zlib
from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, BinaryIO, Protocol, cast, runtime_checkable

from convhub.engine.readers.contract import Place, line_place, place_of_line, shard_file
from convhub.engine.readers.exact_json import load_object, loads_exact
from convhub.errors import Notes, Reject, SourceError, raise_error
from convhub.storage.folders import open_file

BYTE_ORDER_MARK = b"\xef\xbb\xbf"
GZIP_MAGIC = b"\x1f\x8b"
#: Where a line is, in one line's ``(number, offset, length, sha256)``: what :func:`lines_at` reads again.
LineSpot = tuple[int, int, int, str]
#: A part of a plain file: (start, end, number of its first line); MNBVC cuts a big file into such parts.
Span = tuple[int, int, int]
Opener = Callable[[str], BinaryIO]
READ_ERRORS = (OSError, EOFError, zlib.error)


@runtime_checkable
class Peekable(Protocol):
    """A stream that shows its next bytes without reading them (io's buffered files, a zip member, a gzip)."""

    def peek(self, size: int = 0, /) -> bytes: ...


@contextmanager
def decompressed(
    path: str | os.PathLike, opener: Opener = open_file
) -> Iterator[tuple[BinaryIO | gzip.GzipFile, bool]]:
    """(the file's bytes, whether it is gzip): gunzipped when it begins as gzip does, whatever its name, so that
    offsets count its text."""
    with opener(os.fspath(path)) as raw:
        # typing's BinaryIO declares no readinto, which a BufferedReader reads through and which every file an
        # opener gives has (io's and fsspec's)
        buffered = raw if isinstance(raw, Peekable) else io.BufferedReader(cast(io.RawIOBase, raw))
        if buffered.peek(2)[:2] != GZIP_MAGIC:
            yield buffered, False
            return
        with gzip.GzipFile(fileobj=buffered) as stream:
            yield stream, True


def iter_lines(
    path: str | os.PathLike,
    name: str | None = None,
    place: Callable[[int], str] = line_place,
    opener: Opener = open_file,
    span: Span | None = None,
) -> Iterator[tuple[int, int, bytes]]:
    """(number from 1, byte offset, line without its LF or CRLF) of every line of a plain or gzipped file (local,
    at a URL, or opened by ``opener``: streamed by ``datasets``), or of the lines of ``span`` (a plain file's
    part, ending at a line's end). A UTF-8 byte-order mark before line 1 is left out (its offset is then 3).
    A file that cannot be read on (a corrupt or truncated gzip) raises a SourceError naming ``name`` (the path by
    default) and the line where reading failed."""
    name = str(name or path)
    offset, end, number = span or (0, None, 1)
    number -= 1
    with decompressed(path, opener) as (stream, gzipped):
        try:
            if offset:
                stream.seek(offset)
            # a plain counter, not enumerate: its reused result tuple would keep each unstripped line alive beside
            # its stripped copy, a second copy of a very long line
            for line in stream:
                number += 1
                size = len(line)
                line = line.rstrip(b"\r\n")  # (rebound: a long line is not held twice)
                if offset == 0 and line.startswith(BYTE_ORDER_MARK):
                    yield number, len(BYTE_ORDER_MARK), line[len(BYTE_ORDER_MARK) :]
                else:
                    yield number, offset, line
                offset += size
                if end is not None and offset >= end:
                    return
        except READ_ERRORS as error:
            kind = "corrupt or truncated gzip" if gzipped else "unreadable file"
            problem = f"cannot read the file ({kind}): {error}"
            raise SourceError(name, place(number + 1), None, problem) from error


def read_objects(
    path: str | os.PathLike,
    source: str,
    reject: Reject = raise_error,
    notes: Notes | None = None,
    name: str | None = None,
    place: Callable[[int], str] = line_place,
    opener: Opener = open_file,
    span: Span | None = None,
) -> Generator[tuple[int, int, bytes, dict[str, Any]], None, None]:
    """(number, offset, line, object) of each line (of ``span``) that is a JSON object, as ``json.loads`` gives
    it; a line that is not goes to ``reject`` with its bytes (raising by default), and a blank line or a
    byte-order mark is counted in ``notes`` when given. A file that is one JSON document is one error
    (:func:`refuse_json_document`; ``source`` names what reads one object per line). ``name`` is what errors call
    the file (a URL whose local copy ``path`` is).
    """
    name = str(name or path)

    def lines() -> Iterator[tuple[int, int, bytes]]:
        try:
            for number, offset, raw in iter_lines(path, name, place, opener, span):
                if notes is not None and number == 1 and offset == len(BYTE_ORDER_MARK):
                    notes.add("UTF-8 byte-order mark at the start of a file (skipped)")
                yield number, offset, raw
        except SourceError as error:  # the file cannot be read on (a corrupt gzip): the lines before it stay
            reject(error, None, "file")

    for number, offset, raw in refuse_json_document(lines(), name, source):
        if not raw or raw.isspace():  # ``not raw.strip()`` without copying a long line
            if notes is not None:
                notes.add("blank line (skipped)")
            continue
        try:
            value = load_object(raw, name, place(number))
        except SourceError as error:
            reject(error, raw)
            continue
        yield number, offset, raw, value


def spot_of(number: int, offset: int, raw: bytes) -> LineSpot:
    """Where line ``number`` (``raw``, at ``offset``) is, for :func:`lines_at`."""
    return number, offset, len(raw), hashlib.sha256(raw).hexdigest()


def lines_at(
    path: str | os.PathLike,
    spots: Iterable[LineSpot],
    name: str | None = None,
    place: Callable[[int], str] = line_place,
) -> Iterator[bytes]:
    """The line at each spot (:func:`spot_of`), read again with one seek each (forward seeks only, for a gzip: give
    the spots in file order).

    ``path`` is read where it exists, else ``name`` (the URL ``path`` was copied from: a task on another machine
    reads there). A line that is no longer the one of its spot raises a SourceError: the file changed.
    """
    name = str(name or path)
    readable = path if name == str(path) or os.path.exists(path) else name
    with decompressed(readable) as (handle, _):
        for number, offset, length, sha256 in spots:
            try:
                handle.seek(offset)
                raw = handle.read(length)
            except READ_ERRORS as error:
                raise SourceError(name, place(number), None, f"cannot read the file: {error}") from error
            if len(raw) != length or hashlib.sha256(raw).hexdigest() != sha256:
                raise SourceError(name, place(number), None, "the file changed while it was being converted")
            yield raw


@dataclass(frozen=True)
class JsonLines:
    """The reader of a JSON Lines file a source names (``READER = JsonLines("MSC")``): each record is a line's
    object as :func:`read_objects` reads it (``source``: its), its place the line (``line 3`` in errors) and its
    byte offset."""

    source: str

    def read(self, shard: str | dict[str, Any], reject: Reject | None = None) -> Iterator[tuple[Place, Any]]:
        path, name = shard_file(shard)
        # (no box letting each row go here, as JsonList's: read_objects holds the row it yields till the next)
        for number, offset, _, row in read_objects(path, self.source, reject or raise_error):
            yield place_of_line(path, number, name, offset), row


# -- one JSON document where JSON Lines are expected ----------------------------------------------------

#: How much of a file past its first line :func:`json_document_problem` reads to see a document end.
DOCUMENT_PROBE_BYTES = 2**20
_OPENERS_ONLY = re.compile(rb"[\[{ \t\r\n]+")


def refuse_json_document(
    lines: Iterable[tuple[int, int, bytes]], path: str, source: str
) -> Iterator[tuple[int, int, bytes]]:
    """``lines`` ((number, offset, bytes) of a JSON Lines file from its line 1, as :func:`iter_lines` gives
    them) unchanged, unless its first non-blank line shows the file is one JSON document: a whole JSON array
    (``json.dump(rows, f)``; a JSON Lines record is an object, never an array), or no JSON but the start of a
    document (:func:`json_document_problem`). Then a SourceError naming the file says so, instead of one "not
    valid JSON" per line. Lines read ahead to tell are given on as they were. A range of lines not starting at
    line 1 is not checked."""
    lines = iter(lines)
    head: list[tuple[int, int, bytes]] = []  # the blank lines, then the first that is not
    for item in lines:
        head.append(item)
        if item[2] and not item[2].isspace():
            break
    number, _, first = head[-1] if head and head[0][0] == 1 else (0, 0, b"")
    text = first.removeprefix(b"\xef\xbb\xbf").strip()
    if text[:1] in (b"[", b"{"):
        try:  # (as json reads it: NaN, a BOM and lone surrogates too)
            loads_exact(first)
            parses = True
        except (ValueError, RecursionError):  # (JSONDecodeError and UnicodeDecodeError are ValueErrors)
            parses = False
        if parses and text[:1] == b"[":
            problem = (
                f"this is one JSON document, not JSON Lines: line {number} is a whole JSON array, and {source} "
                "reads one JSON object per line (rewrite it with jq -c '.[]')"
            )
            raise SourceError(path, None, None, problem)
        if not parses:
            size = 0
            for item in lines:
                head.append(item)
                size += len(item[2]) + 1
                if size > DOCUMENT_PROBE_BYTES:
                    break
            problem = json_document_problem(text, [raw for n, _, raw in head if n > number], source)
            if problem is not None:
                raise SourceError(path, None, None, problem)
    yield from head
    yield from lines


def json_document_problem(text: bytes, following: list[bytes], source: str) -> str | None:
    """What to tell a user whose JSON Lines file is one JSON document (an array or an object written over
    many lines), or None. ``text`` is the file's first non-blank line, stripped, which opens an array or an object
    and did not parse as JSON; ``following`` the lines after it (up to ``DOCUMENT_PROBE_BYTES``).

    It is a document when that line only opens arrays and objects (``[``, ``{``, ``[{``: no JSON Lines
    line is that), or when it and the lines after it parse as one JSON value that ends past it. A line
    of JSON Lines cut short (``{"id": 1, "q``) followed by good lines is neither, and stays a bad line.
    """
    if not _OPENERS_ONLY.fullmatch(text):
        document = b"\n".join([text, *following]).decode("utf-8", "replace")
        try:
            _, end = json.JSONDecoder().raw_decode(document)
        except (ValueError, RecursionError):
            return None
        if end <= len(text.decode("utf-8", "replace")):
            return None
    kind, rewrite = ("array", "jq -c '.[]'") if text[:1] == b"[" else ("object", "jq -c .")
    shown = text[:40].decode("utf-8", "replace") + ("…" if len(text) > 40 else "")
    return (
        f"this is one JSON document, not JSON Lines: its first line {shown!r} begins a JSON {kind} written "
        f"over several lines, and {source} reads one JSON object per line (rewrite it with {rewrite})"
    )
