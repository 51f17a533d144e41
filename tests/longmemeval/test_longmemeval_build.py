"""LongMemEval on the packaged sample: every quirk where it lands, loaded back, exported exactly, errors named."""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path

import datasets
import pytest

from convhub.build import build_source
from convhub.builders.longmemeval import export, parse
from convhub.builders.longmemeval.builder import LongMemEvalBuilder
from convhub.errors import Notes, SourceError
from convhub.export.exporter import export_source

SAMPLE = Path(LongMemEvalBuilder.sample_dir())


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build_source("longmemeval", tmp_path_factory.mktemp("lme") / "build", str(SAMPLE), num_proc=1)


@pytest.fixture(scope="module")
def sessions(built) -> dict[str, dict]:
    rows = datasets.load_dataset(str(built.output), "sessions", split="test")
    return {row["conversation_id"]: row for row in rows}


def test_one_conversation_per_question_named_by_subset_and_question_id(sessions):
    assert sorted(sessions) == [
        "longmemeval_oracle:0edc2aef",
        "longmemeval_oracle:a1b2c3d4",
        "longmemeval_oracle:gpt4_d84a3211",
        "longmemeval_s:7161e7e2_abs",
        "longmemeval_s:e47becba",
        "longmemeval_s:gpt4_d84a3211",
    ]
    row = sessions["longmemeval_s:e47becba"]
    assert (row["source"], row["subset"], row["language"], row["speakers"]) == (
        "longmemeval",
        "longmemeval_s",
        "en",
        ["user", "assistant"],
    )
    assert json.loads(row["extra"]) == {"file": "longmemeval_s"}
    assert json.loads(sessions["longmemeval_oracle:0edc2aef"]["extra"]) == {"file": "longmemeval_oracle.json"}


def test_sessions_are_dated_and_turns_named_as_longmemeval_retrieval_names_them(sessions):
    row = sessions["longmemeval_s:e47becba"]
    assert [s["session_id"] for s in row["sessions"]] == [
        "sharegpt_yywfIrx_0",
        "answer_280352e9",
        "ultrachat_414810",
    ]
    first = row["sessions"][0]
    assert (first["date_time"], first["timestamp"]) == (
        "2023/05/20 (Sat) 02:21",
        datetime(2023, 5, 20, 2, 21),
    )
    turns = row["sessions"][1]["turns"]
    assert [(t["turn_id"], t["speaker"], t["role"]) for t in turns] == [
        ("answer_280352e9_1", "user", "user"),
        ("answer_280352e9_2", "assistant", "assistant"),
        ("answer_280352e9_3", "user", "user"),
    ]
    assert turns[0]["text"].startswith("I graduated with a degree in Business Administration")
    assert [json.loads(t["extra"]) for t in turns] == [{"has_answer": v} for v in (True, False, False)]
    assert first["turns"][0]["extra"] is None  # a filler turn has no has_answer


def test_the_oracle_haystack_keeps_its_unsorted_order(sessions, built):
    stamps = [s["timestamp"] for s in sessions["longmemeval_oracle:gpt4_d84a3211"]["sessions"]]
    assert stamps == [datetime(2023, 6, 2, 19, 45), datetime(2023, 5, 22, 8, 15)]
    assert built.notes["haystack not sorted by date (kept in the file's order)"] == 1


def test_a_filler_session_recurs_in_two_haystacks(sessions):
    """Stored once per question: each sessions row holds its whole haystack, the recurring filler included."""
    holding = sorted(
        cid
        for cid, row in sessions.items()
        if "sharegpt_yywfIrx_0" in [s["session_id"] for s in row["sessions"]]
    )
    assert holding == ["longmemeval_s:e47becba", "longmemeval_s:gpt4_d84a3211"]
    first, second = (sessions[cid]["sessions"] for cid in holding)
    assert first[0]["turns"] == second[1]["turns"]


