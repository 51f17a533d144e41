"""LoCoMo: the parser's handling of every quirk in SOURCES.md, the build, the card and the command line.

Unit tests feed ``convhub.locomo.parse`` tiny hand-written samples; build tests use the packaged sample
(``builders/locomo/sample/locomo_sample.json``); tests on the real ``locomo10.json`` skip when
``../shared/data`` is absent.
"""

from __future__ import annotations

import copy
import gc
import json
import os
import subprocess
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path

import datasets
import pytest
import yaml
from convhub import cli
from convhub.build import build_source, check_source
from convhub.errors import Notes, SourceError
from convhub.export import LocalBuild
from convhub.jsonio import holds_lone_surrogate_escape, may_hold_long_integer
from convhub.locomo import parse, read
from convhub.locomo.builder import LocomoBuilder
from convhub.locomo.export import sample_from_record
from convhub.staging import MARKER
from huggingface_hub import DatasetCard

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = Path(LocomoBuilder.sample_dir()) / "locomo_sample.json"
ALL_CONFIGS = ["sessions", "turns", "qa", "messages", "observations", "events"]

REAL_COUNTS = {"conversations": 10, "sessions": 272, "turns": 5882, "questions": 1986}
REAL_CATEGORIES = {
    "multi-hop": 282,
    "temporal": 321,
    "open-domain": 96,
    "single-hop": 841,
    "adversarial": 446,
}
#: Measured on locomo10.json. SOURCES.md says 311 captions lack img_url: that counts turns whose only
#: extra key is blip_caption; 5 more have blip_caption and re-download, also without img_url (316).
REAL_NOTES = {
    "adversarial question without answer (answer null)": 444,
    "image caption or query without img_url (url null)": 316,
    "turn key 're-download' (undocumented) kept in the turn's extra": 206,
    "session date with no session body (kept in the conversation's extra)": 16,
    "int answer → string (raw kept in extra.answer)": 6,
    "observation evidence string holding several ids, split": 5,
    "QA evidence empty": 4,
    "QA evidence string holding several ids, split": 4,
    "QA evidence id rewritten (leading zero, stray colon or spaces)": 2,
    "QA evidence id that names no turn (moved to unresolved_evidence)": 2,
    "adversarial question with both answer and adversarial_answer (both kept)": 2,
    "QA evidence id repeated in one evidence list, deduplicated": 1,
    "QA evidence string with no turn id (kept in unresolved_evidence)": 1,
}


# -- tiny samples ------------------------------------------------------------------------------------------


def turn(dia_id: str, speaker: str, text: str, **optional) -> dict:
    return {"speaker": speaker, "dia_id": dia_id, "text": text, **optional}


def tiny_sample(sample_id: str = "conv-t1", **changes) -> dict:
    """A two-session LoCoMo sample in the file's own shape; ``changes`` replace top-level keys."""
    sample = {
        "qa": [{"question": "Where does Ana live?", "answer": "Porto", "evidence": ["D1:1"], "category": 4}],
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Bo",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [turn("D1:1", "Ana", "I live in Porto."), turn("D1:2", "Bo", "Nice!")],
            "session_2_date_time": "7:05 pm on 1 June, 2023",
            "session_2": [turn("D2:1", "Bo", "Any news?"), turn("D2:2", "Ana", "I got a dog.")],
        },
        "event_summary": {
            "events_session_1": {"Ana": ["Ana moves to Porto."], "Bo": [], "date": "8 May, 2023"},
            "events_session_2": {"Ana": ["Ana adopts a dog."], "Bo": [], "date": "1 June, 2023"},
        },
        "observation": {
            "session_1_observation": {"Ana": [["Ana lives in Porto.", "D1:1"]]},
            "session_2_observation": {"Ana": [["Ana has a dog.", ["D2:2"]]]},
        },
        "session_summary": {"session_1_summary": "Ana tells Bo about Porto.", "session_2_summary": "A dog."},
        "sample_id": sample_id,
    }
    sample.update(changes)
    return sample


def parse_tiny(sample: dict, notes: Notes | None = None) -> dict:
    return parse.parse_sample(sample, "tiny", notes if notes is not None else Notes(), path="tiny.json")


def question(qa: dict, turn_ids=("D1:1", "D1:2", "D2:1", "D2:2"), notes: Notes | None = None) -> dict:
    return parse.parse_question(
        qa, "conv-t1", 0, set(turn_ids), notes if notes is not None else Notes(), "t.json"
    )


def extra(value) -> object:
    return json.loads(value) if value is not None else None


# -- questions: answers and categories ---------------------------------------------------------------------


def test_integer_answer_becomes_a_string_and_the_raw_integer_is_kept():
    notes = Notes()
    parsed = question({"question": "When?", "answer": 2022, "evidence": ["D1:1"], "category": 2}, notes=notes)
    assert parsed["answer"] == "2022"
    assert extra(parsed["extra"]) == {"evidence": ["D1:1"], "answer": 2022}
    assert notes == {"int answer → string (raw kept in extra.answer)": 1}


def test_adversarial_question_without_answer_keeps_answer_null():
    notes = Notes()
    qa = {
        "question": "What did Bo name his dog?",
        "evidence": ["D2:2"],
        "category": 5,
        "adversarial_answer": "Rex",
    }
    parsed = question(qa, notes=notes)
    assert (parsed["answer"], parsed["adversarial_answer"]) == (None, "Rex")
    assert (parsed["category_id"], parsed["category"]) == (5, "adversarial")
    assert notes == {"adversarial question without answer (answer null)": 1}


def test_adversarial_question_with_both_answers_keeps_both():
    notes = Notes()
    qa = {
        "question": "Did Bo get a dog?",
        "adversarial_answer": "Yes",
        "answer": "No",
        "evidence": [],
        "category": 5,
    }
    parsed = question(qa, notes=notes)
    assert (parsed["answer"], parsed["adversarial_answer"]) == ("No", "Yes")
    assert notes["adversarial question with both answer and adversarial_answer (both kept)"] == 1


@pytest.mark.parametrize(
    ("category_id", "name"),
    [(1, "multi-hop"), (2, "temporal"), (3, "open-domain"), (4, "single-hop"), (5, "adversarial")],
)
def test_category_names_follow_locomo_evaluation_code(category_id, name):
    parsed = question({"question": "Q?", "answer": "A", "evidence": ["D1:1"], "category": category_id})
    assert (parsed["category_id"], parsed["category"]) == (category_id, name)


@pytest.mark.parametrize(
    ("category", "problem"), [(6, "unknown category 6"), (True, "expected int, got bool")]
)
def test_bad_category_names_file_question_and_field(category, problem):
    with pytest.raises(SourceError) as caught:
        question({"question": "Q?", "answer": "A", "evidence": [], "category": category})
    assert (caught.value.path, caught.value.record, caught.value.field) == (
        "t.json",
        "conv-t1 qa 0",
        "category",
    )
    assert problem in caught.value.problem


def test_repeated_question_gets_distinct_ids_and_both_are_kept():
    qa = {"question": "Where does Ana live?", "answer": "Porto", "evidence": ["D1:1"], "category": 4}
    record = parse_tiny(tiny_sample(qa=[qa, copy.deepcopy(qa)]))
    assert [q["question_id"] for q in record["questions"]] == ["conv-t1:qa0", "conv-t1:qa1"]
    assert [q["question"] for q in record["questions"]] == ["Where does Ana live?"] * 2


