"""The one definition of convhub's shared schema.

Every source is parsed into one *canonical conversation record*: a plain dict whose shape is
``SESSIONS_FEATURES``. The other shared views (``turns``, ``qa``, ``messages``) are derived from that
record in ``convhub.views.definitions``; their features are defined here so that every source publishes exactly the
same Arrow schema and ``concatenate_datasets`` / ``interleave_datasets`` work across sources with no cast.

Free-form leftovers (every ``extra``, ConvLab's database ``entity``, LoCoMo's raw observation ``evidence``) are
JSON *text* made by :func:`to_json`, in plain string columns (:func:`json_text`), not ``datasets.Json``: a card
with ``dtype: json`` breaks every config in ``datasets`` before 4.7 (3.6 and 4.6 call ``pyarrow.json``, a
module), and Parquet's JSON logical type reads as ``bytes`` in pandas on pyarrow 17 and as an extension type in
polars that its string functions refuse. Plain text reads the same everywhere: ``json.loads`` in Python,
``str.json_path_match`` in polars, ``->>`` and ``json_extract`` in DuckDB.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any, TypedDict, overload

import orjson
from datasets import Features, List, Value

ROLES = ("user", "assistant", "system")

#: Parquet has no second resolution (timestamp[s] comes back as timestamp[ms]); ms survives the round trip.
TIMESTAMP = Value("timestamp[ms]")


def string() -> Value:
    return Value("string")


def json_text() -> Value:
    """A column of JSON text (see the module's docstring for why not ``datasets.Json``)."""
    return Value("string")


#: The names of the fields that hold JSON text, in every view and at any depth: ``export`` decodes exactly
#: these, and the card says how to parse them. No other field of any view has one of these names.
JSON_TEXT_FIELDS = frozenset({"extra", "entity", "evidence", "entry"})


@overload
def to_json(value: dict | list) -> str: ...
@overload
def to_json(value: Any) -> str | None: ...
def to_json(value: Any) -> str | None:
    """Serialize a free-form leftover for a ``Json`` column; ``None`` stays null.

    orjson, because serializing leftovers was 12-15% of a build with ``json.dumps``. Its text is compact
    (``{"a":1}``); where orjson cannot say the value exactly, ``json.dumps`` does: integers beyond 64 bits,
    lone surrogates, non-string keys (orjson raises), and NaN or infinities (orjson writes ``null``).
    """
    if value is None:
        return None
    try:
        text = orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError
        return json.dumps(value, ensure_ascii=False)
    if b"null" in text and holds_non_finite_float(value):
        return json.dumps(value, ensure_ascii=False)
    return text.decode()


def floats_in(value: Any) -> Iterator[float]:
    """Every float in a decoded JSON value (containers walked without recursion; scalars never stacked)."""
    if type(value) is float:
        yield value
        return
    pending = [value] if type(value) in _CONTAINERS else []
    while pending:
        container = pending.pop()
        for item in container.values() if type(container) is dict else container:
            kind = type(item)
            if kind is float:
                yield item
            elif kind in _CONTAINERS:
                pending.append(item)


_CONTAINERS = (dict, list, tuple)


def holds_non_finite_float(value: Any) -> bool:
    """True when orjson would write ``value`` differently from json (NaN and infinities become null)."""
    return any(not math.isfinite(number) for number in floats_in(value))


IMAGE = {"url": string(), "caption": string(), "query": string()}

DIALOGUE_ACT = {
    "type": string(),  # categorical | non-categorical | binary (ConvLab), or a source's own kind
    "intent": string(),
    "domain": string(),
    "slot": string(),
    "value": string(),
    "start": Value("int32"),
    "end": Value("int32"),
}

STATE_SLOT = {"domain": string(), "slot": string(), "value": string()}

TURN = {
    "turn_id": string(),
    "speaker": string(),
    "role": string(),
    "text": string(),
    "images": List(IMAGE),
    "reply_to": string(),
    "dialogue_acts": List(DIALOGUE_ACT),
    "state": List(STATE_SLOT),
    "extra": json_text(),
}

SESSION = {
    "session_id": string(),
    "date_time": string(),
    "timestamp": TIMESTAMP,
    "summary": string(),
    "turns": List(TURN),
    "extra": json_text(),
}

#: An independent audit's verdict on one question (LoCoMo's, ``convhub build locomo --errata``): its own id for the
#: question, the kind of error it found, the corrected answer and evidence, its reasoning, and its whole entry as
#: JSON text, so that nothing of the audit is lost. ``answer_changed`` is false where only the citation was wrong
#: (the source's answer stands; the audit's ``answer`` may then hold a comment, not an answer).
AUDIT = {
    "audit_id": string(),
    "error_type": string(),
    "answer_changed": Value("bool"),
    "answer": string(),
    "evidence_turn_ids": List(string()),
    "unresolved_evidence": List(string()),
    "reasoning": string(),
    "entry": json_text(),
}

QUESTION = {
    "question_id": string(),
    "question": string(),
    "answer": string(),
    "adversarial_answer": string(),
    #: The points a judge checks an answer against, one string each (BEAM's ``rubric``); empty where a source has none.
    "rubric": List(string()),
    "category": string(),
    "category_id": Value("int32"),
    "evidence_turn_ids": List(string()),
    #: Where the source says what each piece of evidence is (BEAM's ``first_statement``, ``original_info``, a role):
    #: one label per ``evidence_turn_ids`` entry, in the same order; empty where the source gives no such structure.
    "evidence_labels": List(string()),
    "evidence_session_ids": List(string()),
    #: Evidence the source gives that resolves to no turn or session of this conversation (an id naming none,
    #: or a piece with no id at all). Its own column, so that no key of the source's own can collide with it.
    "unresolved_evidence": List(string()),
    "extra": json_text(),
    #: Null but where an audit of the source's labels judged this question (a struct: ``AUDIT``); a column of every
    #: source, so that ``sessions`` and ``qa`` keep one schema across sources.
    "audit": AUDIT,
}

CONVERSATION_IDS = {
    "conversation_id": string(),
    "source": string(),
    "subset": string(),
    "language": string(),
}

#: The fields whose values are free text of the source's own length (turns, summaries, answers, JSON leftovers).
#: Parquet writes them with neither min/max statistics nor a dictionary (``convhub.engine.writers.parquet_writer.ParquetWriter``): no
#: filter prunes on them, they rarely repeat, and both would copy a very long value several times.
FREE_TEXT = frozenset(
    {
        "text",
        "summary",
        "caption",
        "question",
        "answer",
        "adversarial_answer",
        "content",
        "extra",
        "reasoning",
        "entry",
    }
)

SESSIONS_FEATURES = Features(
    {
        **CONVERSATION_IDS,
        "speakers": List(string()),
        "sessions": List(SESSION),
        "questions": List(QUESTION),
        "extra": json_text(),
    }
)

TURNS_FEATURES = Features(
    {
        **CONVERSATION_IDS,
        "session_id": string(),
        "session_index": Value("int32"),
        "turn_index": Value("int32"),
        "date_time": string(),
        "timestamp": TIMESTAMP,
        **{name: feature for name, feature in TURN.items()},
    }
)

QA_FEATURES = Features({**CONVERSATION_IDS, **QUESTION})

MESSAGE = {"role": string(), "content": string()}

MESSAGES_FEATURES = Features(
    {
        **CONVERSATION_IDS,
        "session_id": string(),
        "session_index": Value("int32"),
        "messages": List(MESSAGE),
    }
)


# The canonical record as Python types, beside the Features above (``tests/schema/test_schema.py`` keeps the two equal):
# what a source's conversion returns and what every view reads. ``str | None`` is a nullable string column;
# ``extra`` is JSON text made by :func:`to_json`.


class Image(TypedDict):
    url: str | None
    caption: str | None
    query: str | None


class DialogueAct(TypedDict):
    type: str | None
    intent: str | None
    domain: str | None
    slot: str | None
    value: str | None
    start: int | None
    end: int | None


class StateSlot(TypedDict):
    domain: str | None
    slot: str | None
    value: str | None


class Turn(TypedDict):
    turn_id: str
    speaker: str | None
    role: str
    text: str
    images: list[Image]
    reply_to: str | None
    dialogue_acts: list[DialogueAct]
    state: list[StateSlot]
    extra: str | None


class Session(TypedDict):
    session_id: str
    date_time: str | None
    timestamp: datetime | None
    summary: str | None
    #: (a long session's turns may be held as one Arrow array: ``engine.writers.arrow_rows.ArrowList``)
    turns: Sequence[Turn]
    extra: str | None


class Audit(TypedDict):
    audit_id: str
    error_type: str
    answer_changed: bool
    answer: str | None
    evidence_turn_ids: list[str]
    unresolved_evidence: list[str]
    reasoning: str | None
    entry: str


class Question(TypedDict):
    question_id: str
    question: str
    answer: str | None
    adversarial_answer: str | None
    rubric: list[str]
    category: str | None
    category_id: int | None
    evidence_turn_ids: list[str]
    evidence_labels: list[str]
    evidence_session_ids: list[str]
    unresolved_evidence: list[str]
    extra: str | None
    audit: Audit | None


class Conversation(TypedDict):
    """One row of ``sessions``: the canonical conversation record every source is converted into."""

    conversation_id: str
    source: str
    subset: str
    language: str | None
    speakers: list[str]
    sessions: list[Session]
    questions: list[Question]
    extra: str | None


class Message(TypedDict):
    role: str
    content: str


def empty_turn(turn_id: str, speaker: str, role: str, text: str) -> Turn:
    """A turn with every optional field at its empty value; parsers fill in what their source has."""
    return {
        "turn_id": turn_id,
        "speaker": speaker,
        "role": role,
        "text": text,
        "images": [],
        "reply_to": None,
        "dialogue_acts": [],
        "state": [],
        "extra": None,
    }


def empty_session(session_id: str, turns: Sequence[Turn]) -> Session:
    return {
        "session_id": session_id,
        "date_time": None,
        "timestamp": None,
        "summary": None,
        "turns": turns,
        "extra": None,
    }


def empty_question(question_id: str, question: str) -> Question:
    return {
        "question_id": question_id,
        "question": question,
        "answer": None,
        "adversarial_answer": None,
        "rubric": [],
        "category": None,
        "category_id": None,
        "evidence_turn_ids": [],
        "evidence_labels": [],
        "evidence_session_ids": [],
        "unresolved_evidence": [],
        "extra": None,
        "audit": None,
    }
