"""The ``messages`` view on Arrow columns (``convhub.views.messages``) gives what the rules give session by session:
the rules by example, and random batches of sessions against the Python code that applied them until it did
(``tests/support/chat_reference.py``), rows and counts alike."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convhub import schema
from convhub.engine.writers.arrow_rows import rows_table
from convhub.views.chat import (
    EMPTY_LEFT_OUT,
    LATE_SYSTEM,
    NO_ASSISTANT,
    OPENS_WITH_ASSISTANT,
    PYTHON_WHITESPACE,
    SAME_ROLE_MERGED,
    turn_content,
)
from convhub.views.definitions import messages_of_records
from convhub.views.messages import messages_table
from tests.support.chat_reference import chat_messages


def record(
    source: str, speakers: list[str], sessions: list[tuple[str | None, list[tuple]]], number=0
) -> dict:
    """A canonical record of ``source`` with one session per (date_time, turns); a turn is (speaker, role, text)
    or (speaker, role, text, captions) for one that shared images."""
    built = []
    for index, (date_time, turns) in enumerate(sessions):
        session_turns = []
        for position, (speaker, role, text, *captions) in enumerate(turns):
            turn = schema.empty_turn(f"t{position}", speaker, role, text)
            turn["images"] = [
                {"url": None, "caption": caption, "query": None} for caption in (captions or [[]])[0]
            ]
            session_turns.append(turn)
        session = schema.empty_session(f"s{index}", session_turns)
        session["date_time"] = date_time
        built.append(session)
    return {
        "conversation_id": f"{source}/{number}",
        "source": source,
        "subset": source,
        "language": None,
        "speakers": speakers,
        "sessions": built,
        "questions": [],
        "extra": None,
    }


def one_session(source, speakers, date_time, turns, notes):
    """The messages of a one-session record, or None when the session has no ``messages`` row."""
    rows = list(messages_of_records([record(source, speakers, [(date_time, turns)])], notes))
    assert len(rows) <= 1
    return rows[0]["messages"] if rows else None


def expected_rows(records: list[dict], notes: Counter) -> list[dict]:
    """What the Python rules made of ``records``: the rows of every session they keep, in order."""
    rows = []
    for conversation in records:
        for index, session in enumerate(conversation["sessions"]):
            if not session["turns"]:
                continue
            turns = [
                (
                    turn["speaker"],
                    turn["role"],
                    turn_content(turn["text"], [image["caption"] for image in turn["images"]]),
                )
                for turn in session["turns"]
            ]
            chat = chat_messages(
                conversation["source"], conversation["speakers"], session["date_time"], turns, notes
            )
            if chat is not None:
                ids = {name: conversation[name] for name in schema.CONVERSATION_IDS}
                rows.append(
                    {**ids, "session_id": session["session_id"], "session_index": index, "messages": chat}
                )
    return rows


def test_turns_of_one_role_merge_and_empty_turns_are_left_out_and_counted():
    notes = Counter()
    turns = [
        ("u", "user", "hi"),
        ("u", "user", "there"),
        ("a", "assistant", " \x1c\u3000"),
        ("a", "assistant", "hello"),
    ]
    assert one_session("x", ["u", "a"], None, turns, notes) == [
        {"role": "user", "content": "hi\nthere"},
        {"role": "assistant", "content": "hello"},
    ]
    assert notes == {SAME_ROLE_MERGED: 1, EMPTY_LEFT_OUT: 1}


def test_a_session_no_template_takes_has_no_row_and_is_counted_by_why():
    cases = {
        OPENS_WITH_ASSISTANT: [("a", "assistant", "hello"), ("u", "user", "hi")],
        NO_ASSISTANT: [("u", "user", "hi")],
        LATE_SYSTEM: [("u", "user", "hi"), ("s", "system", "note"), ("a", "assistant", "ok")],
    }
    for reason, session in cases.items():
        notes = Counter()
        assert one_session("x", ["u", "a"], None, session, notes) is None
        assert notes == {reason: 1}
    system_first = [
        ("s", "system", "be"),
        ("s", "system", "brief"),
        ("u", "user", "hi"),
        ("a", "assistant", "ok"),
    ]
    assert one_session("x", [], None, system_first, Counter()) == [
        {"role": "system", "content": "be\nbrief"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "ok"},
    ]


def test_peer_sessions_make_the_opener_the_user_and_name_both_in_a_system_message():
    turns = [("Bo", "assistant", "hey"), ("Al", "user", "yo"), ("Bo", "assistant", "news?")]
    assert one_session("locomo", ["Al", "Bo"], "1:56 pm on 8 May, 2023", turns, Counter()) == [
        {
            "role": "system",
            "content": "A conversation between Bo (user) and Al (assistant), 1:56 pm on 8 May, 2023.",
        },
        {"role": "user", "content": "hey"},
        {"role": "assistant", "content": "yo"},
        {"role": "user", "content": "news?"},
    ]


def test_a_turn_that_shared_images_names_them_in_its_content():
    turns = [("u", "user", "Look!", ["a photo of a dog", None]), ("a", "assistant", "Nice")]
    assert one_session("x", [], None, turns, Counter())[0]["content"] == (
        "Look! and shared a photo of a dog. and shared an image."
    )


def test_python_whitespace_is_what_str_isspace_takes():
    assert set(PYTHON_WHITESPACE) == {chr(code) for code in range(0x110000) if chr(code).isspace()}


ROLES = st.sampled_from(["user", "assistant", "system", "tool"])
SPEAKERS = st.sampled_from(["Al", "Bo", "Cy"])
TEXTS = st.one_of(
    st.sampled_from(["", " ", "\x1c", "\u3000\n", "hi", "ok ", "\u200b"]),
    st.text(alphabet=st.sampled_from([*PYTHON_WHITESPACE, "a", "é", "\u200b", "\n"]), max_size=4),
)
TURN = st.one_of(
    st.tuples(SPEAKERS, ROLES, TEXTS),
    st.tuples(
        SPEAKERS, ROLES, TEXTS, st.lists(st.one_of(st.none(), st.just("a cat")), min_size=1, max_size=2)
    ),
)
SESSION = st.tuples(st.one_of(st.none(), st.just("8 May, 2023")), st.lists(TURN, max_size=6))
RECORD = st.tuples(
    st.sampled_from(["locomo", "mnbvc"]),
    st.lists(SPEAKERS, max_size=2, unique=True),
    st.lists(SESSION, max_size=4),
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.lists(RECORD, min_size=1, max_size=4))
def test_random_batches_give_the_python_rules_rows_and_counts(specs):
    records = [
        record(source, speakers, sessions, number)
        for number, (source, speakers, sessions) in enumerate(specs)
    ]
    expected_notes, notes = Counter(), Counter()
    expected = expected_rows(records, expected_notes)
    table = rows_of_batches(records, notes)
    assert table.to_pylist() == expected
    assert table.schema == schema.MESSAGES_FEATURES.arrow_schema.remove_metadata()
    assert notes == expected_notes


def rows_of_batches(records: list[dict], notes: Counter) -> pa.Table:
    """``messages_table`` of the records as sessions batches of two rows, cut from one table as a build cuts its
    row groups (so each batch's lists start at an offset), the tables joined in order."""
    sessions = rows_table(records, schema.SESSIONS_FEATURES.arrow_schema).combine_chunks()
    return pa.concat_tables([messages_table(batch, notes) for batch in sessions.to_batches(max_chunksize=2)])