# -- evidence ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("evidence", "ids", "unreadable", "kind"),
    [
        (["D8:6; D9:17"], ["D8:6", "D9:17"], [], "QA evidence string holding several ids, split"),
        (["D9:1 D4:4 D4:6"], ["D9:1", "D4:4", "D4:6"], [], "QA evidence string holding several ids, split"),
        (["D30:05"], ["D30:5"], [], "QA evidence id rewritten (leading zero, stray colon or spaces)"),
        (["D:11:26"], ["D11:26"], [], "QA evidence id rewritten (leading zero, stray colon or spaces)"),
        (["D"], [], ["D"], "QA evidence string with no turn id (kept in unresolved_evidence)"),
        ([], [], [], "QA evidence empty"),
        (None, [], [], "QA evidence absent"),
        (
            ["D4:5", "D4:5", "D5:5"],
            ["D4:5", "D5:5"],
            [],
            "QA evidence id repeated in one evidence list, deduplicated",
        ),
        ("D4:17, D4:19", ["D4:17", "D4:19"], [], "QA evidence string holding several ids, split"),
        # Looks almost normalized, yet is rewritten (the fast path for normalized ids must not take them):
        (["D1:3\n"], ["D1:3"], [], "QA evidence id rewritten (leading zero, stray colon or spaces)"),
        (["D00:1"], ["D0:1"], [], "QA evidence id rewritten (leading zero, stray colon or spaces)"),
        (["D\u0661:\u0663"], ["D1:3"], [], "QA evidence id rewritten (leading zero, stray colon or spaces)"),
    ],
)
def test_evidence_strings_become_normalized_turn_ids(evidence, ids, unreadable, kind):
    notes = Notes()
    assert parse.parse_evidence(evidence, notes, "t.json", "conv-t1 qa 0") == (ids, unreadable)
    assert notes == {kind: 1}


def test_plain_evidence_is_not_counted_as_a_normalization():
    notes = Notes()
    assert parse.parse_evidence(["D1:3", "D2:1"], notes, "t.json", "q") == (["D1:3", "D2:1"], [])
    assert parse.parse_evidence(["D0:0", "D10:20"], notes, "t.json", "q") == (["D0:0", "D10:20"], [])
    assert notes == {}


def test_evidence_of_the_wrong_type_names_the_field():
    with pytest.raises(SourceError) as caught:
        parse.parse_evidence([3], Notes(), "t.json", "conv-t1 qa 2")
    assert (caught.value.record, caught.value.field) == ("conv-t1 qa 2", "evidence")


def test_evidence_naming_no_turn_is_counted_and_kept_apart():
    notes = Notes()
    qa = {"question": "Q?", "answer": "A", "evidence": ["D2:1", "D10:19", "D2:2; D4:36"], "category": 1}
    parsed = question(qa, notes=notes)
    assert parsed["evidence_turn_ids"] == ["D2:1", "D2:2"]
    assert parsed["evidence_session_ids"] == ["session_2"]
    assert extra(parsed["extra"]) == {"evidence": qa["evidence"]}
    assert parsed["unresolved_evidence"] == ["D10:19", "D4:36"]
    assert notes["QA evidence id that names no turn (moved to unresolved_evidence)"] == 2


def test_unreadable_evidence_is_kept_apart():
    parsed = question({"question": "Q?", "answer": "A", "evidence": ["D", "D1:2"], "category": 4})
    assert parsed["evidence_turn_ids"] == ["D1:2"]
    assert parsed["unresolved_evidence"] == ["D"]
    assert extra(parsed["extra"]) == {"evidence": ["D", "D1:2"]}


def test_evidence_session_ids_follow_evidence_order():
    parsed = question({"question": "Q?", "answer": "A", "evidence": ["D2:1", "D1:1", "D2:2"], "category": 1})
    assert parsed["evidence_session_ids"] == ["session_2", "session_1"]


# -- sessions, dates and speakers --------------------------------------------------------------------------


def test_session_dates_with_no_session_body_stay_in_the_conversation_extra():
    sample = tiny_sample()
    sample["conversation"]["session_3_date_time"] = "4:10 pm on 26 October, 2023"
    sample["conversation"]["session_4_date_time"] = "9:00 am on 2 November, 2023"
    notes = Notes()
    record = parse_tiny(sample, notes)
    assert [session["session_id"] for session in record["sessions"]] == ["session_1", "session_2"]
    assert extra(record["extra"]) == {
        "conversation": {
            "session_3_date_time": "4:10 pm on 26 October, 2023",
            "session_4_date_time": "9:00 am on 2 November, 2023",
        }
    }
    assert notes["session date with no session body (kept in the conversation's extra)"] == 2


def test_session_fields_dates_summaries_and_raw_side_tables():
    record = parse_tiny(tiny_sample())
    first = record["sessions"][0]
    assert first["date_time"] == "1:56 pm on 8 May, 2023"
    assert first["timestamp"] == datetime(2023, 5, 8, 13, 56)
    assert first["summary"] == "Ana tells Bo about Porto."
    assert extra(first["extra"]) == {
        "event_summary": {"Ana": ["Ana moves to Porto."], "Bo": [], "date": "8 May, 2023"},
        "observation": {"Ana": [["Ana lives in Porto.", "D1:1"]]},
    }
    assert record["extra"] is None  # nothing left over


def test_sessions_are_ordered_by_number_not_by_key_text():
    sample = tiny_sample()
    conversation = sample["conversation"]
    conversation["session_10_date_time"] = "1:00 pm on 1 July, 2023"
    conversation["session_10"] = [turn("D10:1", "Ana", "Ten.")]
    record = parse_tiny(sample)
    assert [session["session_id"] for session in record["sessions"]] == [
        "session_1",
        "session_2",
        "session_10",
    ]


def test_session_without_date_records_it():
    sample = tiny_sample()
    del sample["conversation"]["session_2_date_time"]
    notes = Notes()
    session = parse_tiny(sample, notes)["sessions"][1]
    assert (session["date_time"], session["timestamp"]) == (None, None)
    assert extra(session["extra"])["has_date_time"] is False
    assert notes["session without date_time"] == 1


def test_unreadable_date_keeps_the_string_and_leaves_timestamp_null():
    sample = tiny_sample()
    sample["conversation"]["session_1_date_time"] = "sometime in spring"
    notes = Notes()
    session = parse_tiny(sample, notes)["sessions"][0]
    assert (session["date_time"], session["timestamp"]) == ("sometime in spring", None)
    assert notes["session date_time that is not a date (timestamp left null)"] == 1


def test_speaker_a_is_user_and_speaker_b_is_assistant():
    record = parse_tiny(tiny_sample())
    assert record["speakers"] == ["Ana", "Bo"]
    turns = record["sessions"][0]["turns"] + record["sessions"][1]["turns"]
    assert [(t["speaker"], t["role"]) for t in turns] == [
        ("Ana", "user"),
        ("Bo", "assistant"),
        ("Bo", "assistant"),
        ("Ana", "user"),
    ]


