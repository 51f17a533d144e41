"""GigaMemory's JSON values → canonical records: pure functions that raise ``FieldError`` for a bad field.

A GigaMemory line is one question and the whole dialogue it is asked about; lines with the same dialogue (the
same ``dialogue_digest``) make one conversation with all their questions (:mod:`builders.gigamemory.groups`
reads the lines). Every field of every line stays reachable with its raw JSON type: a question's ``extra``
holds its line's file, number, raw ``id`` and ``ans_session_ids`` (and any other key), a session's its raw
``id``, and key order is kept where it differs from the real file's: enough to rebuild each line
(:mod:`builders.gigamemory.export`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

import orjson

from convhub import schema
from convhub.engine.jsonio import holds_float
from convhub.errors import FieldError, Notes

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
SUFFIXES = (".jsonl.gz", ".jsonl")


@dataclass
class Line:
    """What a conversation keeps of one line besides its dialogue: its number and its question fields."""

    number: int
    fields: dict[str, Any]  # every key but ``sessions``
    keys: list[str]  # every key, in the line's order


def subset_of(name: str) -> str:
    """A file's subset is its name without ``.jsonl`` / ``.jsonl.gz``."""
    path = PurePosixPath(name)
    return next((path.name[: -len(end)] for end in SUFFIXES if path.name.endswith(end)), path.stem)


def where(line_number: int, record_id: Any = None) -> str:
    """How an error names a line: ``record 5 at line 3``, or ``record at line 3`` before its id is known."""
    return f"at line {line_number}" if record_id is None else f"{record_id!r} at line {line_number}"


def id_as_text(value: Any, field: str) -> str:
    """Integer and string ids are both accepted and become strings (the raw value is kept elsewhere)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise FieldError(field, f"expected an integer or a string, got {type(value).__name__}")
    return str(value)


def dialogue_digest(sessions: Any) -> str:
    """sha256 of ``json.dumps(sessions, ensure_ascii=False, separators=(",", ":"))`` in UTF-8: equal exactly
    when the dialogues are, ids' types too. ``orjson.dumps`` writes those bytes for a float-free value, much
    faster; it refuses what it would write otherwise (integers past 64 bits, lone surrogates), which json writes
    (a lone surrogate through ``surrogatepass``: the record is then rejected by name, as Parquet cannot hold it)."""
    data = None
    if not holds_float(sessions):
        try:
            data = orjson.dumps(sessions)
        except TypeError:  # orjson.JSONEncodeError
            data = None
    if data is None:
        text = json.dumps(sessions, ensure_ascii=False, separators=(",", ":"))
        data = text.encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()


def conversation(sessions: Any, notes: Notes, digest: str, subset: str) -> dict[str, Any]:
    """The conversation of one dialogue, its ``questions`` still empty."""
    if not isinstance(sessions, list):
        raise FieldError("sessions", f"expected a list, got {type(sessions).__name__}")
    parsed = [parse_session(session, i, notes) for i, session in enumerate(sessions)]
    session_ids = [session["session_id"] for session in parsed]
    if len(set(session_ids)) != len(session_ids):
        duplicate = next(sid for sid in session_ids if session_ids.count(sid) > 1)
        raise FieldError("sessions", f"two sessions have the id {duplicate!r}")
    return {
        "conversation_id": f"{subset}:{digest[:DIGEST_DIGITS]}",
        "source": "gigamemory",
        "subset": subset,
        "language": "ru",
        "speakers": list(dict.fromkeys(turn["role"] for session in parsed for turn in session["turns"])),
        "sessions": parsed,
        "questions": [],
        "extra": schema.to_json({"dialogue_sha256": digest}),
    }


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


def _expect(value: Any, kind: type, field: str) -> Any:
    if not isinstance(value, kind):
        names = {list: "a list", dict: "an object", str: "a string"}
        raise FieldError(field, f"expected {names[kind]}, got {type(value).__name__}")
    return value


def parse_session(session: Any, index: int, notes: Notes) -> dict[str, Any]:
    name = f"sessions[{index}]"
    _expect(session, dict, name)
    for key in SESSION_KEYS:
        if key not in session:
            raise FieldError(f"{name}.{key}", "missing")
    session_id = id_as_text(session["id"], f"{name}.id")
    messages = _expect(session["messages"], list, f"{name}.messages")
    if not messages:
        notes.add("session with no messages (no row in the messages config)")
    turns = [parse_message(message, session_id, i, name) for i, message in enumerate(messages)]
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


def parse_message(message: Any, session_id: str, index: int, session_name: str) -> dict[str, Any]:
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
    _expect(message, dict, name)
    for key in MESSAGE_KEYS:
        if key not in message:
            raise FieldError(f"{name}.{key}", "missing")
        _expect(message[key], str, f"{name}.{key}")
    role = message["role"]
    if role not in ROLES:
        raise FieldError(f"{name}.role", f"unknown role {role!r}; expected one of {', '.join(ROLES)}")
    turn = schema.empty_turn(f"{session_id}:{index}", role, role, message["content"])
    extra = _leftovers(message, MESSAGE_KEYS)
    turn["extra"] = schema.to_json(extra) if extra else None
    return turn


def parse_question(line: Line, session_ids: set[str], file_name: str, notes: Notes) -> dict[str, Any]:
    """The question of one line, its evidence resolved against the sessions of its dialogue."""
    fields = line.fields
    if "question" not in fields:
        raise FieldError("question", "missing")
    text = _expect(fields["question"], str, "question")
    question = schema.empty_question(str(fields["id"]), text)
    extra: dict[str, Any] = {"file": file_name, "line": line.number, "id": fields["id"]}
    question["category"] = _question_type(fields, notes)
    question["answer"] = _answer(fields, extra, notes)
    evidence = _evidence(fields, extra, session_ids, notes)
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


def _question_type(fields: dict, notes: Notes) -> str | None:
    if "question_type" not in fields:
        notes.add("line without question_type (category null)")
        return None
    value = fields["question_type"]
    if value is None:
        notes.add("question_type null (category null)")
        return None
    if _expect(value, str, "question_type") not in QUESTION_TYPES:
        notes.add(f"question_type outside the four of the contest: {value!r}")
    return value


def _answer(fields: dict, extra: dict, notes: Notes) -> str | None:
    if "ans" not in fields:
        notes.add("line without ans (answer null)")
        return None
    value = fields["ans"]
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FieldError("ans", f"expected a string, got {type(value).__name__}")
    notes.add(f"{type(value).__name__} ans → string (raw kept in extra.ans)")
    extra["ans"] = value
    return str(value)


def _evidence(fields: dict, extra: dict, session_ids: set[str], notes: Notes) -> list[str]:
    """``ans_session_ids`` as strings; the raw list is kept in extra (ids naming no session are counted)."""
    if "ans_session_ids" not in fields:
        notes.add("line without ans_session_ids (no evidence)")
        return []
    raw = extra["ans_session_ids"] = _expect(fields["ans_session_ids"], list, "ans_session_ids")
    ids = [id_as_text(value, f"ans_session_ids[{i}]") for i, value in enumerate(raw)]
    missing = sum(sid not in session_ids for sid in ids)
    if missing:
        notes.add(
            "ans_session_ids entry naming no session of the dialogue (kept in unresolved_evidence)", missing
        )
    return ids