def test_questions_evidence_abstention_and_raw_answers(sessions, built):
    (degree,) = sessions["longmemeval_s:e47becba"]["questions"]
    assert (degree["question_id"], degree["category"], degree["category_id"]) == (
        "e47becba",
        "single-session-user",
        None,
    )
    assert degree["evidence_session_ids"] == ["answer_280352e9"]
    assert degree["evidence_turn_ids"] == ["answer_280352e9_1"]
    assert json.loads(degree["extra"]) == {"question_date": "2023/05/30 (Tue) 23:40", "abstention": False}
    (bikes,) = sessions["longmemeval_s:gpt4_d84a3211"]["questions"]
    assert bikes["answer"] == "3" and json.loads(bikes["extra"])["answer"] == 3  # the number, raw
    assert bikes["evidence_turn_ids"] == ["answer_b1a2c3d4_1_1", "answer_b1a2c3d4_2_1"]
    (guitar,) = sessions["longmemeval_s:7161e7e2_abs"]["questions"]
    assert json.loads(guitar["extra"])["abstention"] is True
    assert guitar["evidence_session_ids"] == ["answer_9f8e7d6c_abs"] and guitar["evidence_turn_ids"] == []
    assert built.notes["answer session with no has_answer turn (LongMemEval's retrieval: noans)"] == 1
    (poem,) = sessions["longmemeval_oracle:a1b2c3d4"]["questions"]
    assert poem["evidence_turn_ids"] == ["answer_sharegpt_Qm3xZ_0_2"]  # an assistant turn holds the evidence
    (dinner,) = sessions["longmemeval_oracle:0edc2aef"]["questions"]
    assert dinner["category"] == "single-session-preference" and dinner["answer"].startswith(
        "The user would prefer"
    )


def test_the_qa_config_has_one_row_per_question(built):
    rows = datasets.load_dataset(str(built.output), "qa", split="test")
    assert sorted(rows["question_id"]) == sorted(
        ["e47becba", "gpt4_d84a3211", "7161e7e2_abs", "gpt4_d84a3211", "0edc2aef", "a1b2c3d4"]
    )
    assert {json.loads(extra)["question_date"] for extra in rows["extra"]} >= {"2023/05/30 (Tue) 23:40"}


def test_export_gives_each_file_back_under_its_name_key_order_and_numbers_exact(built, tmp_path):
    result = export_source("longmemeval", built.output, tmp_path / "export")
    assert sorted(result.files) == ["longmemeval_oracle.json", "longmemeval_s"]
    for name in result.files:
        original = json.loads((SAMPLE / name).read_text(encoding="utf-8"))
        exported = json.loads((result.output / name).read_text(encoding="utf-8"))
        assert json.dumps(exported) == json.dumps(original)  # key order and int-vs-float included


def test_other_key_orders_and_unknown_keys_come_back_exactly():
    instance = {
        "question": "Q?",
        "question_id": "q1",
        "question_type": "knowledge-update",
        "answer": 2.5,
        "question_date": "2023/05/30 (Tue) 23:40",
        "haystack_dates": ["2023/05/20 (Sat) 02:21"],
        "haystack_session_ids": ["s1"],
        "haystack_sessions": [[{"content": "hi", "role": "user", "has_answer": True, "score": 1}]],
        "answer_session_ids": ["s1", "gone"],
        "source_note": {"x": [1, 2.0]},
    }
    record = parse.convert_instance(instance, Notes(), "sub", "sub.json")
    (question,) = record["questions"]
    assert question["unresolved_evidence"] == ["gone"] and question["evidence_session_ids"] == ["s1"]
    assert json.dumps(export.instance_from_record(record)) == json.dumps(instance)


@pytest.mark.parametrize(
    ("edit", "field", "problem"),
    [
        (
            lambda i: i["haystack_sessions"][0][1].update(role="bot"),
            "haystack_sessions[0][1].role",
            "got 'bot'",
        ),
        (lambda i: i["haystack_dates"].__setitem__(2, "May 25"), "haystack_dates[2]", "'May 25' is not"),
        (lambda i: i.pop("question_date"), "question_date", "missing"),
        (lambda i: i["haystack_dates"].pop(), "haystack_dates", "3 ids, 2 dates, 3 sessions"),
    ],
)
def test_a_bad_record_is_one_line_naming_file_record_and_field(tmp_path, edit, field, problem):
    data = tmp_path / "data"
    data.mkdir()
    instances = json.loads((SAMPLE / "longmemeval_s").read_text(encoding="utf-8"))
    edit(instances[1])
    (data / "longmemeval_s").write_text(json.dumps(instances), encoding="utf-8")
    with pytest.raises(SourceError) as raised:
        build_source("longmemeval", tmp_path / "out", str(data), configs=["sessions"], num_proc=1)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"{data / 'longmemeval_s'}, record 1, field {field!r}: ") and problem in message
    assert not (tmp_path / "out").exists()  # no partial output


def test_two_files_of_one_subset_and_the_subset_option(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(SAMPLE, data)
    shutil.copy(data / "longmemeval_s", data / "longmemeval_s.json")
    with pytest.raises(SourceError, match="same subset 'longmemeval_s' as"):
        build_source("longmemeval", tmp_path / "out", str(data), num_proc=1)
    (data / "longmemeval_s.json").unlink()
    (data / "notes.txt").write_text("not a LongMemEval file")
    only = build_source("longmemeval", tmp_path / "out", str(data), ["qa"], 1, subsets=["longmemeval_oracle"])
    assert only.configs["qa"].splits["test"].num_examples == 3