def test_side_table_entries_naming_no_session_and_unknown_keys_are_kept():
    sample = tiny_sample(note="hand-checked")
    sample["session_summary"]["session_9_summary"] = "A session that is not in the conversation."
    notes = Notes()
    record = parse_tiny(sample, notes)
    assert extra(record["extra"]) == {
        "note": "hand-checked",
        "session_summary": {"session_9_summary": "A session that is not in the conversation."},
    }
    assert notes["session_summary entry naming no session (kept in the conversation's extra)"] == 1


def test_absent_side_table_is_recorded_as_absent():
    sample = tiny_sample()
    del sample["event_summary"]
    record = parse_tiny(sample)
    assert extra(record["extra"]) == {"event_summary": None}
    assert all("event_summary" not in (extra(session["extra"]) or {}) for session in record["sessions"])


# -- images ------------------------------------------------------------------------------------------------


def images_of(**optional) -> tuple[dict, Notes]:
    notes = Notes()
    roles = {"Ana": "user", "Bo": "assistant"}
    parsed = parse.parse_turn(
        turn("D1:3", "Ana", "Look!", **optional), roles, notes, "t.json", "conv-t1", "s1", 2
    )
    return parsed, notes


def test_image_url_caption_and_query_go_into_images_and_text_stays_the_speakers():
    parsed, notes = images_of(img_url=["https://x/a.jpg"], blip_caption="a photo of a dog", query="dog")
    assert parsed["images"] == [{"url": "https://x/a.jpg", "caption": "a photo of a dog", "query": "dog"}]
    assert parsed["text"] == "Look!"
    assert parsed["extra"] is None
    assert notes == {}


def test_caption_without_img_url_is_one_image_with_null_url():
    parsed, notes = images_of(blip_caption="a photo of a cat")
    assert parsed["images"] == [{"url": None, "caption": "a photo of a cat", "query": None}]
    assert notes == {"image caption or query without img_url (url null)": 1}


def test_re_download_flag_stays_in_the_turn_extra():
    parsed, notes = images_of(img_url=["https://x/b.jpg"], **{"re-download": True}, blip_caption="a photo")
    assert parsed["images"] == [{"url": "https://x/b.jpg", "caption": "a photo", "query": None}]
    assert extra(parsed["extra"]) == {"re-download": True}
    assert notes == {"turn key 're-download' (undocumented) kept in the turn's extra": 1}


def test_caption_and_re_download_without_img_url():
    parsed, notes = images_of(blip_caption="a photo of a fish toy", **{"re-download": True})
    assert parsed["images"] == [{"url": None, "caption": "a photo of a fish toy", "query": None}]
    assert extra(parsed["extra"]) == {"re-download": True}
    assert sum(notes.values()) == 2


def test_several_urls_give_several_images_and_an_empty_url_list_is_kept():
    parsed, _ = images_of(img_url=["https://x/1.jpg", "https://x/2.jpg"], blip_caption="two photos")
    assert [image["url"] for image in parsed["images"]] == ["https://x/1.jpg", "https://x/2.jpg"]
    parsed, _ = images_of(img_url=[])
    assert (parsed["images"], extra(parsed["extra"])) == ([], {"img_url": []})


def test_bad_img_url_names_turn_and_field():
    with pytest.raises(SourceError) as caught:
        images_of(img_url="https://x/a.jpg")
    assert (caught.value.record, caught.value.field) == ("conv-t1 s1 turn 2", "img_url")


# -- observations and events -------------------------------------------------------------------------------


def test_observation_evidence_as_list_string_and_comma_joined_string():
    entry = {
        "Ana": [["Ana has a dog.", ["D2:2", "D2:1"]], ["Ana lives in Porto.", "D1:1"]],
        "Bo": [["Bo asks for news.", "D2:1, D1:2"]],
    }
    notes = Notes()
    rows = parse.parse_observations(
        entry, {"D1:1", "D1:2", "D2:1", "D2:2"}, notes, "t.json", "conv-t1", "obs"
    )
    assert [(r["speaker"], r["position"], r["evidence_turn_ids"], r["evidence"]) for r in rows] == [
        ("Ana", 0, ["D2:2", "D2:1"], ["D2:2", "D2:1"]),
        ("Ana", 1, ["D1:1"], "D1:1"),
        ("Bo", 0, ["D2:1", "D1:2"], "D2:1, D1:2"),
    ]
    assert notes == {"observation evidence string holding several ids, split": 1}


def test_observation_evidence_naming_no_turn_is_counted():
    notes = Notes()
    rows = parse.parse_observations(
        {"Ana": [["x", "D1:1, D7:7"]]}, {"D1:1"}, notes, "t.json", "conv-t1", "obs"
    )
    assert rows[0]["evidence_turn_ids"] == ["D1:1"]
    assert rows[0]["evidence"] == "D1:1, D7:7"
    assert notes["observation evidence id that names no turn (raw evidence kept)"] == 1


def test_observation_evidence_with_no_id_is_counted_and_kept_raw():
    notes = Notes()
    rows = parse.parse_observations(
        {"Bo": [["x", ["D", "D1:1"]]]}, {"D1:1"}, notes, "t.json", "conv-t1", "obs"
    )
    assert (rows[0]["evidence_turn_ids"], rows[0]["evidence"]) == (["D1:1"], ["D", "D1:1"])
    assert notes == {"observation evidence string with no turn id (kept in the raw evidence)": 1}


@pytest.mark.parametrize(
    ("observation", "field"),
    [
        ({"session_1_observation": ["not", "a dict"]}, "observation.session_1_observation"),
        ({"session_1_observation": {"Ana": "Ana lives in Porto."}}, "observation.session_1_observation.Ana"),
        ({"session_1_observation": {"Ana": [["only text"]]}}, "observation.session_1_observation.Ana[0]"),
        ({"session_1_observation": {"Ana": [["text", 11]]}}, "observation.session_1_observation.Ana[0]"),
        ({"session_1_observation": {"Ana": [[7, "D1:1"]]}}, "observation.session_1_observation.Ana[0]"),
        ([], "observation"),
    ],
)
def test_malformed_observation_names_the_field(observation, field):
    with pytest.raises(SourceError) as caught:
        parse_tiny(tiny_sample(observation=observation))
    assert (caught.value.path, caught.value.record, caught.value.field) == ("tiny.json", "conv-t1", field)


@pytest.mark.parametrize(
    ("event_summary", "field"),
    [
        ({"events_session_1": "Ana moves."}, "event_summary.events_session_1"),
        ({"events_session_1": {"Ana": "Ana moves."}}, "event_summary.events_session_1.Ana"),
        ({"events_session_1": {"Ana": [], "date": 8}}, "event_summary.events_session_1.date"),
    ],
)
def test_malformed_event_summary_names_the_field(event_summary, field):
    with pytest.raises(SourceError) as caught:
        parse_tiny(tiny_sample(event_summary=event_summary))
    assert (caught.value.record, caught.value.field) == ("conv-t1", field)


