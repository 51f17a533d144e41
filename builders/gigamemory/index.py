"""Pass 1: a file's lines grouped by dialogue (:func:`index_file`), and cut into pass 2's shards
(:func:`plan_shards`).

Per line the index keeps only its position, the hash of its ``sessions`` and its small question fields (why:
:mod:`builders.gigamemory.parse`). How a line is cut is :mod:`builders.gigamemory.cut`, how a file is read for
it :mod:`builders.gigamemory.scan`; this module puts the prepared lines in their groups, in file order, and
says which lines are bad.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builders.gigamemory.cut import PreparedLine, line_fingerprint
from builders.gigamemory.read import iter_lines, subset_of, where
from builders.gigamemory.scan import TaskRunner, prepared_lines
from convhub.engine.jsonio import array_line_problem, json_document_problem
from convhub.errors import Notes, Reject, SourceError, raise_error


@dataclass
class Line:
    """What the index keeps of one line: where it is and its question fields (everything but sessions)."""

    number: int
    fields: dict[str, Any]
    keys: list[str]


@dataclass
class Group:
    """Lines sharing one dialogue; the dialogue is read again from the first of them."""

    digest: str
    offset: int
    length: int
    line_check: str  # of the first line's bytes (line_fingerprint): pass 2 checks it re-read that very line
    lines: list[Line] = field(default_factory=list)
    #: Where the first line's ``sessions`` value is, when pass 1 cut the line: pass 2 parses only that.
    span: tuple[int, int] | None = None


@dataclass
class FileIndex:
    path: str
    groups: list[Group]
    notes: Notes
    #: Lines (or unreadable file tails) handed to ``reject`` under ``--on-bad-record skip``.
    rejected: int = 0


def index_file(
    path: str | os.PathLike,
    reject: Reject = raise_error,
    processes: int = 1,
    run: TaskRunner | None = None,
    url: str | None = None,
) -> FileIndex:
    """Pass 1: read the file once and group its lines by dialogue, keeping no dialogue in memory.

    A bad line goes to ``reject`` with its bytes (raising by default); a file that cannot be read on from
    some line (corrupt gzip) goes there once, and the lines before that point are kept. With
    ``processes`` > 1, a large plain file's distinct dialogues are parsed and hashed in that many
    processes (most of pass 1), or with ``run`` in an engine's tasks (which read ``url``, where ``path`` is its
    local copy); grouping stays here, in file order, so the index is the same.
    """
    notes = Notes()
    groups: dict[str, Group] = {}
    seen_ids: dict[str, int] = {}
    rejected = 0
    lines = prepared_lines(path, processes, run, url)
    while True:
        try:
            prepared = next(lines)
        except StopIteration:
            break
        except SourceError as error:
            rejected += 1
            reject(error, None, "file")
            break
        try:
            _add_line(path, prepared, notes, groups, seen_ids)
        except SourceError as error:
            if not groups and not rejected and prepared.error is error:  # the first line with content
                _refuse_json_document(path, prepared, error)
            rejected += 1
            reject(error, prepared.raw if prepared.raw is not None else _read_back(path, prepared))
            continue
    if not groups and not rejected:
        raise SourceError(
            path, None, None, "no records: the file is empty (a GigaMemory file has one JSON object per line)"
        )
    return FileIndex(str(path), list(groups.values()), notes, rejected)


def _refuse_json_document(path, prepared: PreparedLine, error: SourceError) -> None:
    """Raise one SourceError naming the file when its first line is not JSON because the file is one JSON
    document (an array or object over many lines, or an array on one line), not one error for each line."""
    if error.problem == "expected a JSON object, got list":
        raise SourceError(path, None, None, array_line_problem(prepared.number, "GigaMemory")) from None
    if not error.problem.startswith("not valid JSON"):
        return
    raw = prepared.raw if prepared.raw is not None else _read_back(path, prepared)
    following = (line for number, _, line in iter_lines(path) if number > prepared.number)
    problem = json_document_problem(raw, following, "GigaMemory")
    if problem is not None:
        raise SourceError(path, None, None, problem) from None


def _add_line(path, prepared: PreparedLine, notes: Notes, groups: dict, seen_ids: dict) -> Group | None:
    """Index one prepared line into its group (None for a blank line); a SourceError leaves the index as it was."""
    number = prepared.number
    if prepared.bom:
        notes.add("UTF-8 byte-order mark at the start of a file (skipped)")
    if prepared.blank:
        notes.add("blank line (skipped)")
        return None
    if prepared.error is not None:
        raise prepared.error
    id_text = prepared.id_text
    if id_text in seen_ids:
        raise SourceError(
            path,
            where(number, prepared.record_id),
            "id",
            f"duplicate id {id_text!r} (first at line {seen_ids[id_text]})",
        )
    if not prepared.has_sessions:
        raise SourceError(path, where(number, prepared.record_id), "sessions", "missing")
    seen_ids[id_text] = number
    digest = prepared.digest
    group = groups.get(digest)
    if group is None:
        line_check = prepared.line_check or _first_line_check(path, prepared)
        group = groups[digest] = Group(
            digest, prepared.offset, prepared.length, line_check, span=prepared.span
        )
    else:
        notes.add("line sharing its dialogue with an earlier line (one conversation, several questions)")
    group.lines.append(Line(number, prepared.fields, prepared.keys))
    return group


def _first_line_check(path, prepared: PreparedLine) -> str:
    """The line check of a line that begins a group, if its preparation did not make it: a mapped cut
    line reads back only the bytes around its span (whose sha256 it has)."""
    if prepared.raw is not None:
        return line_fingerprint(prepared.raw, prepared.span, prepared.span_sha256)
    start, end = prepared.span
    with open(path, "rb") as handle:
        before = os.pread(handle.fileno(), start, prepared.offset)
        after = os.pread(handle.fileno(), prepared.length - end, prepared.offset + end)
    return f"{prepared.span_sha256}:{hashlib.sha256(before + after).hexdigest()}"


def _read_back(path, prepared: PreparedLine) -> bytes:
    """The bytes of a line a worker prepared without keeping them (a plain file: offsets are bytes)."""
    with open(path, "rb") as handle:
        handle.seek(prepared.offset)
        return handle.read(prepared.length)


def plan_shards(index: FileIndex, shard_bytes: int, file_name: str | None = None) -> list[dict[str, Any]]:
    """Consecutive groups of one file, about ``shard_bytes`` of dialogue each, in order of first appearance.

    ``file_name`` is the name the source gives the file (a download is cached under a hash); the subset is
    derived from it. The first shard of a file carries the file's pass-1 notes so they are counted once.
    """
    file_name = file_name or Path(index.path).name
    if not index.groups:  # every line was rejected (--on-bad-record skip)
        return []
    shards: list[dict[str, Any]] = []
    current: list[Group] = []
    size = 0
    for group in index.groups:
        current.append(group)
        size += group.length
        if size >= shard_bytes or group is index.groups[-1]:
            shards.append(
                {
                    "path": index.path,
                    "file_name": file_name,
                    "subset": subset_of(file_name),
                    "groups": current,
                    "notes": {},
                }
            )
            current, size = [], 0
    shards[0]["notes"] = dict(index.notes)
    return shards
