"""Pass 2: GigaMemory lines → canonical conversation records, one per dialogue.

The format fits on a page. A file is JSON Lines; each line is one question about one dialogue::

    {"id": 1, "question": "...", "ans": "...", "question_type": "fact_equal_session",
     "sessions": [{"id": 1, "messages": [{"role": "user", "content": "..."}, ...]}, ...],
     "ans_session_ids": [1]}

``id`` is an integer or a string, unique in the file; ``ans`` a string (a number is read as its text);
``question_type`` one of :data:`QUESTION_TYPES` (others are kept and counted); ``ans_session_ids`` names the
sessions that hold the answer. The lines of one dialogue (pass 1, ``convhub.gigamemory.index``) become one
record: the dialogue's sessions and turns, and one question per line.

Every field of every line is reachable in the output with its raw JSON type: the question's ``extra`` holds
the line's file, line number, raw ``id`` and ``ans_session_ids`` (and any other key), the session's
``extra`` its raw ``id``; key order is kept where it differs from the real file's. That is what
``convhub.gigamemory.export`` needs to write each line back, byte for byte.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Iterator
from typing import Any

from convhub import schema
from convhub.errors import Notes, Reject, SourceError, raise_error
from convhub.gigamemory.index import Group, Line, first_line_sessions, id_text, open_binary, where

#: The four question types of the contest, in the order of its format document.
QUESTION_TYPES = ("fact_equal_session", "info_consolidation", "info_updating", "no_info")
#: Key order of a line, a session and a message in the real file (format_example.jsonl).
RECORD_KEYS = ("id", "question", "ans", "question_type", "sessions", "ans_session_ids")
SESSION_KEYS = ("id", "messages")
MESSAGE_KEYS = ("role", "content")
#: Roles kept as they are; GigaMemory itself only uses user and assistant.
ROLES = ("user", "assistant", "system")
#: A conversation id is the file stem plus this many hex digits of the dialogue's sha256.
DIGEST_DIGITS = 16


def parse_shard(
    shard: dict[str, Any], notes: Notes, reject: Reject = raise_error
) -> Iterator[dict[str, Any]]:
    """Read the first line of each group of the shard again and build its conversation.

    A shard's offsets only increase, so a ``.jsonl.gz`` is read in one decompression pass of forward seeks.
    """
    path = shard["path"]
    for kind, count in shard["notes"].items():
        notes.add(kind, count)
    with open_binary(path) as handle:
        for group in shard["groups"]:
            raw = _read_first_line(handle, path, group)
            sessions = first_line_sessions(path, group, raw)
            record = _conversation_or_reject(sessions, group, shard, raw, notes, reject)
            if record is not None:
                yield record


def _read_first_line(handle, path, group: Group) -> bytes:
    """The first line of a group, read again and checked to be the very line pass 1 indexed."""
    number = group.lines[0].number
    try:
        handle.seek(group.offset)
        raw = handle.read(group.length)
    except (OSError, EOFError, zlib.error) as error:
        raise SourceError(path, where(number), None, f"cannot read the file: {error}") from error
    if len(raw) != group.length or hashlib.sha256(raw).hexdigest() != group.line_sha256:
        raise SourceError(path, where(number), None, "the file changed while it was being converted")
    return raw


def _conversation_or_reject(
    sessions: Any, group: Group, shard: dict[str, Any], raw: bytes, notes: Notes, reject: Reject
) -> dict[str, Any] | None:
    """One conversation, or None when ``reject`` took every line of it.

    A bad dialogue rejects every line that shares it (each named by its own line); a bad question field
    rejects only its line. Normalizations are counted only for what is kept.
    """
    path, first = shard["path"], group.lines[0]
    counted = Notes()
    try:
        parsed = parse_sessions(sessions, path, where(first.number, first.fields["id"]), counted)
    except SourceError as error:
        reject(error, raw)
        for line in group.lines[1:]:
            shared = f"{error.problem} (in the dialogue this line shares with line {first.number})"
            line_error = SourceError(path, where(line.number, line.fields["id"]), error.field, shared)
            reject(line_error, {**line.fields, "sessions": f"<the sessions of line {first.number}>"})
        return None
    session_ids = {session["session_id"] for session in parsed}
    questions = []
    for line in group.lines:
        question_notes = Notes()
        try:
            questions.append(parse_question(line, session_ids, shard["file_name"], path, question_notes))
        except SourceError as error:
            reject(
                error,
                raw if line is first else {**line.fields, "sessions": "<not kept: the dialogue is valid>"},
            )
            continue
        counted.update(question_notes)
    if not questions:
        return None
    notes.update(counted)
    return conversation(shard["subset"], group.digest, parsed, questions)


def conversation(subset: str, digest: str, sessions: list[dict], questions: list[dict]) -> dict[str, Any]:
    """The canonical record of one dialogue (its id from the dialogue's digest) and its questions."""
    speakers = list(dict.fromkeys(turn["role"] for session in sessions for turn in session["turns"]))
    return {
        "conversation_id": f"{subset}:{digest[:DIGEST_DIGITS]}",
        "source": "gigamemory",
        "subset": subset,
        "language": "ru",
        "speakers": speakers,
        "sessions": sessions,
        "questions": questions,
        "extra": schema.to_json({"dialogue_sha256": digest}),
    }


def parse_sessions(sessions: Any, path: str, location: str, notes: Notes) -> list[dict[str, Any]]:
    """A line's ``sessions`` → canonical sessions; their ids must be unique (``ans_session_ids`` names them)."""
    if not isinstance(sessions, list):
        raise SourceError(path, location, "sessions", f"expected a list, got {type(sessions).__name__}")
    parsed = [parse_session(session, i, path, location, notes) for i, session in enumerate(sessions)]
    session_ids = [session["session_id"] for session in parsed]
    if len(set(session_ids)) != len(session_ids):
        duplicate = next(sid for sid in session_ids if session_ids.count(sid) > 1)
        raise SourceError(path, location, "sessions", f"two sessions have the id {duplicate!r}")
    return parsed


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
    """One ``{"id", "messages"}`` → a canonical session (its id as text, the raw id kept if not one)."""
    name = f"sessions[{index}]"
    if not isinstance(session, dict):
        raise SourceError(path, location, name, f"expected an object, got {type(session).__name__}")
    for key in SESSION_KEYS:
        if key not in session:
            raise SourceError(path, location, f"{name}.{key}", "missing")
    session_id = id_text(session["id"], path, location, f"{name}.id")
    messages = session["messages"]
    if not isinstance(messages, list):
        problem = f"expected a list, got {type(messages).__name__}"
        raise SourceError(path, location, f"{name}.messages", problem)
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
    if not isinstance(session["id"], str):
        extra["id"] = session["id"]
    result = schema.empty_session(session_id, turns)
    result["extra"] = schema.to_json(extra) if extra else None
    return result


def parse_message(
    message: Any, session_id: str, index: int, path: str, location: str, session_name: str
) -> dict[str, Any]:
    """One ``{"role", "content"}`` → one turn; any other key is kept in its ``extra``."""
    name = f"{session_name}.messages[{index}]"
    if not isinstance(message, dict):
        raise SourceError(path, location, name, f"expected an object, got {type(message).__name__}")
    for key in MESSAGE_KEYS:
        if key not in message:
            raise SourceError(path, location, f"{name}.{key}", "missing")
        if not isinstance(message[key], str):
            problem = f"expected a string, got {type(message[key]).__name__}"
            raise SourceError(path, location, f"{name}.{key}", problem)
    role = message["role"]
    if role not in ROLES:
        problem = f"unknown role {role!r}; expected one of {', '.join(ROLES)}"
        raise SourceError(path, location, f"{name}.role", problem)
    turn = schema.empty_turn(f"{session_id}:{index}", role, role, message["content"])
    extra = _leftovers(message, MESSAGE_KEYS)
    turn["extra"] = schema.to_json(extra) if extra else None
    return turn


def parse_question(
    line: Line, session_ids: set[str], file_name: str, path: str, notes: Notes
) -> dict[str, Any]:
    """One line's question fields → a canonical question; ``extra`` keeps what the export needs back."""
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
    leftovers = _leftovers(dict.fromkeys(line.keys), RECORD_KEYS)
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
    """``ans`` as text; a number becomes its text and is kept raw in extra."""
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
    ids = [id_text(value, path, location, f"ans_session_ids[{i}]") for i, value in enumerate(raw)]
    missing = sum(sid not in session_ids for sid in ids)
    if missing:
        note = "ans_session_ids entry naming no session of the dialogue (kept in unresolved_evidence)"
        notes.add(note, missing)
    return ids
