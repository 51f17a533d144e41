"""GigaMemory JSONL → canonical conversation records, in two streaming passes; this module is pass 2.

Each GigaMemory line is one question *and* the whole dialogue it is asked about (~350k characters), and
several lines can share one dialogue. Loading a file whole, or keeping every dialogue to find the shared
ones, would not scale to files of thousands of such lines, so:

1. :func:`~builders.gigamemory.index.index_file` reads a file once (a plain file mapped, a ``.gz`` line by
   line), and keeps per line only its position, the hash of
   its ``sessions`` (canonical JSON → sha256) and its small question fields. Lines with the same hash are
   one *group*: one conversation carrying all their questions.
2. :func:`~builders.gigamemory.index.plan_shards` cuts each file's groups (in order of first appearance) into
   shards of a bounded size; :func:`parse_shard` re-reads only the first line of each group by byte offset and
   emits one canonical record per group. A shard's offsets only increase, so a ``.jsonl.gz`` is read with
   forward seeks in a single decompression pass.

Every field of every line is reachable in the output, with its raw JSON type: the question's ``extra``
holds the line's file, line number, raw ``id`` and ``ans_session_ids`` (and anything else), the session's
``extra`` its raw ``id``; key order is kept where it differs from the real file's. That is enough to
rebuild each line, in its file and order, from the ``sessions`` config.

The modules of the two passes: ``read.py`` (lines and their JSON, for both), ``cut.py`` (pass 1 on one line),
``scan.py`` (pass 1 on a whole file), ``index.py`` (pass 1's groups, its caches, the shards) and this one
(pass 2: a group's first line read again, and the pure functions from it to the canonical record).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

from builders.gigamemory.cut import line_fingerprint
from builders.gigamemory.index import Group, Line
from builders.gigamemory.read import decode_line, id_as_text, open_shard_file, where
from convhub import schema
from convhub.engine.jsonio import INEXACT, orjson_exact
from convhub.errors import Notes, Reject, SourceError, raise_error

#: The four question types of the contest, in the order of its format document.
QUESTION_TYPES = ("fact_equal_session", "info_consolidation", "info_updating", "no_info")
#: Key order of a line, a session and a message in the real file (format_example.jsonl).
RECORD_KEYS = ("id", "question", "ans", "question_type", "sessions", "ans_session_ids")
SESSION_KEYS = ("id", "messages")
MESSAGE_KEYS = ("role", "content")
#: Roles kept as they are; GigaMemory itself only uses user and assistant.
ROLES = ("user", "assistant", "system")
#: A dialogue id is the file stem plus this many hex digits of the dialogue's sha256.
DIGEST_DIGITS = 16


def parse_shard(
    shard: dict[str, Any], notes: Notes, reject: Reject = raise_error
) -> Iterator[dict[str, Any]]:
    """Re-read the first line of each group of the shard (forward seeks only) and build its conversation."""
    path = shard["path"]
    for kind, count in shard["notes"].items():
        notes.add(kind, count)
    with open_shard_file(shard) as handle:
        for group in shard["groups"]:
            raw = _read_group_line(handle, path, group)
            sessions = INEXACT
            if group.span is not None:
                sessions = orjson_exact(memoryview(raw)[group.span[0] : group.span[1]])
            if sessions is INEXACT:
                sessions = decode_line(path, group.lines[0].number, raw)["sessions"]
            record = _convert_group(sessions, group, shard, raw, notes, reject)
            if record is not None:
                yield record


def _read_group_line(handle, path, group: Group) -> bytes:
    """The first line of a group, read again and checked to be the very line pass 1 indexed."""
    first = group.lines[0]
    try:
        handle.seek(group.offset)
        raw = handle.read(group.length)  # the line without its end; checked just below
    except (OSError, EOFError, zlib.error) as error:
        raise SourceError(path, where(first.number), None, f"cannot read the file: {error}") from error
    if len(raw) != group.length or line_fingerprint(raw, group.span) != group.line_check:
        raise SourceError(path, where(first.number), None, "the file changed while it was being converted")
    return raw


def _convert_group(
    sessions: Any, group: Group, shard: dict[str, Any], raw: bytes, notes: Notes, reject: Reject
) -> dict[str, Any] | None:
    """One conversation, or None when ``reject`` took every line of it.

    A bad dialogue rejects every line that shares it (each named by its own line); a bad question field
    rejects only its line. Normalizations are counted only for what is kept.
    """
    counted = Notes()
    path = shard["path"]
    try:
        record = parse_conversation(
            sessions, group, shard["subset"], shard["file_name"], path, counted, reject, raw
        )
    except SourceError as error:
        first = group.lines[0]
        for line in group.lines:
            if line is first:
                reject(error, raw)
                continue
            shared = f"{error.problem} (in the dialogue this line shares with line {first.number})"
            line_error = SourceError(path, where(line.number, line.fields["id"]), error.field, shared)
            reject(line_error, {**line.fields, "sessions": f"<the sessions of line {first.number}>"})
        return None
    if not record["questions"]:
        return None
    notes.update(counted)
    return record


def parse_conversation(
    sessions: Any,
    group: Group,
    subset: str,
    file_name: str,
    path: str,
    notes: Notes,
    reject: Reject = raise_error,
    raw: bytes | None = None,
) -> dict[str, Any]:
    first = group.lines[0]
    location = where(first.number, first.fields["id"])
    if not isinstance(sessions, list):
        raise SourceError(path, location, "sessions", f"expected a list, got {type(sessions).__name__}")
    parsed = [parse_session(session, i, path, location, notes) for i, session in enumerate(sessions)]
    session_ids = [session["session_id"] for session in parsed]
    if len(set(session_ids)) != len(session_ids):
        duplicate = next(sid for sid in session_ids if session_ids.count(sid) > 1)
        raise SourceError(path, location, "sessions", f"two sessions have the id {duplicate!r}")
    speakers = list(dict.fromkeys(turn["role"] for session in parsed for turn in session["turns"]))
    return {
        "conversation_id": f"{subset}:{group.digest[:DIGEST_DIGITS]}",
        "source": "gigamemory",
        "subset": subset,
        "language": "ru",
        "speakers": speakers,
        "sessions": parsed,
        "questions": _questions(group, set(session_ids), file_name, path, notes, reject, raw),
        "extra": schema.to_json({"dialogue_sha256": group.digest}),
    }


def _questions(
    group: Group, session_ids: set[str], file_name: str, path: str, notes: Notes, reject: Reject, raw
) -> list[dict[str, Any]]:
    """The question of each line of the group; a line whose question fields are bad goes to ``reject``."""
    questions = []
    for line in group.lines:
        counted = Notes()
        try:
            questions.append(parse_question(line, session_ids, file_name, path, counted))
        except SourceError as error:
            first = line is group.lines[0] and raw is not None
            reject(error, raw if first else {**line.fields, "sessions": "<not kept: the dialogue is valid>"})
            continue
        notes.update(counted)
    return questions


def _leftovers(item: dict, standard: tuple[str, ...]) -> dict[str, Any]:
    """Key order where it differs from the real file's, and keys the format does not name."""
    extra: dict[str, Any] = {}
    if tuple(item) == standard:  # the common case: nothing to keep
        return extra
    extra["key_order"] = list(item)
    unknown = {key: value for key, value in item.items() if key not in standard}
    if unknown:
        extra["fields"] = unknown
    return extra


