"""Views: the shapes one canonical conversation record is published in.

A view is a name, its ``Features`` and a pure function from one canonical record to the rows it
contributes. The shared views below are the same for every source; a source may add its own views
(LoCoMo's ``observations``) or *table views* whose rows come from other files than the conversations
(ConvLab's ``ontology``): those set ``rows_from_record`` to ``None`` and the builder supplies the rows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from convhub import schema
from datasets import Features

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


#: Sources whose two speakers are peers, not a user and an assistant: in ``messages`` the speaker who opens a
#: session is the ``user`` and the other the ``assistant``, and a ``system`` message names both and the date.
PEER_SOURCES = frozenset({"locomo"})

#: Why a session has no ``messages`` row: each one a chat template or a trainer would refuse.
NO_ASSISTANT = "messages: session left out: no assistant turn"
OPENS_WITH_ASSISTANT = "messages: session left out: opens with the assistant"
LATE_SYSTEM = "messages: session left out: a system turn after the start"
EMPTY_LEFT_OUT = "messages: empty turns left out"
SAME_ROLE_MERGED = "messages: consecutive turns of one role merged"


def turn_content(text: str, captions: list[str | None]) -> str:
    """A turn's text plus what it shared, as LoCoMo's own evaluation code writes it (``... and shared <caption>``),
    so that a reply to a photo refers to something."""
    shared = "".join(
        f" and shared {caption}." if caption else " and shared an image." for caption in captions
    )
    return text + shared


def chat_messages(
    source: str, speakers: list[str], date_time: str | None, turns: list[tuple[str, str, str]], notes: Counter
) -> list[Row] | None:
    """The ``messages`` of one session, or None when no lossless rule makes it a valid chat; ``notes`` counts why.

    ``turns`` are ``(speaker, role, content)``. A valid chat, as strict templates (Gemma's) and TRL require:
    an optional ``system`` message, then ``user`` and ``assistant`` alternating from ``user``, no empty content,
    at least one ``assistant`` message. The rules, all keeping every word of the source's text: empty turns are
    left out (their text is empty); consecutive turns of one role become one message (texts joined by a newline);
    system turns at the start become the system message. In a peer source the session's opener is the user.
    """
    if source in PEER_SOURCES:
        turns, system = _peer_roles(speakers, date_time, turns)
    else:
        system = None
    messages: list[Row] = [{"role": "system", "content": system}] if system else []
    for _, role, content in turns:
        if not content.strip():
            notes[EMPTY_LEFT_OUT] += 1
        elif messages and messages[-1]["role"] == role:
            messages[-1]["content"] += "\n" + content
            notes[SAME_ROLE_MERGED] += 1
        else:
            messages.append({"role": role, "content": content})
    body = messages[1:] if messages and messages[0]["role"] == "system" else messages
    problem = (
        LATE_SYSTEM
        if any(message["role"] == "system" for message in body)
        else OPENS_WITH_ASSISTANT
        if body and body[0]["role"] == "assistant"
        else NO_ASSISTANT
        if not any(message["role"] == "assistant" for message in body)
        else None
    )
    if problem:
        notes[problem] += 1
        return None
    return messages


def _peer_roles(speakers: list[str], date_time: str | None, turns: list[tuple[str, str, str]]):
    """The opener of the session as ``user``, everyone else as ``assistant``, and a system message naming them."""
    if not turns:
        return turns, None
    opener = turns[0][0]
    others = [name for name in speakers if name != opener] or sorted(
        {speaker for speaker, _, _ in turns} - {opener}
    )
    roles = [
        (speaker, "user" if speaker == opener else "assistant", content) for speaker, _, content in turns
    ]
    system = f"A conversation between {opener} (user) and {' and '.join(others) or 'no one else'} (assistant)"
    return roles, system + (f", {date_time}." if date_time else ".")


def message_rows(record: Record, notes: Counter | None = None) -> Iterator[Row]:
    """One row per session that makes a valid chat (``chat_messages``): what TRL and chat templates take."""
    notes = Counter() if notes is None else notes
    ids = _ids(record)
    for session_index, session in enumerate(record["sessions"]):
        turns = [
            (
                turn["speaker"],
                turn["role"],
                turn_content(turn["text"], [image["caption"] for image in turn["images"]]),
            )
            for turn in session["turns"]
        ]
        if not turns:
            continue
        messages = chat_messages(record["source"], record["speakers"], session["date_time"], turns, notes)
        if messages is not None:
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
    "One row per session as chat `messages` of {role, content} that strict chat templates accept.",
    message_rows,
)

SHARED_VIEWS: tuple[View, ...] = (SESSIONS, TURNS, QA, MESSAGES)
DEFAULT_VIEW = SESSIONS.name
