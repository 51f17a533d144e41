"""GigaMemory's JSON values → canonical records: pure functions that raise ``FieldError`` for a bad field.

Every field of every line stays reachable with its raw JSON type: a question's ``extra`` holds its line's file,
number, raw ``id`` and ``ans_session_ids`` (and any other key), a session's its raw ``id``, and key order is kept
where it differs from the real file's: enough to rebuild each line (:mod:`convhub.builders.gigamemory.export`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from convhub import schema
from convhub.builders.gigamemory.line_groups import KeyOf, canonical_digest
from convhub.engine.inputs.listing import JSON_LINES
from convhub.engine.readers.contract import Place
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


@dataclass
class Line:
    """What is kept of a line besides its dialogue: its number, its keys in order and their values (sessions: None)."""

    number: int
    fields: dict[str, Any]


def where(number: int, record: dict[str, Any] | None = None) -> str:
    """How an error names a line: ``record 5 at line 3`` by its id, where it has one, else ``record at line 3``."""
    record_id = (record or {}).get("id")
    return f"{record_id!r} at line {number}" if type(record_id) in (int, str) else f"at line {number}"


def id_as_text(value: Any, field: str) -> str:
    """Integer and string ids are both accepted and become strings (the raw value is kept elsewhere)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise FieldError(field, f"expected an integer or a string, got {type(value).__name__}")
    return str(value)


def line_key() -> KeyOf:
    """The key of a file's lines: the digest of its dialogue (``canonical_digest``: conversation ids derive from
    it); kept of each line is its :class:`Line`. Ids are unique in a file."""
    first_lines: dict[str, int] = {}

    def key_of(number: int, record: dict[str, Any]) -> tuple[str, Line]:
        id_text = id_as_text(_required(record, "id"), "id")
        if id_text in first_lines:
            raise FieldError("id", f"duplicate id {id_text!r} (first at line {first_lines[id_text]})")
        _required(record, "sessions")
        first_lines[id_text] = number
        return canonical_digest(record["sessions"]), Line(number, {**record, "sessions": None})

    return key_of


def conversation(sessions: Any, place: Place, notes: Notes, digest: str) -> dict[str, Any]:
    """The conversation of one dialogue (read at ``place``, its first line; the subset is its file's stem),
    its ``questions`` still empty."""
    subset = JSON_LINES.stem(place.name)
    parsed = [
        parse_session(session, i, notes) for i, session in enumerate(_expect(sessions, list, "sessions"))
    ]
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
    if tuple(item) == standard:  # the common case: nothing to keep
        return {}
    unknown = {key: value for key, value in item.items() if key not in standard}
    return {"key_order": list(item), **({"fields": unknown} if unknown else {})}


def _expect(value: Any, kind: type, field: str) -> Any:
    """``value``, if it is a ``kind``."""
    if not isinstance(value, kind):
        article = {list: "a list", dict: "an object", str: "a string"}[kind]
        raise FieldError(field, f"expected {article}, got {type(value).__name__}")
    return value


def _required(item: dict, key: str, prefix: str = "") -> Any:
    """``item[key]``; its absence names the field ``prefix`` + ``key``."""
    if key not in item:
        raise FieldError(prefix + key, "missing")
    return item[key]


def parse_session(session: Any, index: int, notes: Notes) -> schema.Session:
    name = f"sessions[{index}]"
    session = _expect(session, dict, name)
    raw_id, messages = (_required(session, key, f"{name}.") for key in SESSION_KEYS)
    session_id = id_as_text(raw_id, f"{name}.id")
    _expect(messages, list, f"{name}.messages")
    if not messages:
        notes.add("session with no messages (no row in the messages config)")
    turns = [parse_message(message, session_id, i, name) for i, message in enumerate(messages)]
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


def parse_message(message: Any, session_id: str, index: int, session_name: str) -> schema.Turn:
    """One message → one turn; a bad key is named in the error."""
    name = f"{session_name}.messages[{index}]"
    message = _expect(message, dict, name)
    for key in MESSAGE_KEYS:
        _expect(_required(message, key, f"{name}."), str, f"{name}.{key}")
    role = message["role"]
    if role not in ROLES:
        raise FieldError(f"{name}.role", f"unknown role {role!r}; expected one of {', '.join(ROLES)}")
    turn = schema.empty_turn(f"{session_id}:{index}", role, role, message["content"])
    extra = _leftovers(message, MESSAGE_KEYS)
    turn["extra"] = schema.to_json(extra) if extra else None
    return turn


def parse_question(line: Line, place: Place, notes: Notes, session_ids: set[str]) -> schema.Question:
    """The question of one line (read at ``place``), its evidence resolved against the sessions of its dialogue."""
    fields = line.fields
    text = _expect(_required(fields, "question"), str, "question")
    question = schema.empty_question(str(fields["id"]), text)
    extra: dict[str, Any] = {"file": place.name, "line": line.number, "id": fields["id"]}
    question["category"] = _question_type(fields, notes)
    question["answer"] = _answer(fields, extra, notes)
    evidence = _evidence(fields, extra, session_ids, notes)
    question["evidence_session_ids"] = [sid for sid in evidence if sid in session_ids]
    question["unresolved_evidence"] = [sid for sid in evidence if sid not in session_ids]
    if question["category"] == "no_info" and evidence:
        notes.add("no_info question that still lists answer sessions (kept)")
    question["extra"] = schema.to_json({**extra, **_leftovers(fields, RECORD_KEYS)})
    return question


def _question_type(fields: dict, notes: Notes) -> str | None:
    value = fields.get("question_type")
    if value is None:
        absent = "question_type null" if "question_type" in fields else "line without question_type"
        notes.add(f"{absent} (category null)")
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
    if missing := sum(sid not in session_ids for sid in ids):
        notes.add(
            "ans_session_ids entry naming no session of the dialogue (kept in unresolved_evidence)", missing
        )
    return ids
