"""BEAM's repository layout on the packaged sample: every quirk where it lands, loaded back, exported exactly
(byte for byte here: the sample's JSON is written as BEAM writes it, ``indent=4``), errors in one line."""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path

import datasets
import pytest

from convhub.builders.beam.builder import BeamBuilder
from convhub.engine.build import build_source
from convhub.errors import SourceError
from convhub.export.exporter import export_source

SAMPLE = Path(BeamBuilder.sample_dir())
CHAT = SAMPLE / "chats" / "100K" / "1"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build_source("beam", tmp_path_factory.mktemp("beam") / "build", str(SAMPLE), num_proc=1)


@pytest.fixture(scope="module")
def sessions(built) -> dict[str, dict]:
    rows = datasets.load_dataset(str(built.output), "sessions", split="test")
    return {row["conversation_id"]: row for row in rows}


@pytest.fixture(scope="module")
def qa(built) -> dict[str, dict]:
    rows = datasets.load_dataset(str(built.output), "qa", split="test")
    return {row["question_id"]: row for row in rows}


def test_one_conversation_per_chat_and_per_10m_plan_the_scale_its_subset(sessions):
    assert {cid: row["subset"] for cid, row in sessions.items()} == {
        "100K/1": "100K",
        "10M/1": "10M",
        "10M/1/plan-0": "10M",
    }
    assert sessions["100K/1"]["speakers"] == ["user", "assistant"]
    assert sessions["10M/1"]["sessions"] == []  # the folder has questions and files, no chat.json


def test_batches_are_sessions_dated_by_their_anchor_or_their_first_message(sessions):
    batches = sessions["100K/1"]["sessions"]
    assert [(s["session_id"], s["date_time"], s["timestamp"]) for s in batches] == [
        ("batch-1", "March-15-2024", datetime(2024, 3, 15)),  # time_anchor null: its first message's
        ("batch-2", "April-02-2024", datetime(2024, 4, 2)),
        ("batch-3", "sometime in May", None),  # no batch anchor, a message's that is not a date
    ]
    assert [json.loads(s["extra"]) for s in batches] == [
        {"batch": {"batch_number": 1, "time_anchor": None}, "turns_position": 1, "exchange_sizes": [2, 4]},
        {
            "batch": {"batch_number": 2, "time_anchor": "April-02-2024"},
            "turns_position": 2,
            "exchange_sizes": [2, 2],
        },
        {"batch": {"batch_number": 3}, "turns_position": 1, "exchange_sizes": [2]},
    ]


def test_every_message_is_a_turn_named_by_its_id_its_text_untouched(sessions):
    raw = json.loads((CHAT / "chat.json").read_text(encoding="utf-8"))
    messages = [m for batch in raw for exchange in batch["turns"] for m in exchange]
    turns = [t for s in sessions["100K/1"]["sessions"] for t in s["turns"]]
    assert [t["turn_id"] for t in turns] == [str(m["id"]) for m in messages]
    assert [t["text"] for t in turns] == [m["content"] for m in messages]  # markers, spaces, "" kept
    assert turns[0]["text"].endswith("start?  ->-> 1,1") and turns[3]["text"] == "Yes, SQLite 3.39 is fine.  "
    assert [(t["speaker"], t["role"]) for t in turns[:2]] == [("user", "user"), ("assistant", "assistant")]
    assert json.loads(turns[0]["extra"]) == {
        "time_anchor": "March-15-2024",
        "index": "1,1",
        "question_type": "main_question",
    }
    assert turns[1]["extra"] is None
    extra = json.loads(sessions["100K/1"]["extra"])
    assert extra["message_key_orders"] == {"6": ["content", "role", "id", "index"]}


def test_every_other_file_of_the_chat_is_in_the_conversation(sessions):
    extra = json.loads(sessions["100K/1"]["extra"])
    assert extra["layout"] == "repository"
    assert extra["parsed_files"] == ["chat.json", "probing_questions/probing_questions.json"]
    assert sorted(extra["files"]) == [
        "chat_trunecated.json",
        "labels.txt",
        "main_spec.txt",
        "plan.txt",
        "plan_new.txt",
        "relationships.txt",
        "topic.json",
        "user_messages.json",
        "user_messages.txt",
    ]
    assert extra["files"]["topic.json"] == json.loads((CHAT / "topic.json").read_text(encoding="utf-8"))
    assert extra["files"]["main_spec.txt"] == (CHAT / "main_spec.txt").read_bytes().decode()  # CRLF kept
    assert "\r\n" in extra["files"]["main_spec.txt"]
    assert sorted(extra["binary_files"]) == ["notes.bin", "plan_new.pickle"]  # never unpickled
    plan = json.loads(sessions["10M/1/plan-0"]["extra"])
    assert sorted(plan["files"]) == ["labels.txt", "new_relationships.json", "topic.json"]


