"""What makes one session a chat every template and trainer takes: the rules of the ``messages`` view.

A valid chat, as strict templates (Gemma's) and TRL require: an optional ``system`` message, then ``user`` and
``assistant`` alternating from ``user``, no empty content, at least one ``assistant`` message. The rules that make
a session one, all keeping every word of the source's text (``convhub.views.messages`` applies them on Arrow
columns):

- a turn's content is its text plus what it shared (:func:`turn_content`);
- empty turns (nothing but whitespace, as ``str.strip`` sees it) are left out;
- consecutive turns of one role become one message, their contents joined by a newline;
- system turns at the start become the system message;
- in a peer source (:data:`PEER_SOURCES`) the speaker who opens the session is the ``user`` and everyone else the
  ``assistant``, and a system message names them and the date (:func:`peer_system_message`);
- a session that is still no valid chat has no ``messages`` row, counted by why: a system turn after the start,
  opening with the assistant, no assistant turn (checked in that order).
"""

from __future__ import annotations

#: Sources whose two speakers are peers, not a user and an assistant: in ``messages`` the speaker who opens a
#: session is the ``user`` and the other the ``assistant``, and a ``system`` message names both and the date.
PEER_SOURCES = frozenset({"locomo"})

#: Why a session has no ``messages`` row: each one a chat template or a trainer would refuse.
NO_ASSISTANT = "messages: session left out: no assistant turn"
OPENS_WITH_ASSISTANT = "messages: session left out: opens with the assistant"
LATE_SYSTEM = "messages: session left out: a system turn after the start"
EMPTY_LEFT_OUT = "messages: empty turns left out"
SAME_ROLE_MERGED = "messages: consecutive turns of one role merged"

#: Every character ``str.isspace`` (so ``str.strip``) takes for whitespace: a turn of these alone is empty.
#: Arrow's own whitespace test differs (it does not count U+001C-U+001F), so ``messages`` matches this set.
PYTHON_WHITESPACE = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


def turn_content(text: str, captions: list[str | None]) -> str:
    """A turn's text plus what it shared, as LoCoMo's own evaluation code writes it (``... and shared <caption>``),
    so that a reply to a photo refers to something."""
    shared = "".join(
        f" and shared {caption}." if caption else " and shared an image." for caption in captions
    )
    return text + shared


def peer_system_message(
    opener: str, conversation_speakers: list[str], session_speakers: list[str], date_time: str | None
) -> str:
    """The system message of a peer session: who opens it (the user), who else speaks (the assistant: the
    conversation's other speakers, else the session's), and its date."""
    others = [name for name in conversation_speakers if name != opener] or sorted(
        set(session_speakers) - {opener}
    )
    system = f"A conversation between {opener} (user) and {' and '.join(others) or 'no one else'} (assistant)"
    return system + (f", {date_time}." if date_time else ".")
