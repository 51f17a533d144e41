"""The ``messages`` view on Arrow columns: each session that can be a valid chat, as ``role``/``content`` messages.

The rules are ``convhub.views.chat``'s. Every step runs on a whole batch's turns at once: which turns are empty (a
regular expression of ``str.strip``'s whitespace), which start a message (their role differs from the kept turn
before them in the session), each message's content (its turns' contents joined by a newline, by
``binary_join``), and which sessions break a rule (counts per session, with numpy). Python runs per turn only for a
turn that shared images (its content names them) and per session only in a peer source (its system message).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from convhub import schema
from convhub.views.chat import (
    EMPTY_LEFT_OUT,
    LATE_SYSTEM,
    NO_ASSISTANT,
    OPENS_WITH_ASSISTANT,
    PEER_SOURCES,
    PYTHON_WHITESPACE,
    SAME_ROLE_MERGED,
    peer_system_message,
    turn_content,
)
from convhub.views.nested import flattened, list_positions, sessions_of, struct_fields

MESSAGE_TYPE = schema.MESSAGES_FEATURES.arrow_schema.field("messages").type

#: A content of whitespace alone (or nothing), as ``str.strip`` sees it (RE2 syntax).
_BLANK = "^[" + "".join(f"\\x{{{ord(char):x}}}" for char in PYTHON_WHITESPACE) + "]*$"


def messages_table(batch: pa.RecordBatch, notes: Counter) -> pa.Table:
    """The ``messages`` rows of a batch of ``sessions`` rows; ``notes`` counts the turns left out or merged and the
    sessions left out, by why."""
    session_parent, session_index, session_fields = sessions_of(batch)
    turns = session_fields["turns"]
    turn = struct_fields(flattened(turns))
    turn_session = list_positions(turns)[0].to_numpy().astype(np.int64)
    turn_counts = np.bincount(turn_session, minlength=len(turns))
    first_turn = np.concatenate(([0], np.cumsum(turn_counts)[:-1])).astype(np.int64)
    sources = batch.column("source").take(session_parent)
    peer = pc.is_in(sources, pa.array(sorted(PEER_SOURCES))).to_numpy(zero_copy_only=False)

    roles = _roles(turn, turn_session, first_turn, peer)
    message_session, message_roles, message_contents = _merged_turns(
        roles, _contents(turn["text"], turn["images"]), turn_session, notes
    )
    problems = _problems(message_session, message_roles, len(turns), peer)
    for problem, name in enumerate((LATE_SYSTEM, OPENS_WITH_ASSISTANT, NO_ASSISTANT), start=1):
        _count(notes, name, int(((problems == problem) & (turn_counts > 0)).sum()))
    kept = np.flatnonzero((problems == 0) & (turn_counts > 0))  # a session without turns is no chat either

    kept_peers = kept[peer[kept]]
    system = _system_messages(
        batch, session_parent, session_fields, turn, kept_peers, first_turn, turn_counts
    )
    messages = _chat_lists(kept, kept_peers, system, message_session, message_roles, message_contents)

    kept = pa.array(kept, pa.int64())
    columns = {name: batch.column(name).take(session_parent.take(kept)) for name in schema.CONVERSATION_IDS}
    columns["session_id"] = session_fields["session_id"].take(kept)
    columns["session_index"] = session_index.take(kept)
    columns["messages"] = messages.cast(MESSAGE_TYPE)
    return pa.table(columns)


def _merged_turns(roles: pa.Array, contents: pa.Array, turn_session: np.ndarray, notes: Counter):
    """The messages of the turns, every session's at once: empty turns left out, and each run of kept turns of one
    role in a session one message, its contents joined by a newline. (session, role, content) of each message.
    Where no turn is empty or merged, the turns' own arrays are the messages' (a very long text is not copied). A
    null text, which no parser makes (a turn's text is a string), counts as empty."""
    blank = pc.fill_null(pc.match_substring_regex(contents, _BLANK), True).to_numpy(zero_copy_only=False)
    _count(notes, EMPTY_LEFT_OUT, int(blank.sum()))
    session = turn_session
    if blank.any():
        kept = np.flatnonzero(~blank)
        session = turn_session[kept]
        roles, contents = roles.take(pa.array(kept)), contents.take(pa.array(kept))
    codes = _codes(roles)
    opens = np.ones(len(roles), dtype=bool)  # the kept turns that open a message
    opens[1:] = (session[1:] != session[:-1]) | (codes[1:] != codes[:-1])
    _count(notes, SAME_ROLE_MERGED, int(len(roles) - opens.sum()))
    if opens.all():
        return session, roles, contents
    starts = np.flatnonzero(opens)
    runs = pa.ListArray.from_arrays(pa.array(np.append(starts, len(roles)), pa.int32()), contents)
    return session[starts], roles.take(pa.array(starts)), pc.binary_join(runs, "\n")


def _chat_lists(kept, kept_peers, system, message_session, message_roles, message_contents) -> pa.ListArray:
    """Each kept session's messages, in order: a peer session's system message first, then its turns'."""
    chosen = np.flatnonzero(np.isin(message_session, kept))
    session_of = np.concatenate((message_session[chosen], kept_peers))
    if len(chosen) == len(message_session) and not system:  # every message is kept, in order: no copy
        roles, contents = message_roles, message_contents
    else:
        system_last = np.concatenate((np.ones(len(chosen), np.int8), np.zeros(len(kept_peers), np.int8)))
        order = np.lexsort((np.arange(len(session_of)), system_last, session_of))
        session_of = session_of[order]
        chosen = pa.array(chosen, pa.int64())
        system_roles = pa.array(["system"] * len(system), pa.string())
        roles = pa.concat_arrays([message_roles.take(chosen), system_roles]).take(pa.array(order))
        contents = pa.concat_arrays([message_contents.take(chosen), pa.array(system, pa.string())])
        contents = contents.take(pa.array(order))
    per_session = np.bincount(np.searchsorted(kept, session_of), minlength=len(kept))
    return pa.ListArray.from_arrays(
        pa.array(np.concatenate(([0], np.cumsum(per_session))), pa.int32()),
        pa.StructArray.from_arrays([roles, contents], names=["role", "content"]),
    )


def _count(notes: Counter, name: str, count: int) -> None:
    if count:
        notes[name] += count


def _codes(values: pa.Array) -> np.ndarray:
    """Each value as an integer, equal values alike (a null is a value of its own, as ``None == None``)."""
    encoded = pc.dictionary_encode(values)
    return pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False)


