"""Reading a GigaMemory file, for both passes: its lines with their byte offsets (a ``.gz`` decompressed on the
fly), each line's JSON with ``json``'s values and errors (through orjson where the two agree), how an error
names a line and an id, and the sha256 that names a dialogue.

Pass 1 (:mod:`builders.gigamemory.index`) and pass 2 (:mod:`builders.gigamemory.parse`) must read a line alike,
or pass 2 would not find the line pass 1 indexed: what reading a line means is said here, once.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from convhub.engine.jsonio import holds_float, load_object
from convhub.errors import SourceError
from convhub.storage.folders import open_url

SUFFIXES = (".jsonl.gz", ".jsonl")


def subset_of(path: str | os.PathLike) -> str:
    """The subset of a file is its name without ``.jsonl`` / ``.jsonl.gz``."""
    name = Path(path).name
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return Path(path).stem


#: Read buffer for a whole-file pass: a GigaMemory line is ~650 KB, which readline gathers 8 KB at a time
#: by default (half of the time of reading a file line by line).
READ_BUFFER_BYTES = 2**20


def open_binary(path: str | os.PathLike, buffering: int = -1):
    """The file's bytes; a ``.gz`` is decompressed on the fly, so offsets are uncompressed offsets."""
    return gzip.open(path, "rb") if str(path).endswith(".gz") else open(path, "rb", buffering=buffering)


def open_shard_file(shard: dict[str, Any]):
    """``open_binary`` of a shard's file: the local copy pass 1 read where this process sees it, else the file at
    its URL (a task on another machine: seeks are range reads, a ``.gz`` decompresses from its start)."""
    path = shard["path"]
    local = shard.get("local", path)
    if local == path or os.path.exists(local):
        return open_binary(local)
    return open_url(path, compression="gzip" if path.endswith(".gz") else None)


def where(line_number: int, record_id: Any = None) -> str:
    """How a SourceError names a line: ``record 5 at line 3`` or ``record at line 3``."""
    return f"at line {line_number}" if record_id is None else f"{record_id!r} at line {line_number}"


def id_as_text(value: Any, path, location: str, field_name: str) -> str:
    """Integer and string ids are both accepted and become strings (the raw value is kept elsewhere)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise SourceError(
            path, location, field_name, f"expected an integer or a string, got {type(value).__name__}"
        )
    return str(value)


def iter_lines(path: str | os.PathLike) -> Iterator[tuple[int, int, bytes]]:
    """(1-based line number, byte offset, raw line without its end) for every line of the file.

    A corrupt or truncated ``.gz`` raises a SourceError naming the line where decompression failed.
    """
    line_number = 0
    with open_binary(path, READ_BUFFER_BYTES) as handle:
        while True:
            offset = handle.tell()
            try:
                raw = handle.readline()
            except (OSError, EOFError, zlib.error) as error:
                kind = "corrupt or truncated gzip" if str(path).endswith(".gz") else "unreadable file"
                raise SourceError(
                    path, where(line_number + 1), None, f"cannot read the file ({kind}): {error}"
                ) from error
            if not raw:
                return
            line_number += 1
            yield line_number, offset, raw.rstrip(b"\r\n")


def decode_line(path: str | os.PathLike, line_number: int, raw: bytes) -> dict[str, Any]:
    """One line → its JSON object, with json's values; an error names file and line."""
    return load_object(raw, path, where(line_number))


def dialogue_digest(sessions: Any, float_free: bool | None = None) -> str:
    """sha256 of the sessions' canonical JSON: equal exactly when the dialogues are equal, ids' types too.

    The canonical JSON is ``json.dumps(sessions, ensure_ascii=False, separators=(",", ":"))`` in UTF-8
    (conversation ids derive from it). ``orjson.dumps`` writes the same bytes for a float-free value
    (checked on every code point) and is 20x faster; it refuses what it would write otherwise (integers
    beyond 64 bits, non-string keys, lone surrogates), and those go through json.
    """
    data = None
    if float_free if float_free is not None else not holds_float(sessions):
        try:
            data = orjson.dumps(sessions)
        except TypeError:  # orjson.JSONEncodeError
            data = None
    if data is None:
        # surrogatepass: a lone surrogate must not crash the hash; the record is then rejected by name
        # (``ConversationBuilder._storable``), as Parquet cannot hold it
        data = json.dumps(sessions, ensure_ascii=False, separators=(",", ":")).encode(
            "utf-8", "surrogatepass"
        )
    return hashlib.sha256(data).hexdigest()
