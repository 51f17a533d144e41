"""JSON Lines files read a line at a time, plain or ``.gz``, local or at a URL: each line's number, byte offset and
object, and the lines read again later by their offsets.

Memory follows the longest line: a line is read, parsed and handed on before the next one is read. Every value is
the one ``json.loads`` gives (``jsonio.load_object``), and every error names the file and the line. A source
that reads a file twice (a first pass that keeps only where each line is, a second that reads some lines
again) gets the offsets from :func:`read_objects` and the lines back from :func:`lines_at`, which checks that
each is still the very line the first pass read.
"""

from __future__ import annotations

import glob
import gzip
import hashlib
import os
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from pathlib import PurePosixPath
from typing import Any

from convhub.engine.jsonio import load_object, refuse_json_document
from convhub.errors import Notes, Reject, SourceError, raise_error
from convhub.storage.folders import open_url, url_files

SUFFIXES = (".jsonl", ".jsonl.gz")
#: Read buffer of a plain file: ``readline`` would gather a long line (hundreds of KB) 8 KB at a time.
READ_BUFFER_BYTES = 2**20
BYTE_ORDER_MARK = b"\xef\xbb\xbf"
#: Where a line is, in one line's ``(number, offset, length, sha256)``: what :func:`lines_at` reads again.
LineSpot = tuple[int, int, int, str]


def line_place(number: int) -> str:
    """How an error names a line by default: ``record line 3``."""
    return f"line {number}"


def find_files(data_dir: str, source: str, suffixes: tuple[str, ...] = SUFFIXES) -> list[tuple[str, str]]:
    """(local path or URL, file name) of every JSON Lines file directly in the folder ``data_dir``, in path order,
    or of that one file; ``data_dir`` may be a URL (``hdfs://``, ``s3a://``, any fsspec URL). Finding none is an
    error naming what ``source`` reads."""
    if "://" in data_dir:
        files = [(url, name) for name, url in url_files(data_dir, suffixes)]
    elif os.path.isfile(data_dir):
        files = [(data_dir, os.path.basename(data_dir))]
    else:
        pattern = os.path.join(glob.escape(data_dir), "*")
        paths = sorted(path for suffix in suffixes for path in glob.glob(pattern + suffix))
        files = [(path, os.path.basename(path)) for path in paths]
    if not files:
        kinds = " or ".join(f"*{suffix}" for suffix in suffixes)
        raise FileNotFoundError(f"no {source} {kinds} file in {data_dir}")
    return files


def file_stem(name: str) -> str:
    """A file's name without its folder and ``.jsonl`` / ``.jsonl.gz`` (or its last suffix): its subset."""
    path = PurePosixPath(name)
    return next((path.name[: -len(end)] for end in SUFFIXES[::-1] if path.name.endswith(end)), path.stem)


def files_by_stem(
    files: list[tuple[str, str]], wanted: Iterable[str] | None, source: str
) -> list[tuple[str, str]]:
    """The (path, name) of ``files`` whose stems (:func:`file_stem`: one subset per file) are ``wanted`` (all when
    None). Two files of one stem are a SourceError; a wanted stem without a file a KeyError naming the stems."""
    by_stem: dict[str, str] = {}
    for path, name in files:
        first = by_stem.setdefault(file_stem(name), path)
        if first != path:
            raise SourceError(path, None, None, f"same subset {file_stem(name)!r} as {first}; rename one")
    unknown = sorted(set(wanted or ()) - set(by_stem))
    if unknown:
        raise KeyError(f"{source} has no subset {', '.join(unknown)}; subsets: {', '.join(by_stem)}")
    return [(path, name) for path, name in files if file_stem(name) in (wanted or by_stem)]


def open_binary(path: str | os.PathLike):
    """The bytes of a local file or one at a URL (fsspec); a ``.gz`` decompressed, so offsets count its text."""
    text = os.fspath(path)
    gzipped = text.endswith(".gz")
    if "://" in text:
        return open_url(text, compression="gzip" if gzipped else None)
    return gzip.open(text, "rb") if gzipped else open(text, "rb", buffering=READ_BUFFER_BYTES)