def _roles(turn: dict[str, pa.Array], turn_session: np.ndarray, first_turn: np.ndarray, peer: np.ndarray):
    """Each turn's role; in a peer session, ``user`` for the speaker who opens it and ``assistant`` for the rest."""
    roles = turn["role"]
    peer_turn = peer[turn_session]
    if not peer_turn.any():
        return roles
    speakers = turn["speaker"]
    opener = speakers.take(pa.array(first_turn[turn_session]))
    same = pc.fill_null(pc.equal(speakers, opener), False)
    both_null = pc.and_(pc.is_null(speakers), pc.is_null(opener))
    peer_roles = pc.if_else(pc.or_(same, both_null), "user", "assistant")
    return pc.if_else(pa.array(peer_turn), peer_roles, roles)


def _contents(texts: pa.Array, images: pa.ListArray) -> pa.Array:
    """Each turn's content (``chat.turn_content``): its text, and for a turn that shared images, what they were."""
    shared = pc.fill_null(pc.greater(pc.list_value_length(images), 0), False)
    if not pc.any(shared).as_py():
        return texts
    where = np.flatnonzero(shared.to_numpy(zero_copy_only=False))
    captions = pc.struct_field(flattened(images), "caption")
    offsets = pc.subtract(images.offsets, images.offsets[0]).to_numpy()
    with_images = [
        turn_content(texts[i].as_py(), captions[offsets[i] : offsets[i + 1]].to_pylist()) for i in where
    ]
    return pc.replace_with_mask(texts, shared, pa.array(with_images, pa.string()))


def _problems(message_session: np.ndarray, message_roles: pa.Array, sessions: int, peer: np.ndarray):
    """Per session, the first rule its messages break: 1 a system message after the start, 2 opening with the
    assistant, 3 no assistant message; 0 none. A peer session's system message is its own, before its turns'."""
    is_system = pc.fill_null(pc.equal(message_roles, "system"), False).to_numpy(zero_copy_only=False)
    is_assistant = pc.fill_null(pc.equal(message_roles, "assistant"), False).to_numpy(zero_copy_only=False)
    count = np.bincount(message_session, minlength=sessions)
    first = np.concatenate(([0], np.cumsum(count)[:-1])).astype(np.int64)
    has = count > 0
    opens_system = np.zeros(sessions, dtype=bool)  # (a peer session's own system message is not among these)
    opens_system[has] = is_system[first[has]] & ~peer[has]
    late_system = np.bincount(message_session, weights=is_system, minlength=sessions) > opens_system
    body_first = first + opens_system
    body = body_first < first + count
    opens_assistant = np.zeros(sessions, dtype=bool)
    opens_assistant[body] = is_assistant[body_first[body]]
    no_assistant = np.bincount(message_session, weights=is_assistant, minlength=sessions) == 0
    return np.select([late_system, opens_assistant, no_assistant], [1, 2, 3], 0)


def _system_messages(
    batch, session_parent, session_fields, turn, peer_kept: np.ndarray, first_turn, turn_counts
) -> list[str]:
    """The system message of each kept peer session (``chat.peer_system_message``), in session order."""
    if not len(peer_kept):
        return []
    speakers, dates = turn["speaker"], session_fields["date_time"]
    conversation_speakers = batch.column("speakers")
    parents = session_parent.to_numpy()
    return [
        peer_system_message(
            speakers[first_turn[s]].as_py(),
            conversation_speakers[parents[s]].as_py(),
            speakers[first_turn[s] : first_turn[s] + turn_counts[s]].to_pylist(),
            dates[s].as_py(),
        )
        for s in peer_kept
    ]
