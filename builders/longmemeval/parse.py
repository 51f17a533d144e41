"""LongMemEval instances → canonical records, one per question (its haystack the sessions), run by the engine's
per-record loop (``convert``: a :class:`FieldError` names the field, the loop the file and the record).
Every field is reachable: typed where the schema has a place, raw otherwise, in the question's ``extra`` (question
date, numeric answer, key orders other than the documented one: names convhub claims, so none is mistaken for a
source key) or, unknown keys, in the conversation's ``extra.other_keys``."""

from __future__ import annotations

import posixpath
import re
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from convhub import schema
from convhub.engine.inputs.listing import JSON_OR_EXTENSIONLESS
from convhub.engine.readers.contract import Place
from convhub.engine.readers.long_lists import JSON_LIST, LongLists
from convhub.engine.writers.arrow_rows import session_turns
from convhub.errors import FieldError, Notes

#: The instance's keys in the order LongMemEval's README documents them; another order is kept in ``key_order``.
FIRST_KEYS = ("question_id", "question_type", "question", "answer", "question_date")
KEYS = (*FIRST_KEYS, "haystack_session_ids", "haystack_dates", "haystack_sessions", "answer_session_ids")
ROLES = {"user": "user", "assistant": "assistant"}
TURN_KEYS = ("role", "content")
_TURN_NUMBER = re.compile("[1-9][0-9]*")  # (as a turn id writes its number)
#: Where a large instance's long lists are, read lazily (``readers.long_lists``): its haystack sessions' turns.
LONG_LISTS: LongLists = (("haystack_sessions", int),)
#: ``2023/05/20 (Sat) 02:21``: the weekday is read (``%a``), not checked against the date.
DATE_FORMAT = "%Y/%m/%d (%a) %H:%M"


def subset_of(name: str) -> str:
    """A file's subset: its name without ``.json`` (the Hub's ``longmemeval_s`` and ``longmemeval_s.json`` alike),
    as ``--subset`` chooses files (``listing.Listing.chosen``)."""
    return JSON_OR_EXTENSIONLESS.stem(name)


def convert(instance: Any, place: Place, notes: Notes) -> dict[str, Any]:
    """The engine's conversion of one instance read at ``place``: its subset and ``file`` are its file's name."""
    return convert_instance(instance, notes, subset_of(place.name), posixpath.basename(place.name))


def not_longmemeval(element: Any) -> str | None:
    """Why a file whose first element is ``element`` is not LongMemEval's (LoCoMo's ``locomo10.json`` beside
    LongMemEval's files, say): none of an instance's keys. None where it may be."""
    if isinstance(element, dict) and element.keys() & set(KEYS):
        return None
    return _not_longmemeval(element)


def _not_longmemeval(element: Any) -> str:
    found = (
        f"an object with keys {', '.join(map(repr, list(element)[:5]))}{', ...' if len(element) > 5 else ''}"
        if isinstance(element, dict)
        else f"a {type(element).__name__}"
    )
    return (
        f"does not look like LongMemEval's format: expected a list of instances with keys {', '.join(KEYS[:3])}, "
        f"haystack_sessions, ..., its first element is {found}"
    )