def iter_lines(
    path: str | os.PathLike, name: str | None = None, place: Callable[[int], str] = line_place
) -> Iterator[tuple[int, int, bytes]]:
    """(number from 1, byte offset, line without its LF or CRLF) of every line; a UTF-8 byte-order mark before line 1
    is left out (its offset is then 3). A file that cannot be read on (a corrupt or truncated gzip) raises a
    SourceError naming ``name`` (the path by default) and the line where reading failed."""
    name = str(name or path)
    number = 0
    with open_binary(path) as handle:
        while True:
            offset = handle.tell()
            try:
                raw = handle.readline()
            except (OSError, EOFError, zlib.error) as error:
                kind = "corrupt or truncated gzip" if str(path).endswith(".gz") else "unreadable file"
                problem = f"cannot read the file ({kind}): {error}"
                raise SourceError(name, place(number + 1), None, problem) from error
            if not raw:
                return
            number += 1
            raw = raw.rstrip(b"\r\n")  # (rebound: a long line is not held twice)
            if number == 1 and raw.startswith(BYTE_ORDER_MARK):
                raw, offset = raw[len(BYTE_ORDER_MARK) :], offset + len(BYTE_ORDER_MARK)
            yield number, offset, raw


def readable_lines(lines: Iterable[Any], reject: Reject) -> Iterator[Any]:
    """``lines`` until one cannot be read (a corrupt gzip): that error goes to ``reject`` once, scope the file,
    and the lines before it are kept."""
    lines = iter(lines)
    while True:
        try:
            yield next(lines)
        except StopIteration:
            return
        except SourceError as error:
            reject(error, None, "file")
            return


def read_objects(
    path: str | os.PathLike,
    source: str,
    reject: Reject = raise_error,
    notes: Notes | None = None,
    name: str | None = None,
    place: Callable[[int], str] = line_place,
) -> Iterator[tuple[int, int, bytes, dict[str, Any]]]:
    """(number, offset, line, object) of each line that is a JSON object; a line that is not goes to ``reject``
    with its bytes (raising by default), and a blank line or a byte-order mark is counted in ``notes``.

    A file that is one JSON document (an array or an object over many lines, ``source`` names what reads one
    object per line) is one SourceError naming the file, not one error per line. ``name`` is what errors call
    the file (a URL whose local copy ``path`` is).
    """
    name = str(name or path)
    notes = Notes() if notes is None else notes
    offsets: deque[int] = deque()  # refuse_json_document gives the lines on in order, each once

    def numbered() -> Iterator[tuple[int, bytes]]:
        for number, offset, raw in readable_lines(iter_lines(path, name, place), reject):
            if number == 1 and offset == len(BYTE_ORDER_MARK):
                notes.add("UTF-8 byte-order mark at the start of a file (skipped)")
            offsets.append(offset)
            yield number, raw

    for number, raw in refuse_json_document(numbered(), name, source):
        offset = offsets.popleft()
        if not raw or raw.isspace():  # ``not raw.strip()`` without copying a long line
            notes.add("blank line (skipped)")
            continue
        try:
            value = load_object(raw, name, place(number))
        except SourceError as error:
            reject(error, raw)
            continue
        yield number, offset, raw, value


def line_sha256(raw: bytes) -> str:
    """What :func:`lines_at` compares to know it read the very line again."""
    return hashlib.sha256(raw).hexdigest()


def spot_of(number: int, offset: int, raw: bytes) -> LineSpot:
    """Where line ``number`` (``raw``, at ``offset``) is, for :func:`lines_at`."""
    return number, offset, len(raw), line_sha256(raw)


def lines_at(
    path: str | os.PathLike,
    spots: Iterable[LineSpot],
    name: str | None = None,
    place: Callable[[int], str] = line_place,
) -> Iterator[bytes]:
    """The line at each spot (:func:`spot_of`), read again with one seek each (forward seeks only, for a
    ``.gz``: give the spots in file order).

    ``path`` is read where it exists, else ``name`` (the URL ``path`` was copied from: a task on another
    machine reads there). A line that is no longer the one of its spot raises a SourceError: the file changed.
    """
    name = str(name or path)
    readable = path if name == str(path) or os.path.exists(path) else name
    with open_binary(readable) as handle:
        for number, offset, length, sha256 in spots:
            try:
                handle.seek(offset)
                raw = handle.read(length)
            except (OSError, EOFError, zlib.error) as error:
                raise SourceError(name, place(number), None, f"cannot read the file: {error}") from error
            if len(raw) != length or line_sha256(raw) != sha256:
                raise SourceError(name, place(number), None, "the file changed while it was being converted")
            yield raw