def test_events_rows_carry_the_session_date():
    entry = {"Ana": ["Ana moves.", "Ana paints."], "Bo": ["Bo runs."], "date": "8 May, 2023"}
    assert parse.parse_events(entry, "t.json", "conv-t1", "ev") == [
        {"speaker": "Ana", "position": 0, "event": "Ana moves.", "date": "8 May, 2023"},
        {"speaker": "Ana", "position": 1, "event": "Ana paints.", "date": "8 May, 2023"},
        {"speaker": "Bo", "position": 0, "event": "Bo runs.", "date": "8 May, 2023"},
    ]


# -- bad input in the parser -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mutate", "record", "field"),
    [
        (lambda s: s.pop("sample_id"), 0, "sample_id"),
        (lambda s: s.update(sample_id=26), 0, "sample_id"),
        (lambda s: s.pop("qa"), "conv-t1", "qa"),
        (lambda s: s["conversation"].pop("speaker_b"), "conv-t1", "conversation.speaker_b"),
        (lambda s: s["conversation"].update(speaker_b="Ana"), "conv-t1", "conversation.speaker_b"),
        (lambda s: s["conversation"].update(session_2=None), "conv-t1", "conversation.session_2"),
        (
            lambda s: s["conversation"].update(session_1_date_time=20230508),
            "conv-t1",
            "conversation.session_1_date_time",
        ),
        (lambda s: s["conversation"]["session_1"][1].pop("text"), "conv-t1 session_1 turn 1", "text"),
        (
            lambda s: s["conversation"]["session_1"][1].update(speaker="Cy"),
            "conv-t1 session_1 turn 1",
            "speaker",
        ),
        (lambda s: s["qa"][0].update(answer=["Porto"]), "conv-t1 qa 0", "answer"),
        (
            lambda s: s["session_summary"].update(session_1_summary=None),
            "conv-t1",
            "session_summary.session_1_summary",
        ),
    ],
)
def test_bad_sample_names_record_and_field(mutate, record, field):
    sample = tiny_sample()
    mutate(sample)
    with pytest.raises(SourceError) as caught:
        parse_tiny(sample)
    assert (caught.value.path, caught.value.record, caught.value.field) == ("tiny.json", record, field)


# -- the packaged sample -----------------------------------------------------------------------------------


def test_sample_exercises_every_quirk():
    notes, statistics = check_source("locomo", str(SAMPLE))
    total = statistics.total()
    assert (total.conversations, total.sessions, total.turns, total.questions) == (2, 3, 13, 13)
    assert notes == {
        "turn key 're-download' (undocumented) kept in the turn's extra": 3,
        "QA evidence id rewritten (leading zero, stray colon or spaces)": 2,
        "QA evidence string holding several ids, split": 2,
        "adversarial question without answer (answer null)": 2,
        "image caption or query without img_url (url null)": 2,
        "int answer → string (raw kept in extra.answer)": 2,
        "QA evidence empty": 1,
        "QA evidence id that names no turn (moved to unresolved_evidence)": 1,
        "QA evidence string with no turn id (kept in unresolved_evidence)": 1,
        "adversarial question with both answer and adversarial_answer (both kept)": 1,
        "observation evidence string holding several ids, split": 1,
        "session date with no session body (kept in the conversation's extra)": 1,
    }
    raw = json.loads(SAMPLE.read_text(encoding="utf-8"))
    questions = [qa["question"] for qa in raw[0]["qa"]]
    assert len(questions) > len(set(questions))  # a repeated question
    observation_evidence = [
        pair[1]
        for sample in raw
        for entry in sample["observation"].values()
        for pairs in entry.values()
        for pair in pairs
    ]
    assert {type(evidence) for evidence in observation_evidence} == {str, list}
    assert any(isinstance(evidence, str) and "," in evidence for evidence in observation_evidence)
    assert SAMPLE.stat().st_size < 8_000


@pytest.fixture(scope="module")
def sample_build(tmp_path_factory):
    output = tmp_path_factory.mktemp("locomo-sample") / "locomo-unified"
    return build_source("locomo", output, data_dir=str(SAMPLE))


def load(result, config: str) -> datasets.Dataset:
    return datasets.load_dataset(str(result.output), config, split="test")


def test_sample_build_qa_rows(sample_build):
    qa = {row["question_id"]: row for row in load(sample_build, "qa")}
    assert qa["conv-s1:qa0"]["answer"] == "2022"
    assert extra(qa["conv-s1:qa0"]["extra"]) == {"evidence": ["D1:4"], "answer": 2022}
    assert qa["conv-s1:qa1"]["answer"] == "3"
    assert qa["conv-s1:qa1"]["evidence_turn_ids"] == ["D2:2", "D2:3"]
    assert qa["conv-s1:qa2"]["evidence_turn_ids"] == ["D1:3"]
    assert qa["conv-s1:qa4"]["evidence_turn_ids"] == ["D2:4"]
    assert (qa["conv-s1:qa6"]["answer"], qa["conv-s1:qa6"]["adversarial_answer"]) == (None, "Miso")
    assert (qa["conv-s1:qa7"]["answer"], qa["conv-s1:qa7"]["adversarial_answer"]) == ("No", "Yes")
    assert qa["conv-s1:qa8"]["unresolved_evidence"] == ["D"]
    assert qa["conv-s1:qa9"]["unresolved_evidence"] == ["D2:19"]
    assert Counter(row["category"] for row in qa.values()) == {
        "single-hop": 5,
        "adversarial": 3,
        "multi-hop": 2,
        "temporal": 2,
        "open-domain": 1,
    }


def test_sample_build_turn_images(sample_build):
    turns = {(row["conversation_id"], row["turn_id"]): row for row in load(sample_build, "turns")}
    with_all = turns[("conv-s1", "D1:3")]
    assert with_all["images"] == [
        {
            "url": "https://example.com/photos/blue-bowl.jpg",
            "caption": "a photo of a blue ceramic bowl on a wooden table",
            "query": "handmade blue bowl",
        }
    ]
    assert with_all["text"] == "A small blue bowl, here it is."
    assert turns[("conv-s1", "D1:5")]["images"][0]["url"] is None
    assert extra(turns[("conv-s1", "D2:5")]["extra"]) == {"re-download": True}
    assert turns[("conv-s1", "D2:4")]["images"][0]["query"] is None
    roles = Counter(
        (row["speaker"], row["role"]) for row in turns.values() if row["conversation_id"] == "conv-s1"
    )
    assert roles == {("Priya", "user"): 5, ("Tomas", "assistant"): 5}


def test_sample_build_sessions_keep_dates_without_body(sample_build):
    sessions = {row["conversation_id"]: row for row in load(sample_build, "sessions")}
    first = sessions["conv-s1"]
    assert [session["session_id"] for session in first["sessions"]] == ["session_1", "session_2"]
    assert extra(first["extra"]) == {"conversation": {"session_3_date_time": "2:15 pm on 9 June, 2023"}}
    assert first["sessions"][1]["summary"].startswith("On 21 April 2023 Tomas tells Priya")
    assert first["sessions"][1]["timestamp"] == datetime(2023, 4, 21, 19, 30)


def test_sample_build_observations_config(sample_build):
    rows = load(sample_build, "observations")
    assert rows.num_rows == 5
    tomas = [row for row in rows if row["speaker"] == "Tomas" and row["session_id"] == "session_2"]
    assert [(row["evidence_turn_ids"], extra(row["evidence"])) for row in tomas] == [
        (["D2:1", "D2:3"], "D2:1, D2:3")
    ]
    as_list = [row for row in rows if row["conversation_id"] == "conv-s2"]
    assert [(row["evidence_turn_ids"], extra(row["evidence"])) for row in as_list] == [
        (["D1:1", "D1:3"], ["D1:1", "D1:3"])
    ]