def test_each_probing_question_is_a_qa_row_with_the_contract_score_beam_reads(qa):
    questions = json.loads(
        (CHAT / "probing_questions" / "probing_questions.json").read_text(encoding="utf-8")
    )
    ours = {qid: row for qid, row in qa.items() if qid.startswith("100K/1:")}
    expected = [(a, i, q) for a, listed in questions.items() for i, q in enumerate(listed)]
    assert [row["question_id"] for row in ours.values()] == [f"100K/1:{a}:{i}" for a, i, _ in expected]
    for (ability, position, question), row in zip(expected, ours.values(), strict=True):
        extra = row["extra"]
        assert json.dumps(json.loads(extra)) == json.dumps(
            {"probing_question": question, "ability": ability, "position": position}
        )  # every key, in order, and every number's type
        assert (row["category"], row["question"], row["rubric"]) == (
            ability,
            question["question"],
            question["rubric"],
        )


def test_the_answer_is_the_reference_whatever_its_key(qa):
    answers = {qid.split(":", 1)[1]: row["answer"] for qid, row in qa.items() if qid.startswith("100K/1:")}
    assert answers["abstention:0"].startswith("Based on the provided chat")  # ideal_response
    assert answers["contradiction_resolution:0"] == "You said SQLite first, then PostgreSQL."  # ideal_answer
    assert answers["preference_following:0"] == "A café-style font."  # expected_compliance
    assert answers["summarization:0"].startswith("A Flask garden app")  # ideal_summary
    assert answers["information_extraction:1"] == '["March 15, 2024"]'  # a list, as JSON text


def test_evidence_keeps_the_structure_of_source_chat_ids(qa, built):
    def evidence(name):
        row = qa[f"100K/1:{name}"]
        return row["evidence_turn_ids"], row["evidence_labels"], row["unresolved_evidence"]

    assert evidence("contradiction_resolution:0") == (["2", "6"], ["first_statement", "second_statement"], [])
    assert evidence("knowledge_update:0") == (["2", "6"], ["original_info", "updated_info"], [])
    assert evidence("temporal_reasoning:0") == (["0", "6"], ["user", "user"], [])  # an empty role list too
    assert evidence("event_ordering:0") == (["0", "2", "2", "4"], [], [])  # a repeat kept
    assert evidence("information_extraction:0") == ([], [], [])  # no source_chat_ids at all
    assert evidence("information_extraction:1") == (["0"], [], ["99"])  # an id naming no message
    assert built.notes["probing question without source_chat_ids"] == 2
    assert built.notes["source_chat_ids naming no message (in unresolved_evidence)"] == 2  # 99, and 10M's


def test_the_card_lists_abilities_the_license_and_what_share_alike_obliges(built):
    card = (built.output / "README.md").read_text(encoding="utf-8")
    assert "license: cc-by-sa-4.0" in card
    assert "| `contradiction_resolution` | 1 |" in card and "| `instruction_following` | 0 |" in card
    assert "license your adaptation under CC BY-SA 4.0" in card and "tavakoli2025beyond" in card


def test_one_messages_row_per_batch(built):
    """(The strict chat template is checked on every source's sample and real files in tests/views/test_messages.py.)"""
    rows = datasets.load_dataset(str(built.output), "messages", split="test")
    assert rows["session_id"] == ["batch-1", "batch-1", "batch-2", "batch-3"]  # 10M/1's plan, then 100K/1's
    assert rows[2]["messages"] == [
        {"role": "user", "content": "I switched to PostgreSQL 15 instead. ->-> 2,1"},
        {"role": "assistant", "content": "Then update the connection string."},
        {"role": "user", "content": "What did I pick first? ->-> 2,2"},
    ]  # the empty reply left out, the session ending on the user


