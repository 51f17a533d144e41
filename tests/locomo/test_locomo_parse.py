"""LoCoMo's parser on tiny hand-written samples: every quirk of SOURCES.md, where it lands, and errors that name
file, record and field.
"""

from __future__ import annotations

import copy
from datetime import datetime

import pytest

from convhub.builders.locomo import evidence as locomo_evidence
from convhub.builders.locomo import parse
from convhub.builders.locomo.export import sample_from_record
from convhub.errors import FieldError, Notes, SourceError
from tests.locomo.locomo_samples import extra, parse_tiny, question, tiny_sample, turn

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
        "conv-t1",
        "qa[0].category",
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
    assert locomo_evidence.parse_evidence(evidence, notes) == (ids, unreadable)
    assert notes == {kind: 1}


def test_plain_evidence_is_not_counted_as_a_normalization():
    notes = Notes()
    assert locomo_evidence.parse_evidence(["D1:3", "D2:1"], notes) == (["D1:3", "D2:1"], [])
    assert locomo_evidence.parse_evidence(["D0:0", "D10:20"], notes) == (
        ["D0:0", "D10:20"],
        [],
    )
    assert notes == {}


def test_evidence_of_the_wrong_type_names_the_field():
    with pytest.raises(SourceError) as caught:
        question({"question": "Q?", "answer": "A", "evidence": [3], "category": 1})
    assert (caught.value.record, caught.value.field) == ("conv-t1", "qa[0].evidence")


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
        turn("D1:3", "Ana", "Look!", **optional), roles, notes, "conversation.session_1[2]"
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
    with pytest.raises(FieldError) as caught:
        images_of(img_url="https://x/a.jpg")
    assert caught.value.field == "conversation.session_1[2].img_url"


# -- observations and events -------------------------------------------------------------------------------


def test_observation_evidence_as_list_string_and_comma_joined_string():
    entry = {
        "Ana": [["Ana has a dog.", ["D2:2", "D2:1"]], ["Ana lives in Porto.", "D1:1"]],
        "Bo": [["Bo asks for news.", "D2:1, D1:2"]],
    }
    notes = Notes()
    rows = locomo_evidence.parse_observations(entry, {"D1:1", "D1:2", "D2:1", "D2:2"}, notes, "obs")
    assert [(r["speaker"], r["position"], r["evidence_turn_ids"], r["evidence"]) for r in rows] == [
        ("Ana", 0, ["D2:2", "D2:1"], ["D2:2", "D2:1"]),
        ("Ana", 1, ["D1:1"], "D1:1"),
        ("Bo", 0, ["D2:1", "D1:2"], "D2:1, D1:2"),
    ]
    assert notes == {"observation evidence string holding several ids, split": 1}


def test_observation_evidence_naming_no_turn_is_counted():
    notes = Notes()
    rows = locomo_evidence.parse_observations({"Ana": [["x", "D1:1, D7:7"]]}, {"D1:1"}, notes, "obs")
    assert rows[0]["evidence_turn_ids"] == ["D1:1"]
    assert rows[0]["evidence"] == "D1:1, D7:7"
    assert notes["observation evidence id that names no turn (raw evidence kept)"] == 1


def test_observation_evidence_with_no_id_is_counted_and_kept_raw():
    notes = Notes()
    rows = locomo_evidence.parse_observations({"Bo": [["x", ["D", "D1:1"]]]}, {"D1:1"}, notes, "obs")
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
    assert parse.parse_events(entry, "ev") == [
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
        (
            lambda s: s["conversation"]["session_1"][1].pop("text"),
            "conv-t1",
            "conversation.session_1[1].text",
        ),
        (
            lambda s: s["conversation"]["session_1"][1].update(speaker="Cy"),
            "conv-t1",
            "conversation.session_1[1].speaker",
        ),
        (lambda s: s["qa"][0].update(answer=["Porto"]), "conv-t1", "qa[0].answer"),
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


# -- convhub's own names never collide with the source's --------------------------------------------------


@pytest.mark.parametrize(
    "key", ["raw_answer", "raw_adversarial_answer", "evidence_not_found", "evidence_unreadable", "unresolved"]
)
def test_question_key_named_like_convhub_bookkeeping_comes_back_on_export(key):
    """convhub's own account of a question (raw answers, evidence that resolves to nothing) never shares a
    namespace with the question's unknown keys: each such key comes back with its value."""
    qa = {"question": "q?", "answer": 7, "evidence": ["D", "D9:9"], "category": 1, key: {"k": [5]}}
    sample = {"sample_id": "conv-x", "conversation": {"speaker_a": "A", "speaker_b": "B"}, "qa": [qa]}
    record = parse.parse_sample(sample, "s", Notes())
    assert record["questions"][0]["unresolved_evidence"] == ["D9:9", "D"]
    assert sample_from_record(record)["qa"] == [qa]


@pytest.mark.parametrize("key", ["observation_absent", "event_summary_absent", "raw_conversation"])
def test_sample_key_named_like_convhub_bookkeeping_comes_back_on_export(key):
    sample = {"sample_id": "conv-x", "conversation": {"speaker_a": "A", "speaker_b": "B"}, "qa": []}
    sample[key] = True
    record = parse.parse_sample(sample, "s", Notes())
    assert sample_from_record(record) == sample
