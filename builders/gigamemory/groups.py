"""A GigaMemory file in two passes, as lines grouped by dialogue: memory follows one line, never the file.

Each line holds a whole dialogue (~350k characters), and lines far apart can share one. So pass 1
(:func:`index_file`) reads every line and keeps only its question fields, the digest of its dialogue and where
the first line of each dialogue is; :func:`plan_shards` cuts a file's groups, in order of first appearance,
into shards; pass 2 (:func:`parse_shard`) reads the first line of each group again and converts it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

from builders.gigamemory import parse
from builders.gigamemory.parse import Line, where
from convhub.engine import json_lines
from convhub.engine.jsonio import load_object
from convhub.engine.records import convert_one, convert_records
from convhub.errors import FieldError, Notes, Reject, SourceError, raise_error


@dataclass
class Group:
    """Lines sharing one dialogue; the dialogue is read again from the first of them (``spot``)."""

    digest: str
    spot: json_lines.LineSpot
    lines: list[Line] = field(default_factory=list)


def index_file(path: str, name: str | None = None, reject: Reject = raise_error) -> tuple[list[Group], Notes]:
    """Pass 1: the file's groups, in order of first appearance, and its notes. A bad line goes to ``reject`` with
    its bytes; ``name`` is what errors call the file (the URL ``path`` is a copy of)."""
    name = str(name or path)
    notes, groups, first_lines, rejected = Notes(), {}, {}, []

    def counted(error: SourceError, raw: Any = None, scope: str = "record") -> None:
        rejected.append(error)
        reject(error, raw, scope)

    for number, offset, raw, record in json_lines.read_objects(
        path, "GigaMemory", counted, notes, name, where
    ):
        location = where(number)
        try:
            if "id" not in record:
                raise FieldError("id", "missing")
            id_text = parse.id_as_text(record["id"], "id")
            location = where(number, record["id"])
            if id_text in first_lines:
                raise FieldError("id", f"duplicate id {id_text!r} (first at line {first_lines[id_text]})")
            if "sessions" not in record:
                raise FieldError("sessions", "missing")
        except FieldError as error:
            counted(SourceError(name, location, error.field, error.problem), raw)
            continue
        first_lines[id_text] = number
        digest = parse.dialogue_digest(record["sessions"])
        group = groups.get(digest)
        if group is None:
            group = groups[digest] = Group(digest, json_lines.spot_of(number, offset, raw))
        else:
            notes.add("line sharing its dialogue with an earlier line (one conversation, several questions)")
        fields = {key: value for key, value in record.items() if key != "sessions"}
        group.lines.append(Line(number, fields, list(record)))
    if not groups and not rejected:
        problem = "no records: the file is empty (a GigaMemory file has one JSON object per line)"
        raise SourceError(name, None, None, problem)
    return list(groups.values()), notes


def plan_shards(
    groups: list[Group], notes: Notes, name: str, file_name: str, shard_bytes: int, local: str | None = None
) -> list[dict[str, Any]]:
    """Consecutive groups of one file, about ``shard_bytes`` of first lines each; the first shard carries the
    file's pass-1 notes, so they are counted once. ``local``: where this machine has the file at URL ``name``."""
    shards: list[dict[str, Any]] = []
    size = 0
    for group in groups:
        if not shards or size >= shard_bytes:
            subset = parse.subset_of(file_name)
            shards.append(
                {
                    "path": name,
                    "local": local or name,
                    "file_name": file_name,
                    "subset": subset,
                    "groups": [],
                    "notes": {},
                }
            )
            size = 0
        shards[-1]["groups"].append(group)
        size += group.spot[2]
    if shards:
        shards[0]["notes"] = dict(notes)
    return shards


def parse_shard(shard: dict[str, Any], notes: Notes, reject: Reject = raise_error):
    """Pass 2: one conversation per group of the shard, from its first line read again (forward seeks only)."""
    for kind, count in shard["notes"].items():
        notes.add(kind, count)
    groups = shard["groups"]
    first_lines = json_lines.lines_at(shard["local"], [g.spot for g in groups], shard["path"], where)
    for group, raw in zip(groups, first_lines, strict=True):
        record = _conversation(group, raw, shard, notes, reject)
        if record is not None:
            yield record


def _conversation(group: Group, raw: bytes, shard: dict, notes: Notes, reject: Reject) -> dict | None:
    """The conversation of a group, or None when ``reject`` took every line of it. A bad dialogue rejects every
    line that shares it (each named by its own line); a bad question only its line. Normalizations are
    counted only for what is kept."""
    name, first = shard["path"], group.lines[0]
    sessions = load_object(raw, name, where(first.number))["sessions"]
    counted = Notes()
    to_conversation = partial(parse.conversation, digest=group.digest, subset=shard["subset"])
    try:
        record = convert_one(
            name, where(first.number, first.fields["id"]), sessions, to_conversation, counted
        )
    except SourceError as error:
        reject(error, raw)
        for line in group.lines[1:]:
            shared = f"{error.problem} (in the dialogue this line shares with line {first.number})"
            line_error = SourceError(name, where(line.number, line.fields["id"]), error.field, shared)
            reject(line_error, {**line.fields, "sessions": f"<the sessions of line {first.number}>"})
        return None
    session_ids = {session["session_id"] for session in record["sessions"]}

    def question(line: Line, line_notes: Notes) -> dict[str, Any]:
        return parse.parse_question(line, session_ids, shard["file_name"], line_notes)

    def reject_line(error: SourceError, line: Line) -> None:
        reject(
            error, raw if line is first else {**line.fields, "sessions": "<not kept: the dialogue is valid>"}
        )

    items = ((where(line.number, line.fields["id"]), line) for line in group.lines)
    record["questions"] = list(convert_records(name, items, question, counted, reject_line))
    if not record["questions"]:
        return None
    notes.update(counted)
    return record
