"""JSON Lines files for any source: finding them (a local folder, a file, or an fsspec URL), opening them (plain
or gzipped, LF or CRLF), cutting a big plain file into line-aligned byte ranges, and reading each line as JSON
exactly as ``json`` would, numbered from 1 so that every error names the file and the line."""

from __future__ import annotations

import gzip
import io
import logging
import mmap
import os
import zlib
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any, BinaryIO

from datasets.utils.file_utils import xopen

from convhub.engine.jsonio import load_object, refuse_json_document
from convhub.engine.records import convert_one
from convhub.errors import Notes, Reject, SourceError, raise_error
from convhub.storage.folders import url_files

SUFFIXES = (".jsonl", ".jsonl.gz")

# -- finding shards ------------------------------------------------------------------------------------


def local_shard_paths(data_dir: str) -> list[str]:
    """Every shard under ``data_dir``, each file once, in path order (hidden files and folders skipped).

    Symbolic links to folders are followed, but a folder reached again (a link loop) is not entered twice
    and a file reached under two names is read under the first: a recursive glob would read a loop's files
    over and over, or never finish.
    """
    candidates = []
    entered = set()
    for root, folders, names in os.walk(data_dir, followlinks=True):
        status = os.stat(root)
        if (status.st_dev, status.st_ino) in entered:
            folders[:] = []
            continue
        entered.add((status.st_dev, status.st_ino))
        folders[:] = [name for name in folders if not name.startswith(".")]
        candidates += [
            os.path.join(root, name) for name in names if name.endswith(SUFFIXES) and not name.startswith(".")
        ]
    found, read = [], set()
    for path in sorted(candidates):
        status = os.stat(path)
        if (status.st_dev, status.st_ino) not in read:
            read.add((status.st_dev, status.st_ino))
            found.append(path)
    return found


def url_inputs(url: str, reader: str) -> list[tuple[str, str]]:
    """(name, URL) of every shard under ``url``, named as ``--data-dir`` names local ones, not downloaded;
    ``reader`` names the source in the error when there is none."""
    found = url_files(url, SUFFIXES, recursive=True)
    if not found:
        raise FileNotFoundError(f"no {reader} *.jsonl or *.jsonl.gz shard under {url}")
    return found


# -- opening shards -------------------------------------------------------------------------------------


def open_local(path: str) -> BinaryIO:
    return open(path, "rb")


def open_streamed(path: str, download_config=None) -> BinaryIO:
    """A file ``datasets`` streams (``as_streaming_dataset``): its ``xopen`` reads URLs and fsspec paths."""
    return xopen(path, "rb", download_config=download_config)


def uncompressed_size(path: str, opener: Callable[[str], BinaryIO] = open_local) -> int:
    """A file's size; for gzip, the size its trailer records (modulo 4 GiB, so at least the file's)."""
    with opener(path) as handle:
        head = handle.read(2)
        size = handle.seek(0, os.SEEK_END)
        if size < 18 or head != b"\x1f\x8b":
            return size
        handle.seek(-4, os.SEEK_END)
        return max(size, int.from_bytes(handle.read(4), "little"))


# -- reading lines ------------------------------------------------------------------------------------


def open_lines(opener: Callable[[], BinaryIO], name: str = "<stream>") -> Iterator[tuple[int, bytes]]:
    """(line number from 1, line without its LF or CRLF) of a JSONL file, gunzipped when it is gzip.

    ``opener`` returns a binary file object: ``open`` for local files, datasets' ``xopen`` when streaming
    (URLs, fsspec paths). Gzip is recognized by its magic bytes, not by the name. Lines are bytes: JSON
    text cannot hold a raw newline, so splitting on LF is exact, and CRLF endings lose their CR here.
    """
    with opener() as raw:
        buffered = raw if hasattr(raw, "peek") else io.BufferedReader(raw)
        gzipped = buffered.peek(2)[:2] == b"\x1f\x8b"
        stream = gzip.GzipFile(fileobj=buffered) if gzipped else buffered
        number = 0
        try:
            # a plain counter, not enumerate: enumerate's reused result tuple would keep each unstripped line
            # alive beside its stripped copy, a second copy of a very long line (benchmarks/large_record.py)
            for line in stream:
                number += 1
                line = line.rstrip(b"\n").rstrip(b"\r")
                yield number, line
        except (OSError, EOFError, zlib.error) as error:
            kind = "corrupt or truncated gzip" if gzipped else "unreadable file"
            problem = f"cannot read the file ({kind}): {error}"
            raise SourceError(name, f"line {number + 1}", None, problem) from error
        finally:
            if stream is not buffered:
                stream.close()


def is_gzip(path: str) -> bool:
    """Gzip by its magic bytes, as ``open_lines`` decides."""
    with open(path, "rb") as file:
        return file.read(2) == b"\x1f\x8b"