def test_the_export_gives_the_folders_back_byte_for_byte(built, tmp_path):
    export_source("beam", built.output, tmp_path / "export")
    given = sorted(p.relative_to(SAMPLE) for p in SAMPLE.rglob("*") if p.is_file())
    out = tmp_path / "export"
    made = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file() and ".convhub" not in p.parts)
    assert made == given
    assert all((SAMPLE / p).read_bytes() == (out / p).read_bytes() for p in given)


@pytest.mark.parametrize(
    ("edit", "field", "problem"),
    [
        (lambda c: c[0]["turns"][1][0].update(id=1), "chat[0].turns[1][0].id", "earlier message too"),
        (lambda c: c[1]["turns"][0][0].update(role="system"), "chat[1].turns[0][0].role", "got 'system'"),
        (lambda c: c[2].pop("batch_number"), "chat[2].batch_number", "expected an integer"),
    ],
)
def test_a_bad_chat_is_one_line_naming_folder_chat_and_field(tmp_path, edit, field, problem):
    data = tmp_path / "chats" / "100K"
    shutil.copytree(CHAT, data / "1")
    chat = json.loads((data / "1" / "chat.json").read_text(encoding="utf-8"))
    edit(chat)
    (data / "1" / "chat.json").write_text(json.dumps(chat), encoding="utf-8")
    with pytest.raises(SourceError) as raised:
        build_source("beam", tmp_path / "out", str(data), configs=["sessions"], num_proc=1)
    assert str(raised.value) == f"{data / '1'}, record 100K/1, field {field!r}: {raised.value.problem}"
    assert problem in str(raised.value) and "\n" not in str(raised.value)
    assert not (tmp_path / "out").exists()  # no partial output


def test_a_json_file_that_does_not_parse_is_named(tmp_path):
    shutil.copytree(CHAT, tmp_path / "100K" / "1")
    (tmp_path / "100K" / "1" / "topic.json").write_text("{oops", encoding="utf-8")
    with pytest.raises(SourceError, match=r"record 100K/1, field 'topic.json': not JSON"):
        build_source("beam", tmp_path / "out", str(tmp_path / "100K"), configs=["sessions"], num_proc=1)


def test_the_subset_option_keeps_scales_and_names_the_others(tmp_path):
    result = build_source("beam", tmp_path / "out", str(SAMPLE), ["sessions"], 1, subsets=["10M"])
    rows = datasets.Dataset.from_parquet(str(result.output / "sessions" / "*.parquet"))
    assert sorted(rows["conversation_id"]) == ["10M/1", "10M/1/plan-0"]
    with pytest.raises(KeyError, match="beam has no subset 1M; subsets: 10M, 100K"):
        build_source("beam", tmp_path / "none", str(SAMPLE), ["sessions"], 1, subsets=["1M"])


def test_with_skip_a_bad_chat_is_quarantined_whole_and_the_others_built(tmp_path):
    """A chat is one record of the reader (``layout.ChatFiles``): a file of it that does not parse costs that chat
    only, quarantined by folder, chat id and file, its files' bytes kept in the entry."""
    data = tmp_path / "in" / "chats" / "100K"
    shutil.copytree(CHAT, data / "1")
    shutil.copytree(CHAT, data / "2")
    (data / "2" / "topic.json").write_text("{oops", encoding="utf-8")
    result = build_source(
        "beam", tmp_path / "out", str(tmp_path / "in"), configs=["sessions"], num_proc=1, on_bad_record="skip"
    )
    rows = datasets.Dataset.from_parquet(str(result.output / "sessions" / "*.parquet"))
    assert rows["conversation_id"] == ["100K/1"] and result.skipped == 1
    [entry] = [json.loads(line) for line in result.quarantine.read_text(encoding="utf-8").splitlines()]
    assert (entry["file"], entry["record"], entry["field"]) == (str(data / "2"), "100K/2", "topic.json")
    assert entry["reason"].startswith("not JSON") and "{oops" in entry["raw"]


def test_a_chat_id_read_twice_is_named_while_parsing(tmp_path):
    """Two Hub rows of one conversation_id: the reader's ``id`` is the source's ID_FIELD."""
    from tests.beam.beam_hub_files import hub_row, write_hub_file

    row = hub_row(CHAT)
    data = write_hub_file(tmp_path / "100K-0.parquet", [row, row])
    with pytest.raises(SourceError, match=r"record 100K/1, field 'id': duplicate id '100K/1'"):
        build_source("beam", tmp_path / "out", str(data), configs=["sessions"], num_proc=1)
    assert not (tmp_path / "out").exists()