def parse_session(session: Any, index: int, path: str, location: str, notes: Notes) -> dict[str, Any]:
    name = f"sessions[{index}]"
    if not isinstance(session, dict):
        raise SourceError(path, location, name, f"expected an object, got {type(session).__name__}")
    for key in SESSION_KEYS:
        if key not in session:
            raise SourceError(path, location, f"{name}.{key}", "missing")
    raw_id = session["id"]
    session_id = id_as_text(raw_id, path, location, f"{name}.id")
    messages = session["messages"]
    if not isinstance(messages, list):
        raise SourceError(
            path, location, f"{name}.messages", f"expected a list, got {type(messages).__name__}"
        )
    if not messages:
        notes.add("session with no messages (no row in the messages config)")
    turns = [
        parse_message(message, session_id, i, path, location, name) for i, message in enumerate(messages)
    ]
    if turns and turns[0]["role"] != "user":
        notes.add(f"session starting with the {turns[0]['role']} (kept as is)")
    if turns and turns[-1]["role"] == "user":
        notes.add("session ending on a user message (kept as is)")
    extra = _leftovers(session, SESSION_KEYS)
    if not isinstance(raw_id, str):
        extra["id"] = raw_id
    result = schema.empty_session(session_id, turns)
    result["extra"] = schema.to_json(extra) if extra else None
    return result