def test_sample_build_events_config(sample_build):
    rows = load(sample_build, "events")
    assert [
        (row["conversation_id"], row["session_id"], row["speaker"], row["event"], row["date"]) for row in rows
    ] == [
        (
            "conv-s1",
            "session_1",
            "Priya",
            "Priya finishes a pottery class and makes a blue bowl.",
            "3 March, 2023",
        ),
        ("conv-s1", "session_2", "Priya", "Priya adopts an orange cat named Miso.", "21 April, 2023"),
        ("conv-s1", "session_2", "Tomas", "Tomas plays his first gig at a cafe.", "21 April, 2023"),
        ("conv-s1", "session_2", "Tomas", "Tomas buys a cat toy for Miso.", "21 April, 2023"),
        ("conv-s2", "session_1", "Ada", "Ada accepts a job at a research lab in Lisbon.", "2 May, 2023"),
    ]


# -- the card ----------------------------------------------------------------------------------------------


def test_card_round_trips_and_lists_every_config(sample_build):
    path = sample_build.output / "README.md"
    card = DatasetCard.load(path)
    text = path.read_text(encoding="utf-8")
    assert yaml.safe_load(text.split("---\n")[1]) == card.data.to_dict()
    assert str(card) == DatasetCard(str(card)).content  # load → save → load is stable
    data = card.data.to_dict()
    assert data["license"] == "cc-by-nc-4.0"
    assert data["pretty_name"] == "LoCoMo (convhub unified)"
    assert data["language"] == ["en"]
    assert data["size_categories"] == ["n<1K"]
    assert {"question-answering", "text-generation"} <= set(data["task_categories"])
    assert "locomo" in data["tags"]
    configs = {config["config_name"]: config for config in data["configs"]}
    assert set(configs) == set(ALL_CONFIGS)
    assert [name for name, config in configs.items() if config.get("default")] == ["sessions"]
    for name, config in configs.items():
        assert config["data_files"] == [{"split": "test", "path": f"{name}/test-*"}]
    infos = {info["config_name"]: info for info in data["dataset_info"]}
    assert infos["qa"]["splits"] == [
        {"name": "test", "num_bytes": infos["qa"]["splits"][0]["num_bytes"], "num_examples": 13}
    ]


def test_card_body_has_categories_normalizations_roles_citation(sample_build):
    body = DatasetCard.load(sample_build.output / "README.md").text
    for line in [
        "| 1 | multi-hop | 2 |",
        "| 2 | temporal | 2 |",
        "| 3 | open-domain | 1 |",
        "| 4 | single-hop | 5 |",
        "| 5 | adversarial | 3 |",
        "| int answer → string (raw kept in extra.answer) | 2 |",
        "| QA evidence id that names no turn (moved to unresolved_evidence) | 1 |",
        "| observation evidence string holding several ids, split | 1 |",
        "| speaker_a | `user` |",
        "| test | locomo_sample | 2 | 3 | 13 | 13 |",
    ]:
        assert line in body, line
    for name, count in sample_build.notes.items():
        assert f"| {name} | {count:,} |" in body
    assert "1 single-hop" in body and "3 multi-hop" in body  # the format document's other naming
    assert "@inproceedings{maharana2024locomo," in body
    assert 'load_dataset("ORG/locomo-unified", "observations")' in body
    assert "## License" in body and "`cc-by-nc-4.0`" in body


# -- the command line --------------------------------------------------------------------------------------


