"""The lines of a JSON Lines file grouped by a key, in two passes: memory follows one line, never the file.

Where lines far apart make one record (GigaMemory: each line is a question and the whole dialogue it asks about,
and several lines share one dialogue), a reader cannot hold every line until the last is read. Pass 1
(:func:`index_groups`) reads every line once and keeps only what the source keeps of it, its group's key and where
the first line of each group is; :func:`group_shards` cuts the groups, in order of first appearance, into shards;
in pass 2, :func:`first_lines` reads each group's first line again (checked to be the very line of pass 1).
A value's :func:`canonical_digest` makes a key of a large value (a dialogue) without keeping it.

GigaMemory is its one user, so it lives here, not in the engine; a second source whose records span lines far
apart would move it back to ``convhub/engine/grouping/``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from convhub.engine.readers.contract import line_place
from convhub.engine.readers.json_lines import LineSpot, lines_at, read_objects, spot_of
from convhub.engine.runners.cuts import runs_by_size
from convhub.errors import FieldError, Notes, Reject, SourceError, raise_error
from convhub.schema import floats_in

#: ``key_of(number, object)`` of a line: its group's key and what pass 1 keeps of it, or a FieldError.
KeyOf = Callable[[int, dict[str, Any]], tuple[Hashable, Any]]


@dataclass
class Group:
    """The lines of one key, in file order: what pass 1 kept of each, and where the first is (``spot``)."""

    key: Hashable
    spot: LineSpot
    kept: list[Any] = field(default_factory=list)


def canonical_digest(value: Any) -> str:
    """sha256 of ``json.dumps(value, ensure_ascii=False, separators=(",", ":"))`` in UTF-8: equal exactly when the
    values are (their types too). ``orjson.dumps`` writes those bytes for a float-free value, much faster; it
    refuses what it would write otherwise (integers past 64 bits, lone surrogates), which json then writes (a lone
    surrogate through ``surrogatepass``: a digest, where Parquet will refuse the value by name later)."""
    data = None
    if next(floats_in(value), None) is None:  # (no float: orjson writes json's bytes)
        try:
            data = orjson.dumps(value)
        except TypeError:  # orjson.JSONEncodeError
            data = None
    if data is None:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        data = text.encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()


def index_groups(
    path: str,
    source: str,
    key_of: KeyOf,
    name: str | None = None,
    reject: Reject = raise_error,
    place: Callable[[int], str] = line_place,
    record_place: Callable[[int, dict[str, Any]], str] | None = None,
    joined_note: str | None = None,
) -> tuple[list[Group], Notes]:
    """Pass 1: the file's groups, in order of first appearance, and its notes (blank lines, a byte-order mark, and
    ``joined_note`` for each line that joins an earlier line's group).

    A line that is no JSON object, or whose ``key_of`` raises a FieldError, goes to ``reject`` with its bytes
    (named by ``record_place(number, object)``, else ``place(number)``). A file without a line is a SourceError;
    ``name`` is what errors call the file (the URL ``path`` is a copy of), ``source`` what reads it.
    """
    name = str(name or path)
    notes, groups, rejected = Notes(), {}, []

    def counted(error: SourceError, raw: Any = None, scope: str = "record") -> None:
        rejected.append(error)
        reject(error, raw, scope)

    for number, offset, raw, value in read_objects(path, source, counted, notes, name, place):
        try:
            key, kept = key_of(number, value)
        except FieldError as error:
            where = record_place(number, value) if record_place else place(number)
            counted(SourceError(name, where, error.field, error.problem), raw)
            continue
        group = groups.get(key)
        if group is None:
            group = groups[key] = Group(key, spot_of(number, offset, raw))
        elif joined_note:
            notes.add(joined_note)
        group.kept.append(kept)
    if not groups and not rejected:
        problem = f"no records: the file is empty (a {source} file has one JSON object per line)"
        raise SourceError(name, None, None, problem)
    return list(groups.values()), notes


def group_shards(
    groups: list[Group], notes: Notes, shard_bytes: int, name: str, local: str | None = None, **fields: Any
) -> list[dict[str, Any]]:
    """Consecutive groups of one file (``name``; ``local``: its copy here), about ``shard_bytes`` of first lines
    each, every shard with ``fields``; the first carries the file's notes, so they are counted once."""
    runs = runs_by_size([group.spot[2] for group in groups], shard_bytes)
    shards = [
        {"path": name, "local": local or name, **fields, "groups": groups[run.start : run.stop], "notes": {}}
        for run in runs
    ]
    if shards:
        shards[0]["notes"] = dict(notes)
    return shards


def first_lines(
    shard: dict[str, Any], notes: Notes, place: Callable[[int], str] = line_place
) -> Iterator[tuple[Group, bytes]]:
    """Pass 2: (group, its first line) of each group of a shard, read again in file order (forward seeks only);
    the file's notes go to ``notes``. A task without the copy of a file at a URL reads it there."""
    for kind, count in shard["notes"].items():
        notes.add(kind, count)
    groups = shard["groups"]
    lines = lines_at(shard["local"], [group.spot for group in groups], shard["path"], place)
    yield from zip(groups, lines, strict=True)