def parse_message(
    message: Any, session_id: str, index: int, path: str, location: str, session_name: str
) -> dict[str, Any]:
    """One message → one turn. A message of the real file's shape (``role``, ``content``, both strings, a
    known role) takes the short way; any other is checked key by key and named in the error."""
    if (
        type(message) is dict
        and tuple(message) == MESSAGE_KEYS
        and type(message["content"]) is str
        and message["role"] in ROLES
    ):
        role = message["role"]
        return schema.empty_turn(f"{session_id}:{index}", role, role, message["content"])
    name = f"{session_name}.messages[{index}]"
    if not isinstance(message, dict):
        raise SourceError(path, location, name, f"expected an object, got {type(message).__name__}")
    for key in MESSAGE_KEYS:
        if key not in message:
            raise SourceError(path, location, f"{name}.{key}", "missing")
        if not isinstance(message[key], str):
            raise SourceError(
                path, location, f"{name}.{key}", f"expected a string, got {type(message[key]).__name__}"
            )
    role = message["role"]
    if role not in ROLES:
        raise SourceError(
            path, location, f"{name}.role", f"unknown role {role!r}; expected one of {', '.join(ROLES)}"
        )
    turn = schema.empty_turn(f"{session_id}:{index}", role, role, message["content"])
    extra = _leftovers(message, MESSAGE_KEYS)
    turn["extra"] = schema.to_json(extra) if extra else None
    return turn


def parse_question(
    line: Line, session_ids: set[str], file_name: str, path: str, notes: Notes
) -> dict[str, Any]:
    fields = line.fields
    raw_id = fields["id"]
    location = where(line.number, raw_id)
    text = fields.get("question")
    if not isinstance(text, str):
        problem = "missing" if "question" not in fields else f"expected a string, got {type(text).__name__}"
        raise SourceError(path, location, "question", problem)
    question = schema.empty_question(str(raw_id), text)
    extra: dict[str, Any] = {"file": file_name, "line": line.number, "id": raw_id}
    question["category"] = _question_type(fields, path, location, notes)
    question["answer"] = _answer(fields, extra, path, location, notes)
    evidence = _evidence(fields, extra, session_ids, path, location, notes)
    question["evidence_session_ids"] = [sid for sid in evidence if sid in session_ids]
    question["unresolved_evidence"] = [sid for sid in evidence if sid not in session_ids]
    if question["category"] == "no_info" and evidence:
        notes.add("no_info question that still lists answer sessions (kept)")
    leftovers = _leftovers({key: None for key in line.keys}, RECORD_KEYS)
    if "fields" in leftovers:
        leftovers["fields"] = {key: fields[key] for key in leftovers["fields"]}
    extra.update(leftovers)
    question["extra"] = schema.to_json(extra)
    return question


def _question_type(fields: dict, path: str, location: str, notes: Notes) -> str | None:
    if "question_type" not in fields:
        notes.add("line without question_type (category null)")
        return None
    value = fields["question_type"]
    if value is None:
        notes.add("question_type null (category null)")
        return None
    if not isinstance(value, str):
        raise SourceError(path, location, "question_type", f"expected a string, got {type(value).__name__}")
    if value not in QUESTION_TYPES:
        notes.add(f"question_type outside the four of the contest: {value!r}")
    return value


def _answer(fields: dict, extra: dict, path: str, location: str, notes: Notes) -> str | None:
    if "ans" not in fields:
        notes.add("line without ans (answer null)")
        return None
    value = fields["ans"]
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SourceError(path, location, "ans", f"expected a string, got {type(value).__name__}")
    notes.add(f"{type(value).__name__} ans → string (raw kept in extra.ans)")
    extra["ans"] = value
    return str(value)


def _evidence(
    fields: dict, extra: dict, session_ids: set[str], path: str, location: str, notes: Notes
) -> list[str]:
    """``ans_session_ids`` as strings; the raw list is kept in extra (ids naming no session are counted)."""
    if "ans_session_ids" not in fields:
        notes.add("line without ans_session_ids (no evidence)")
        return []
    raw = fields["ans_session_ids"]
    if not isinstance(raw, list):
        raise SourceError(path, location, "ans_session_ids", f"expected a list, got {type(raw).__name__}")
    extra["ans_session_ids"] = raw
    ids = [id_as_text(value, path, location, f"ans_session_ids[{i}]") for i, value in enumerate(raw)]
    missing = sum(sid not in session_ids for sid in ids)
    if missing:
        notes.add(
            "ans_session_ids entry naming no session of the dialogue (kept in unresolved_evidence)", missing
        )
    return ids