def _required(instance: dict, key: str, kind: type | tuple, what: str, items: type | None = None) -> Any:
    """``instance[key]`` if of ``kind`` (a bool is no number), its items of ``items``; else the FieldError
    (``missing`` where the key is absent, as every source says it)."""
    if key not in instance:
        raise FieldError(key, "missing")
    value: Any = instance[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise FieldError(key, f"expected {what}, got {type(value).__name__}")
    for index, item in enumerate(value if items else ()):
        if items is not None and not isinstance(item, items):
            raise FieldError(f"{key}[{index}]", f"expected a string, got {type(item).__name__}")
    return value


def convert_instance(instance: Any, notes: Notes, subset: str, file: str) -> dict[str, Any]:
    """One instance → one canonical record: ``conversation_id`` ``<subset>:<question_id>``, one question."""
    if not isinstance(instance, dict):
        raise FieldError(None, f"expected an object, got {type(instance).__name__}")
    question_id = _required(instance, "question_id", str, "a string")
    session_ids = _required(instance, "haystack_session_ids", list, "a list", str)
    dates = _required(instance, "haystack_dates", list, "a list", str)
    haystack = _required(instance, "haystack_sessions", list, "a list of sessions")
    if not len(session_ids) == len(dates) == len(haystack):
        counts = f"{len(session_ids)} ids, {len(dates)} dates, {len(haystack)} sessions"
        raise FieldError("haystack_dates", f"{counts}: not one of each per session")
    stored_ids = _stored_session_ids(session_ids, notes)
    turn_key_orders: dict[str, list[str]] = {}
    sessions, evidence_turns = [], []
    for index, (session_id, date, turns) in enumerate(zip(stored_ids, dates, haystack, strict=True)):
        session, evidence = parse_session(session_id, date, turns, index, turn_key_orders)
        if session_id != session_ids[index]:
            session["extra"] = schema.to_json({"session_id": session_ids[index]})
        sessions.append(session)
        evidence_turns.extend(evidence)
    _refuse_turn_named_as_a_session(stored_ids, sessions)
    timestamps = [session["timestamp"] for session in sessions]
    if timestamps != sorted(timestamps):
        notes.add("haystack not sorted by date (kept in the file's order)")
    question, question_extra = parse_question(instance, question_id, evidence_turns, sessions, notes)
    expected_order = [*KEYS, *(key for key in instance if key not in KEYS)]
    if list(instance) != expected_order:
        question_extra["key_order"] = list(instance)
    if turn_key_orders:
        question_extra["turn_key_orders"] = turn_key_orders
    question["extra"] = schema.to_json(question_extra)
    other_keys = {key: value for key, value in instance.items() if key not in KEYS}
    if other_keys:
        notes.add("instance key LongMemEval does not document (kept in extra.other_keys)", len(other_keys))
    speakers = {turn["speaker"]: None for session in sessions for turn in session["turns"]}
    return {
        "conversation_id": f"{subset}:{question_id}",
        "source": "longmemeval",
        "subset": subset,
        "language": "en",
        "speakers": list(speakers),
        "sessions": sessions,
        "questions": [question],
        "extra": schema.to_json({"file": file, **({"other_keys": other_keys} if other_keys else {})}),
    }


def _stored_session_ids(session_ids: list[str], notes: Notes) -> list[str]:
    """The haystack's session ids as stored: each id once, a repeat (the cleaned release repeats 13 filler sessions
    within their haystacks) as ``<id>#<k>``, its ``k``-th time, so that every session and turn id of a conversation
    names one thing; the export gives the repeat its own id again (kept in the session's ``extra.session_id``)."""
    seen: Counter = Counter()
    stored = []
    for session_id in session_ids:
        seen[session_id] += 1
        stored.append(session_id if seen[session_id] == 1 else f"{session_id}#{seen[session_id]}")
    if len(stored) != len(set(stored)):
        taken = next(id_ for id_ in stored if stored.count(id_) > 1)
        raise FieldError("haystack_session_ids", f"{taken!r} is both a session id and a repeat's stored id")
    if stored != session_ids:
        notes.add(
            "session id repeated in one haystack (the repeat stored as <id>#<k>, its id in extra.session_id)",
            sum(count - 1 for count in seen.values()),
        )
    return stored


def _refuse_turn_named_as_a_session(session_ids: list[str], sessions: list[schema.Session]) -> None:
    """A session id that is also a turn id (``x_2`` beside a session ``x`` of two turns or more) is an error: a
    turn is named ``<session id>_<n>`` as LongMemEval's retrieval names it, and one id for a session and a turn
    would make a ranking of ids ambiguous (``convhub score`` reads such an id as the session)."""
    index_of = {session_id: index for index, session_id in enumerate(session_ids)}
    for index, session_id in enumerate(session_ids):
        owner, _, number = session_id.rpartition("_")
        other = index_of.get(owner)
        if (
            other is not None
            and _TURN_NUMBER.fullmatch(number)
            and int(number) <= len(sessions[other]["turns"])
        ):
            raise FieldError(
                f"haystack_session_ids[{index}]",
                f"{session_id!r} is also the id of turn {int(number)} of session {owner!r} "
                f"(haystack_session_ids[{other}]): a turn is named '<session id>_<n>', and one id cannot name both",
            )


def parse_question(
    instance: dict, question_id: str, evidence_turns: list[str], sessions: list[dict], notes: Notes
) -> tuple[schema.Question, dict[str, Any]]:
    """The question (``category``: its type) and its ``extra``: ``question_date``, ``abstention`` (id ending ``_abs``),
    the raw ``answer`` if a number, the raw ``answer_session_ids`` if some name no haystack session."""
    question = schema.empty_question(question_id, _required(instance, "question", str, "a string"))
    question["category"] = _required(instance, "question_type", str, "a string")
    extra = {"question_date": _required(instance, "question_date", str, "a string")}
    extra["abstention"] = question_id.endswith("_abs")
    answer = _required(instance, "answer", (str, int, float), "a string or a number")
    if not isinstance(answer, str):
        notes.add(f"{type(answer).__name__} answer → string (raw kept in the question's extra.answer)")
        extra["answer"] = answer
    question["answer"] = str(answer)
    answer_sessions = _required(instance, "answer_session_ids", list, "a list", str)
    haystack = {session["session_id"] for session in sessions}
    question["evidence_session_ids"] = [s for s in answer_sessions if s in haystack]
    question["unresolved_evidence"] = [s for s in answer_sessions if s not in haystack]
    if question["unresolved_evidence"]:
        notes.add("answer session id naming no haystack session (in unresolved_evidence)")
        extra["answer_session_ids"] = answer_sessions
    question["evidence_turn_ids"] = evidence_turns
    unmarked = set(question["evidence_session_ids"]) - {turn.rsplit("_", 1)[0] for turn in evidence_turns}
    if unmarked:
        notes.add("answer session with no has_answer turn (LongMemEval's retrieval: noans)", len(unmarked))
    return question, extra


def parse_session(
    session_id: str, date: str, turns: Any, index: int, key_orders: dict[str, list[str]]
) -> tuple[schema.Session, list[str]]:
    """One haystack session (dated, its turns ``<session id>_<n>`` from 1, as LongMemEval's retrieval names
    them) and the ids of its ``has_answer`` turns."""
    field = f"haystack_sessions[{index}]"
    if not isinstance(turns, JSON_LIST):  # (a long session's turns: a LazyJsonArray)
        raise FieldError(field, f"expected a list of turns, got {type(turns).__name__}")
    evidence: list[str] = []

    def records() -> Iterator[schema.Turn]:
        """The session's turns as they are parsed, noting the ``has_answer`` ones in ``evidence``."""
        for number, turn in enumerate(turns, 1):
            turn_id = f"{session_id}_{number}"
            yield parse_turn(turn, turn_id, f"{field}[{number - 1}]", key_orders)
            if turn.get("has_answer") is True:
                evidence.append(turn_id)

    session = schema.empty_session(session_id, session_turns(records()))
    session["date_time"] = date
    try:
        session["timestamp"] = datetime.strptime(date, DATE_FORMAT)
    except ValueError:
        raise FieldError(f"haystack_dates[{index}]", f"{date!r} is not YYYY/MM/DD (Ddd) HH:MM") from None
    return session, evidence


def parse_turn(turn: Any, turn_id: str, field: str, key_orders: dict[str, list[str]]) -> schema.Turn:
    """``role`` and ``content`` typed (role as speaker and, mapped, as role); ``has_answer`` and any other key in
    the turn's ``extra``; a key order other than ``role, content, ...`` noted in ``key_orders``."""
    if not isinstance(turn, dict):
        raise FieldError(field, f"expected an object, got {type(turn).__name__}")
    role, content = turn.get("role"), turn.get("content")
    if not isinstance(role, str) or role not in ROLES:
        raise FieldError(f"{field}.role", f"expected 'user' or 'assistant', got {role!r}")
    if not isinstance(content, str):
        raise FieldError(f"{field}.content", f"expected a string, got {type(content).__name__}")
    if not isinstance(turn.get("has_answer", False), bool):
        raise FieldError(f"{field}.has_answer", f"expected true or false, got {turn['has_answer']!r}")
    record = schema.empty_turn(turn_id, role, ROLES[role], content)
    if len(turn) > 2:
        record["extra"] = schema.to_json({key: value for key, value in turn.items() if key not in TURN_KEYS})
    if tuple(turn)[:2] != TURN_KEYS:
        key_orders[turn_id] = list(turn)
    return record
