"""GigaMemory: the real public sample (../shared/data) and the packaged sample, built and rebuilt line for line."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest
from conftest import shared_data
from convhub.build import build_source
from convhub.gigamemory import parse
from convhub.gigamemory.builder import GigamemoryBuilder
from gigamemory_fixtures import (
    assert_round_trip,
    rebuild_lines,
    source_lines,
)

REAL_COUNTS = {"conversations": 4, "questions": 4, "sessions": 149, "messages": 1900}


# -- the real public sample -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_build(tmp_path_factory):
    folder = shared_data("gigamemory")
    return build_source(
        "gigamemory", tmp_path_factory.mktemp("real") / "gigamemory-unified", data_dir=str(folder)
    )


def test_real_sample_counts(real_build):
    output = str(real_build.output)
    sessions = datasets.load_dataset(output, "sessions", split="test")
    qa = datasets.load_dataset(output, "qa", split="test")
    messages = datasets.load_dataset(output, "messages", split="test")
    turns = datasets.load_dataset(output, "turns", split="test")
    assert sessions.num_rows == REAL_COUNTS["conversations"]
    assert qa.num_rows == REAL_COUNTS["questions"]
    assert sum(len(row) for row in sessions["sessions"]) == REAL_COUNTS["sessions"]
    assert messages.num_rows == REAL_COUNTS["sessions"]
    assert sum(len(row) for row in messages["messages"]) == REAL_COUNTS["messages"]
    assert turns.num_rows == REAL_COUNTS["messages"]
    assert sorted(qa["category"]) == sorted(parse.QUESTION_TYPES)
    assert set(sessions["subset"]) == {"format_example"} and set(sessions["language"]) == {"ru"}
    assert real_build.notes == {"no_info question that still lists answer sessions (kept)": 1}


def test_real_sample_rebuilds_every_line_byte_for_byte(real_build):
    """The public file is json.dumps(ensure_ascii=False) per line: the rebuild must equal each raw line."""
    path = shared_data("gigamemory", "format_example.jsonl")
    records = datasets.load_dataset(str(real_build.output), "sessions", split="test")
    rebuilt = rebuild_lines(records)
    raw = source_lines(path)
    assert len(rebuilt) == len(raw) == 4
    for key, text in raw.items():
        assert json.dumps(rebuilt[key], ensure_ascii=False) == text
    first = json.loads(raw[("format_example.jsonl", 1)])
    row = datasets.load_dataset(str(real_build.output), "qa", split="test")[0]
    assert row["question_id"] == str(first["id"]) and json.loads(row["extra"])["id"] == first["id"]
    assert row["evidence_session_ids"] == [str(value) for value in first["ans_session_ids"]]


def test_real_sample_card(real_build):
    card = (real_build.output / "README.md").read_text(encoding="utf-8")
    assert "language:\n- ru" in card and "license: unknown" in card
    for question_type in parse.QUESTION_TYPES:
        assert f"| `{question_type}` |" in card
    assert "| test | format_example | 4 | 149 | 1,900 | 4 |" in card
    assert "https://github.com/ai-forever/memory_aij2025" in card


# -- the packaged sample ----------------------------------------------------------------------------


def test_packaged_sample_groups_shared_dialogues_and_round_trips(sample_builds):
    result = sample_builds["gigamemory"]
    records = datasets.load_dataset(str(result.output), "sessions", split="test")
    by_subset = {}
    for record in records:
        by_subset.setdefault(record["subset"], []).append(record)
    assert {subset: [len(r["questions"]) for r in rows] for subset, rows in by_subset.items()} == {
        "dialogues": [2, 2],
        "string_ids": [2],
    }
    assert datasets.load_dataset(str(result.output), "qa", split="test").num_rows == 6
    sample = Path(GigamemoryBuilder.sample_dir())
    assert_round_trip(records, sorted(sample.iterdir()))


def test_packaged_sample_keeps_odd_role_orders_in_turns_and_counts_what_messages_leaves_out(sample_builds):
    result = sample_builds["gigamemory"]
    turns = datasets.load_dataset(str(result.output), "turns", split="test")
    openers = {
        (row["conversation_id"], row["session_id"]): row["role"] for row in turns if row["turn_index"] == 0
    }
    opening_with_assistant = list(openers.values()).count("assistant")
    assert opening_with_assistant == 2  # the sample's sessions that open with the assistant
    messages = datasets.load_dataset(str(result.output), "messages", split="test")
    roles = [[message["role"] for message in row["messages"]] for row in messages]
    assert ["user", "assistant", "user"] in roles  # ending on the user is a valid chat
    assert all(row[0] == "user" for row in roles)
    assert messages.num_rows == len(openers) - opening_with_assistant  # one per session, but those
    assert result.notes["messages: session left out: opens with the assistant"] == opening_with_assistant


def test_packaged_sample_string_ids_stay_strings(sample_builds):
    qa = datasets.load_dataset(str(sample_builds["gigamemory"].output), "qa", split="test")
    string_rows = [row for row in qa if row["subset"] == "string_ids"]
    assert [row["question_id"] for row in string_rows] == ["q-1", "q-2"]
    assert string_rows[0]["evidence_session_ids"] == ["session_id2"]
    assert json.loads(string_rows[0]["extra"])["key_order"][2:4] == [
        "question_type",
        "ans",
    ]  # the format document's order
    int_rows = [row for row in qa if row["subset"] == "dialogues"]
    assert [json.loads(row["extra"])["id"] for row in int_rows] == [1, 2, 3, 4]
    assert [json.loads(row["extra"])["ans_session_ids"] for row in int_rows] == [[1], [2, 3], [1, 2], [2]]
