"""Views: the shapes one canonical conversation record is published in.

A view is a name, its ``Features`` and a pure function from one canonical record to the rows it
contributes. The shared views below are the same for every source; a source may add its own views
(LoCoMo's ``observations``) or *table views* whose rows come from other files than the conversations
(ConvLab's ``ontology``): those set ``rows_from_record`` to ``None`` and the builder supplies the rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from datasets import Features

from builders import schema

Record = dict[str, Any]
Row = dict[str, Any]


@dataclass(frozen=True)
class View:
    name: str
    features: Features
    description: str
    rows_from_record: Callable[[Record], Iterator[Row]] | None = None

    @property
    def is_table(self) -> bool:
        """True when the rows do not derive from conversation records (ontology, database...)."""
        return self.rows_from_record is None


def _ids(record: Record) -> Row:
    return {name: record[name] for name in schema.CONVERSATION_IDS}


def session_rows(record: Record) -> Iterator[Row]:
    yield record


def turn_rows(record: Record) -> Iterator[Row]:
    ids = _ids(record)
    for session_index, session in enumerate(record["sessions"]):
        for turn_index, turn in enumerate(session["turns"]):
            yield {
                **ids,
                "session_id": session["session_id"],
                "session_index": session_index,
                "turn_index": turn_index,
                "date_time": session["date_time"],
                "timestamp": session["timestamp"],
                **turn,
            }


def qa_rows(record: Record) -> Iterator[Row]:
    ids = _ids(record)
    for question in record["questions"]:
        yield {**ids, **question}


def message_rows(record: Record) -> Iterator[Row]:
    """One row per session: the chat format (``role``/``content``) that TRL and chat templates take."""
    ids = _ids(record)
    for session_index, session in enumerate(record["sessions"]):
        messages = [{"role": turn["role"], "content": turn["text"]} for turn in session["turns"]]
        if messages:
            yield {
                **ids,
                "session_id": session["session_id"],
                "session_index": session_index,
                "messages": messages,
            }


SESSIONS = View(
    "sessions",
    schema.SESSIONS_FEATURES,
    "One row per conversation, nested sessions, turns and questions (the canonical record).",
    session_rows,
)
TURNS = View(
    "turns",
    schema.TURNS_FEATURES,
    "One row per turn, with its conversation and session ids and position.",
    turn_rows,
)
QA = View("qa", schema.QA_FEATURES, "One row per question, with its conversation id.", qa_rows)
MESSAGES = View(
    "messages",
    schema.MESSAGES_FEATURES,
    "One row per session as chat `messages` of {role, content}, ready for a chat template.",
    message_rows,
)

SHARED_VIEWS: tuple[View, ...] = (SESSIONS, TURNS, QA, MESSAGES)
DEFAULT_VIEW = SESSIONS.name