def line_ranges(path: str, range_bytes: int) -> list[tuple[int, int, int]]:
    """(start, end, number of the first line) of line-aligned byte ranges of about ``range_bytes`` each
    that cover a plain (not gzipped) JSONL file, so one big file can be read by several workers.

    Each boundary is the byte after the first LF at or after an even cut, so a range never splits a line
    (a cut inside a line moves to its end); the line numbers count LFs, as ``open_lines`` does.
    """
    size = os.path.getsize(path)
    count = -(-size // range_bytes) if range_bytes > 0 else 1
    if count <= 1:
        return [(0, size, 1)]
    ranges, start, first_line = [], 0, 1
    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        for cut in (size * index // count for index in range(1, count)):
            if cut <= start:
                continue
            newline = mapped.find(b"\n", cut - 1)
            if newline < 0 or newline + 1 >= size:
                break
            end = newline + 1
            ranges.append((start, end, first_line))
            first_line += mapped[start:end].count(b"\n")
            start = end
    ranges.append((start, size, first_line))
    return ranges


def range_lines(path: str, name: str, start: int, end: int, first_line: int) -> Iterator[tuple[int, bytes]]:
    """``open_lines`` of the lines of a plain file between the line-aligned offsets ``start`` and ``end``
    (see ``line_ranges``), numbered from ``first_line`` so that errors name the file's own line."""
    number = first_line - 1
    remaining = end - start
    with open(path, "rb") as file:
        file.seek(start)
        try:
            for number, line in enumerate(file, start=first_line):
                remaining -= len(line)
                yield number, line.rstrip(b"\n").rstrip(b"\r")
                if remaining <= 0:
                    break
        except OSError as error:
            problem = f"cannot read the file (unreadable file): {error}"
            raise SourceError(name, f"line {number + 1}", None, problem) from error


def load_row(line: bytes, path: str, number: int) -> dict[str, Any] | None:
    """One JSONL row as a dict (``None`` for a blank line); anything else is a SourceError."""
    if not line or line.isspace():  # ``not line.strip()`` without copying the line
        return None
    return load_object(line, path, f"line {number}")


def readable_lines(lines: Iterable[tuple[int, bytes]], reject: Reject) -> Iterator[tuple[int, bytes]]:
    """``lines`` until one cannot be read (corrupt gzip): that error goes to ``reject`` (scope: the file)."""
    lines = iter(lines)
    while True:
        try:
            yield next(lines)
        except StopIteration:
            return
        except SourceError as error:
            reject(error, None, "file")
            return


def numbered_rows(
    lines: Iterable[tuple[int, bytes]],
    path: str,
    reader: str,
    reject: Reject = raise_error,
) -> Iterator[tuple[int, dict[str, Any], bytes]]:
    """(line number, row, the line's bytes) of each JSON object line; a bad line goes to ``reject`` (raising by
    default), and a file that cannot be read on from some line goes there once (its earlier rows stay). A file
    that is one JSON document (an array or object over many lines) is one SourceError naming the file and what
    ``reader`` (the source) reads instead."""
    for number, line in refuse_json_document(readable_lines(lines, reject), path, reader):
        try:
            row = load_row(line, path, number)
        except SourceError as error:
            reject(error, line)
            continue
        if row is not None:
            yield number, row, line


def iter_rows(
    lines: Iterable[tuple[int, bytes]], path: str, reader: str, reject: Reject = raise_error
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, row) of each JSON object line, as ``numbered_rows`` reads them."""
    for number, row, _ in numbered_rows(lines, path, reader, reject):
        yield number, row


def convert_rows(
    path: str,
    rows: Iterable[tuple[int, dict[str, Any]]],
    convert: Callable[[int, dict[str, Any], Notes], Any],
    notes: Notes,
    reject: Reject = raise_error,
) -> Iterator[Any]:
    """The per-record loop (``convhub.engine.records``) over (line number, row) pairs of a file whose rows are
    records by themselves: ``convert(number, row, notes)``, its errors naming the line, a bad row rejected alone
    and its normalizations counted only when it converts."""
    for number, row in rows:
        counted = Notes()
        try:
            record = convert_one(path, f"line {number}", row, partial(convert, number), counted)
        except SourceError as error:
            reject(error, row)
            continue
        notes.update(counted)
        yield record


class LineWarnings:
    """Logs what rows of one file hold that the build keeps raw but a user should hear of (``what``, e.g.
    unreadable JSON strings in a field), each with the file, line and field, up to ``limit`` per file; past it,
    one line says the rest are counted in the normalizations, so that a bad file cannot flood the log."""

    def __init__(self, path: str, logger: logging.Logger, limit: int, what: str):
        self.path, self.logger, self.limit, self.what = path, logger, limit, what
        self.count = 0

    def __call__(self, number: int, where: str, problem: str) -> None:
        self.count += 1
        if self.count <= self.limit:
            self.logger.warning("%s, line %d, %s: %s (raw string kept)", self.path, number, where, problem)
        elif self.count == self.limit + 1:
            self.logger.warning("%s: more %s; counted in the normalizations", self.path, self.what)


def rebuilt_row(keys: list[str], kept: dict[str, Any], texts: dict[str, Any]) -> dict[str, Any]:
    """A source row again, for an export: its ``keys`` in their order, each value from ``kept`` (the row as a
    record keeps it, its text fields taken out) or else from ``texts`` (the fields the record holds as turns)."""
    return {key: kept[key] if key in kept else texts[key] for key in keys if key in kept or key in texts}