def test_convhub_check_prints_statistics_and_normalizations(capsys):
    assert cli.main(["check", "locomo", "--data-dir", str(SAMPLE)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("locomo: OK\n")
    assert "| test | locomo_sample | 2 | 3 | 13 | 13 |" in out
    assert "       2  int answer → string (raw kept in extra.answer)" in out
    assert "       1  session date with no session body (kept in the conversation's extra)" in out


def test_convhub_check_reports_bad_input(tmp_path, capsys):
    (tmp_path / "broken.json").write_text('[{"sample_id": "conv-x"', encoding="utf-8")
    assert cli.main(["check", "locomo", "--data-dir", str(tmp_path)]) == 1
    assert "broken.json: not valid UTF-8 JSON" in capsys.readouterr().err


def test_convhub_check_names_both_files_of_a_sample_id_they_share(tmp_path):
    data_dir = split_sample(tmp_path / "data")
    first = json.loads((data_dir / "part_a.json").read_text(encoding="utf-8"))
    (data_dir / "part_c.json").write_text(json.dumps(first), encoding="utf-8")
    with pytest.raises(SourceError) as caught:
        check_source("locomo", str(data_dir))
    assert str(caught.value) == (
        f"{data_dir / 'part_c.json'}, record 0, field 'sample_id': "
        f"duplicate sample_id 'conv-s1', also in {data_dir / 'part_a.json'}"
    )


def test_convhub_build_all_sample(tmp_path, capsys):
    from convhub import registry

    assert cli.main(["build", "--all", "--sample", "--output", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for name in registry.names():
        hub_name = registry.get(name).HUB_NAME
        assert (tmp_path / hub_name / "README.md").is_file()
        assert f"{name}: {tmp_path / hub_name}" in out
    locomo = tmp_path / LocomoBuilder.HUB_NAME
    assert sorted(path.name for path in locomo.iterdir()) == sorted([*ALL_CONFIGS, "README.md", MARKER])
    assert load_folder(locomo, "qa").num_rows == 13


def load_folder(folder: Path, config: str) -> datasets.Dataset:
    return datasets.load_dataset(str(folder), config, split="test")


def test_convhub_build_config_subset(tmp_path):
    output = tmp_path / "locomo-unified"
    argv = ["build", "locomo", "--data-dir", str(SAMPLE), "--output", str(output), "--config", "qa"]
    assert cli.main([*argv, "--config", "events"]) == 0
    assert sorted(path.name for path in output.iterdir()) == [MARKER, "README.md", "events", "qa"]
    card = DatasetCard.load(output / "README.md").data.to_dict()
    assert sorted(config["config_name"] for config in card["configs"]) == ["events", "qa"]
    assert load_folder(output, "events").num_rows == 5
    assert load_folder(output, "qa").num_rows == 13


def split_sample(folder: Path) -> Path:
    """The sample as two files (two shards, two subsets) in ``folder``."""
    folder.mkdir()
    first, second = json.loads(SAMPLE.read_text(encoding="utf-8"))
    (folder / "part_a.json").write_text(json.dumps([first]), encoding="utf-8")
    (folder / "part_b.json").write_text(json.dumps([second]), encoding="utf-8")
    return folder


def rows_of(folder: Path, config: str) -> list[dict]:
    return load_folder(folder, config).to_list()


def test_num_proc_two_gives_the_same_rows(tmp_path):
    data_dir = split_sample(tmp_path / "data")
    serial, parallel = tmp_path / "serial", tmp_path / "parallel"
    assert cli.main(["build", "locomo", "--data-dir", str(data_dir), "--output", str(serial)]) == 0
    argv = ["build", "locomo", "--data-dir", str(data_dir), "--output", str(parallel), "--num-proc", "2"]
    assert cli.main(argv) == 0
    for config in ALL_CONFIGS:
        assert rows_of(parallel, config) == rows_of(serial, config), config
    sessions = rows_of(parallel, "sessions")
    assert [(row["conversation_id"], row["subset"]) for row in sessions] == [
        ("conv-s1", "part_a"),
        ("conv-s2", "part_b"),
    ]


def test_subset_option_keeps_one_file(tmp_path, capsys):
    data_dir = split_sample(tmp_path / "data")
    assert cli.main(["check", "locomo", "--data-dir", str(data_dir), "--subset", "part_b"]) == 0
    assert "| test | part_b | 1 | 1 | 3 | 2 |" in capsys.readouterr().out
    assert cli.main(["check", "locomo", "--data-dir", str(data_dir), "--subset", "part_c"]) == 1
    assert "part_c" in capsys.readouterr().err


class RecordingDownloads:
    """Stands in for ``datasets.DownloadManager``: records the URL and answers with a local path."""

    def __init__(self, local_path: str):
        self.local_path = local_path
        self.urls: list[str] = []

    def download(self, url: str) -> str:
        self.urls.append(url)
        return self.local_path


def test_without_data_dir_the_builder_downloads_locomo10_into_one_test_split():
    downloads = RecordingDownloads(str(SAMPLE))
    assert LocomoBuilder(config_name="sessions").shards(downloads) == {"test": [str(SAMPLE)]}
    assert downloads.urls == [
        "https://raw.githubusercontent.com/snap-research/LoCoMo/main/data/locomo10.json"
    ]


def test_listing_the_files_reads_none_of_them(tmp_path):
    """sample_id is checked across files as the workers parse them, not by a reading of every file first."""
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text("not JSON at all", encoding="utf-8")
    listed = LocomoBuilder(config_name="sessions", data_dir=str(tmp_path)).shards(RecordingDownloads(""))
    assert listed == {"test": [str(tmp_path / "a.json"), str(tmp_path / "b.json")]}


@pytest.mark.parametrize("num_proc", [1, 2])
def test_the_first_duplicate_across_files_names_both_files_whatever_the_workers(tmp_path, num_proc):
    """Three files over two workers: [a, b] and [c]. The error is the first repeat in file order (c's
    second sample repeats b's), not whichever a worker meets first, and the build leaves nothing."""
    data_dir = split_sample(tmp_path / "data")
    first = json.loads((data_dir / "part_a.json").read_text(encoding="utf-8"))[0]
    second = json.loads((data_dir / "part_b.json").read_text(encoding="utf-8"))[0]
    third = {**first, "sample_id": "conv-s9"}
    (data_dir / "part_c.json").write_text(json.dumps([third, second, first]), encoding="utf-8")
    out = tmp_path / "out"
    with pytest.raises(SourceError) as caught:
        build_source("locomo", out / "locomo-unified", data_dir=str(data_dir), num_proc=num_proc)
    assert str(caught.value) == (
        f"{data_dir / 'part_c.json'}, record 1, field 'sample_id': "
        f"duplicate sample_id 'conv-s2', also in {data_dir / 'part_b.json'}"
    )
    assert list(out.iterdir()) == []


def test_data_dir_may_be_a_folder_or_one_file(tmp_path):
    data_dir = split_sample(tmp_path / "data")
    folder = LocomoBuilder(config_name="qa", data_dir=str(data_dir)).shards(RecordingDownloads(""))
    assert folder == {"test": [str(data_dir / "part_a.json"), str(data_dir / "part_b.json")]}
    one = LocomoBuilder(config_name="qa", data_dir=str(data_dir / "part_b.json")).shards(
        RecordingDownloads("")
    )
    assert one == {"test": [str(data_dir / "part_b.json")]}


# -- bad input: an error naming file, record and field, and no output ----------------------------------------


def bad_files(kind: str) -> dict[str, str]:
    sample = json.loads(SAMPLE.read_text(encoding="utf-8"))
    if kind == "invalid json":
        return {"bad.json": json.dumps(sample)[:-5]}
    if kind == "missing field":
        del sample[1]["conversation"]["session_1"][2]["dia_id"]
    elif kind == "wrong type":
        sample[0]["qa"][3]["category"] = "1"
    elif kind == "duplicate sample_id":
        sample[1]["sample_id"] = "conv-s1"
    elif kind == "duplicate across files":
        return {"a.json": json.dumps(sample[:1]), "bad.json": json.dumps(sample)}
    return {"bad.json": json.dumps(sample)}


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("invalid json", "bad.json: not valid UTF-8 JSON"),
        ("missing field", "bad.json, record conv-s2 session_1 turn 2, field 'dia_id': missing"),
        ("wrong type", "bad.json, record conv-s1 qa 3, field 'category': expected int, got str"),
        ("duplicate sample_id", "bad.json, record 1, field 'sample_id': duplicate sample_id 'conv-s1'"),
        ("duplicate across files", "bad.json, record 0, field 'sample_id': duplicate sample_id 'conv-s1'"),
    ],
)
def test_bad_input_raises_source_error_and_leaves_no_output(tmp_path, kind, message):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    for name, text in bad_files(kind).items():
        (data_dir / name).write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    with pytest.raises(SourceError) as caught:
        build_source("locomo", out / "locomo-unified", data_dir=str(data_dir))
    assert message in str(caught.value)
    assert str(data_dir / "bad.json") in str(caught.value)
    assert list(out.iterdir()) == []  # neither the output folder nor a staging folder


def test_bad_input_through_the_command(tmp_path, capsys):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "bad.json").write_text(bad_files("wrong type")["bad.json"], encoding="utf-8")
    assert (
        cli.main(["build", "locomo", "--data-dir", str(data_dir), "--output", str(tmp_path / "out" / "x")])
        == 1
    )
    assert "field 'category': expected int, got str" in capsys.readouterr().err
    assert list((tmp_path / "out").iterdir()) == []


# -- scripts/build.py --------------------------------------------------------------------------------------


def test_build_script_runs_from_a_checkout(tmp_path):
    output = tmp_path / "locomo-unified"
    command = [sys.executable, str(ROOT / "scripts" / "build.py"), "locomo", "--data-dir", str(SAMPLE)]
    env = {**os.environ, "PYTHONPATH": ""}
    done = subprocess.run(
        [*command, "--output", str(output), "--config", "qa"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert f"locomo: {output}" in done.stdout
    assert load_folder(output, "qa").num_rows == 13


# -- the real file -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_file():
    from conftest import shared_data

    return shared_data("locomo", "locomo10.json")


def test_real_file_counts_and_normalizations(real_file):
    notes, statistics = check_source("locomo", str(real_file))
    total = statistics.total()
    counts = {name: getattr(total, name) for name in REAL_COUNTS}
    assert counts == REAL_COUNTS
    assert dict(total.categories) == REAL_CATEGORIES
    assert dict(notes) == REAL_NOTES


def test_real_file_quirks_land_where_the_card_says(real_file):
    records = {record["conversation_id"]: record for record in parse.parse_file(real_file, Notes())}
    assert len(records) == 10
    conv26 = extra(records["conv-26"]["extra"])["conversation"]
    assert sorted(conv26) == sorted(f"session_{n}_date_time" for n in range(20, 36))
    questions = [q for record in records.values() for q in record["questions"]]
    integers = sorted(extra(q["extra"])["answer"] for q in questions if "answer" in extra(q["extra"]))
    assert integers == [2, 3, 2022, 2022, 2022, 2022]
    not_found = sorted(i for q in questions for i in q["unresolved_evidence"])
    assert not_found == ["D", "D10:19", "D4:36"]  # "D" holds no id at all
    both = [q for q in questions if q["answer"] is not None and q["adversarial_answer"] is not None]
    assert len(both) == 2
    assert (
        Counter(q["question"] for q in records["conv-48"]["questions"]).total()
        - len({q["question"] for q in records["conv-48"]["questions"]})
        == 11
    )  # repeated questions all kept


def leaves(value, found: set) -> set:
    """Every scalar and every dict key inside ``value`` (JSON text in ``extra`` fields decoded)."""
    if isinstance(value, dict):
        for key, item in value.items():
            found.add(key)
            leaves(item, found)
    elif isinstance(value, list):
        for item in value:
            leaves(item, found)
    elif value is not None:
        found.add(value)
    return found


#: LoCoMo keys whose meaning the schema carries by position or column name, not as a value.
STRUCTURAL_KEY = (
    r"^(qa|conversation|event_summary|observation|session_summary|sample_id|speaker_a|speaker_b|question|answer"
    r"|adversarial_answer|evidence|category|speaker|dia_id|text|img_url|blip_caption|query"
    r"|session_\d+(_date_time|_observation|_summary)?|events_session_\d+)$"
)


def test_every_field_of_the_real_file_is_reachable_in_the_sessions_config(real_file, tmp_path):
    import re

    result = build_source(
        "locomo", tmp_path / "locomo-unified", data_dir=str(real_file), configs=["sessions"]
    )
    rows = {row["conversation_id"]: row for row in LocalBuild(result.output).rows("sessions", "test")}
    samples = json.loads(real_file.read_text(encoding="utf-8"))
    assert sorted(rows) == sorted(sample["sample_id"] for sample in samples)
    for sample in samples:
        record_leaves = leaves(rows[sample["sample_id"]], set())
        record_leaves |= {str(value) for value in record_leaves if isinstance(value, int)}
        raw_values: set = set()
        raw_keys: set = set()
        _raw_leaves(sample, raw_values, raw_keys)
        missing_values = {value for value in raw_values if value not in record_leaves}
        assert not missing_values, f"{sample['sample_id']}: {sorted(map(str, missing_values))[:5]}"
        missing_keys = {
            key for key in raw_keys if not re.match(STRUCTURAL_KEY, key) and key not in record_leaves
        }
        assert not missing_keys, f"{sample['sample_id']}: {sorted(missing_keys)}"


def _raw_leaves(value, values: set, keys: set) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            keys.add(key)
            _raw_leaves(item, values, keys)
    elif isinstance(value, list):
        for item in value:
            _raw_leaves(item, values, keys)
    else:
        values.add(value)


def test_real_file_every_turn_and_question_in_order(real_file):
    samples = json.loads(real_file.read_text(encoding="utf-8"))
    records = list(parse.parse_file(real_file, Notes()))
    for sample, record in zip(samples, records, strict=True):
        conversation = sample["conversation"]
        for session in record["sessions"]:
            raw_turns = conversation[session["session_id"]]
            assert [(t["dia_id"], t["speaker"], t["text"]) for t in raw_turns] == [
                (t["turn_id"], t["speaker"], t["text"]) for t in session["turns"]
            ]
            assert session["date_time"] == conversation[f"{session['session_id']}_date_time"]
        assert [qa["question"] for qa in sample["qa"]] == [q["question"] for q in record["questions"]]
        assert [qa["category"] for qa in sample["qa"]] == [q["category_id"] for q in record["questions"]]
        assert [qa.get("adversarial_answer") for qa in sample["qa"]] == [
            q["adversarial_answer"] for q in record["questions"]
        ]
        assert [None if "answer" not in qa else str(qa["answer"]) for qa in sample["qa"]] == [
            q["answer"] for q in record["questions"]
        ]
        assert [qa["evidence"] for qa in sample["qa"]] == [
            extra(q["extra"])["evidence"] for q in record["questions"]
        ]


def test_real_observations_and_events_configs(real_file, tmp_path):
    output = tmp_path / "locomo-unified"
    result = build_source("locomo", output, data_dir=str(real_file), configs=["observations", "events"])
    samples = json.loads(real_file.read_text(encoding="utf-8"))
    observations = sum(len(pairs) for s in samples for e in s["observation"].values() for pairs in e.values())
    events = sum(
        len(items)
        for s in samples
        for e in s["event_summary"].values()
        for k, items in e.items()
        if k != "date"
    )
    assert result.configs["observations"].splits["test"].num_examples == observations == 2541
    assert result.configs["events"].splits["test"].num_examples == events
    rows = load(result, "observations")
    evidence = [extra(row["evidence"]) for row in rows]
    comma_joined = [
        row for row, raw in zip(rows, evidence, strict=True) if isinstance(raw, str) and "," in raw
    ]
    assert len(comma_joined) == 5
    assert all(len(row["evidence_turn_ids"]) >= 2 for row in comma_joined)
    assert all(row["evidence_turn_ids"] for row in rows)  # every observation's evidence names turns


def test_date_fast_path_gives_dateutils_datetime_on_every_real_date():
    """parse_timestamp reads LoCoMo's own format with strptime: the same datetime dateutil gives."""
    from conftest import shared_data
    from dateutil import parser as dateparser

    samples = json.loads(shared_data("locomo", "locomo10.json").read_text(encoding="utf-8"))
    dates = [value for s in samples for key, value in s["conversation"].items() if key.endswith("_date_time")]
    assert len(dates) > 200
    for date_time in dates:
        slow = dateparser.parse(date_time.replace(" on ", " "), dayfirst=True)
        assert (
            parse.parse_timestamp(date_time, Notes())
            == slow
            == datetime.strptime(date_time, parse.LOCOMO_DATE_FORMAT)
        )
    for other in ("1:56 PM on 8 Sept, 2023", "13:05 on 8 May 2023"):  # not the exact format: dateutil
        assert parse.parse_timestamp(other, Notes()) == dateparser.parse(
            other.replace(" on ", " "), dayfirst=True
        )


@pytest.mark.parametrize(
    "key", ["raw_answer", "raw_adversarial_answer", "evidence_not_found", "evidence_unreadable", "unresolved"]
)
def test_question_key_named_like_convhub_bookkeeping_comes_back_on_export(key):
    """convhub's own account of a question (raw answers, evidence that resolves to nothing) never shares a
    namespace with the question's unknown keys: each such key comes back with its value."""
    qa = {"question": "q?", "answer": 7, "evidence": ["D", "D9:9"], "category": 1, key: {"k": [5]}}
    sample = {"sample_id": "conv-x", "conversation": {"speaker_a": "A", "speaker_b": "B"}, "qa": [qa]}
    record = parse.parse_sample(sample, "s", Notes(), path="f.json")
    assert record["questions"][0]["unresolved_evidence"] == ["D9:9", "D"]
    assert sample_from_record(record)["qa"] == [qa]


@pytest.mark.parametrize("key", ["observation_absent", "event_summary_absent", "raw_conversation"])
def test_sample_key_named_like_convhub_bookkeeping_comes_back_on_export(key):
    sample = {"sample_id": "conv-x", "conversation": {"speaker_a": "A", "speaker_b": "B"}, "qa": []}
    sample[key] = True
    record = parse.parse_sample(sample, "s", Notes(), path="f.json")
    assert sample_from_record(record) == sample


# -- the fast paths give what the plain code gives --------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '[{"n": -9223372036854775809}]',  # one below int64: orjson would read a float
        '[{"n": 18446744073709551616}]',
        "[123456789012345678901234567890,\n  -12345678901234567890123]",
        '[{"n": 9223372036854775807, "m": -9223372036854775808, "x": 1.5, "z": -0.0}]',
        '[{"url": "https://x.com/status/1026209343625756672", "n": 3}]',
        "[NaN, Infinity, -Infinity, 1e400]",
        '["\\ud800 lone surrogate"]',
        '{"a": 1, "a": 2}',
    ],
)
def test_a_file_reads_as_json_loads_reads_it(text):
    assert repr(read.load_json(text.encode("utf-8"))) == repr(json.loads(text))


def test_long_digit_runs_inside_strings_do_not_send_a_file_to_json_loads():
    """A tweet id in an img_url is no integer: such files (the real one) still take the fast reader."""
    assert not may_hold_long_integer(b'[{"img_url": ["https://x.com/s/1026209343625756672"]}]')
    assert may_hold_long_integer(b'[{"n": 1026209343625756672}]')
    assert may_hold_long_integer(b"1026209343625756672")


def test_an_integer_beyond_64_bits_in_an_unknown_key_is_kept_exactly(tmp_path):
    sample = tiny_sample()
    sample["qa"][0]["big"] = 123456789012345678901234567890
    path = tmp_path / "big.json"
    path.write_text(json.dumps([sample]), encoding="utf-8")
    [record] = parse.parse_file(path, Notes())
    assert '"big": 123456789012345678901234567890' in record["questions"][0]["extra"]


def test_the_parser_leaves_the_cycle_collector_as_the_caller_set_it(tmp_path):
    """A caller that holds a record, stops iterating or raises finds the collector as it left it."""
    path = tmp_path / "two.json"
    path.write_text(json.dumps([tiny_sample("conv-1"), tiny_sample("conv-2")]), encoding="utf-8")
    records = parse.parse_indexed(path, Notes())
    next(records)
    assert gc.isenabled()
    assert [index for index, _ in records] == [1]
    assert gc.isenabled()
    gc.disable()  # a caller that runs without the collector keeps it off
    try:
        assert len(list(parse.parse_file(path, Notes()))) == 2
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_pre_fork_servers_frozen_objects_are_never_thawed(tmp_path, monkeypatch):
    path = tmp_path / "two.json"
    path.write_text(json.dumps([tiny_sample("conv-1"), tiny_sample("conv-2")]), encoding="utf-8")
    made = []
    monkeypatch.setattr(gc, "get_freeze_count", lambda: 5)
    monkeypatch.setattr(gc, "freeze", lambda: made.append("freeze"))
    monkeypatch.setattr(gc, "unfreeze", lambda: made.append("unfreeze"))
    assert len(list(parse.parse_file(path, Notes()))) == 2
    assert made == []


# -- a file is read one sample at a time -------------------------------------------------------------------

#: Files whose reading must not change with the streaming reader: the fast path, each of its refusals
#: (NaN, long integers, float overflow, lone surrogates), and broken or odd files.
FILE_TEXTS = [
    '[{"a": 1, "b": [1.5, -0.0, 1e2, "x"]}, [1], 3, "s", null]',
    '[{"n": 123456789012345678901234567890}, {"m": 2}]',
    '[{"x": 1}, {"x": NaN}, {"x": Infinity}]',
    '[{"x": 1}, {"x": 1.5e400}]',
    '[{"x": "\\ud83d\\ude00 an emoji written by ensure_ascii"}]',
    '[{"x": "fine"}, {"x": "\\ud800 lone high"}]',
    '[{"x": "\\udc00 lone low"}]',
    '[{"x": "a\\\\ud83d\\ude00: an escaped backslash, then a lone low surrogate"}]',
    '[{"a": 1, "a": 2}]',
    '  \n[{"a": 1}]  \n',
    '{"a": 1}',
    "[]",
    "",
    '[{"a": 1}] trailing',
    '[{"a": 1}, {"a": 2}',
    '\ufeff[{"a": 1}]',
]


def _read(function, path):
    try:
        return repr(list(function(path)))
    except SourceError as error:
        return f"SourceError: {error}"


@pytest.mark.parametrize("text", FILE_TEXTS)
def test_a_file_streams_as_read_samples_reads_it(tmp_path, text):
    path = tmp_path / "f.json"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    assert _read(read.iter_samples, path) == _read(read.read_samples, path)


def test_samples_come_before_the_end_of_the_file_is_read(tmp_path):
    """Memory follows one sample, not the file: the first samples arrive although the file is broken
    further on, and the break is the error read_samples gives for the file."""
    path = tmp_path / "broken.json"
    path.write_text(json.dumps([tiny_sample("conv-1"), tiny_sample("conv-2")])[:-1] + ", {", encoding="utf-8")
    records = parse.parse_indexed(path, Notes())
    assert [next(records)[1]["conversation_id"], next(records)[1]["conversation_id"]] == ["conv-1", "conv-2"]
    with pytest.raises(SourceError, match="broken or truncated"):
        next(records)


@pytest.mark.parametrize(
    ("text", "lone"),
    [
        ('"\\ud83d\\ude00"', False),
        ('"\\ud83d\\ude00\\ud83d\\ude00"', False),
        ('"\\ud800x"', True),
        ('"\\udc00"', True),
        ('"\\ud83d"', True),
        ('"\\ud83d\\ud83d\\ude00"', True),
        ('"\\ud83d\\ude00\\ude00"', True),
    ],
)
def test_lone_surrogate_escapes_are_found_and_read_as_json_reads_them(tmp_path, text, lone):
    """yajl would read a lone surrogate escape as "?": every one must send the file to json; a pair
    must not (the file streams)."""
    assert any(0xD800 <= ord(char) <= 0xDFFF for char in json.loads(text)) == lone
    data = ("[" + '"x",' * 20 + text + "," + '"y",' * 20 + "1]").encode()
    assert holds_lone_surrogate_escape(data) == lone
    path = tmp_path / "f.json"
    path.write_bytes(data)
    assert repr(list(read.iter_samples(path))) == repr(json.loads(data))


def test_every_sample_of_the_real_file_streams_as_json_reads_it(real_file):
    """The real file holds emoji written as surrogate pairs: it must still take the streaming reader."""
    assert not holds_lone_surrogate_escape(real_file.read_bytes())
    assert repr(list(read.iter_samples(real_file))) == repr(json.loads(real_file.read_text(encoding="utf-8")))
