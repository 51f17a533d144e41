"""The ``messages`` rules as convhub applied them session by session in Python until ``convhub.views.messages`` made
them Arrow's: the reference the Arrow code is tested against (``tests/views/test_messages_columns.py``). The rules
themselves are described in ``convhub.views.chat``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from convhub.views.chat import (
    EMPTY_LEFT_OUT,
    LATE_SYSTEM,
    NO_ASSISTANT,
    OPENS_WITH_ASSISTANT,
    PEER_SOURCES,
    SAME_ROLE_MERGED,
)

Row = dict[str, Any]


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
