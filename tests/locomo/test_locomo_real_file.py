"""LoCoMo's real ``locomo10.json``: counts, quirks and every field reachable; skipped when ``../shared/data`` is
absent.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime

import pytest

from convhub.builders.locomo import parse
from convhub.builders.locomo.builder import samples_of
from convhub.engine.build import build_source, check_source
from convhub.errors import Notes
from convhub.export.exporter import LocalBuild
from tests.locomo.locomo_samples import extra, load, records_of

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


# -- the real file -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_file():
    from tests.support.data_files import shared_data

    return shared_data("locomo", "locomo10.json")


def test_real_file_counts_and_normalizations(real_file):
    notes, statistics = check_source("locomo", str(real_file))
    total = statistics.total()
    counts = {name: getattr(total, name) for name in REAL_COUNTS}
    assert counts == REAL_COUNTS
    assert dict(total.categories) == REAL_CATEGORIES
    assert dict(notes) == REAL_NOTES


def test_real_file_quirks_land_where_the_card_says(real_file):
    records = {record["conversation_id"]: record for record in records_of(real_file)}
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


@pytest.mark.slow
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
    records = records_of(real_file)
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


def test_every_real_date_is_read_as_its_exact_format_says():
    """parse_timestamp (dateutil) gives, on every date of the real file, the datetime LoCoMo's own format
    ("1:56 pm on 8 May, 2023") says."""
    from dateutil import parser as dateparser

    from tests.support.data_files import shared_data

    samples = json.loads(shared_data("locomo", "locomo10.json").read_text(encoding="utf-8"))
    dates = [value for s in samples for key, value in s["conversation"].items() if key.endswith("_date_time")]
    assert len(dates) > 200
    for date_time in dates:
        slow = dateparser.parse(date_time.replace(" on ", " "), dayfirst=True)
        assert (
            parse.parse_timestamp(date_time, Notes())
            == slow
            == datetime.strptime(date_time, "%I:%M %p on %d %B, %Y")
        )
    for other in ("1:56 PM on 8 Sept, 2023", "13:05 on 8 May 2023"):  # other spellings
        assert parse.parse_timestamp(other, Notes()) == dateparser.parse(
            other.replace(" on ", " "), dayfirst=True
        )


def test_every_sample_of_the_real_file_streams_as_json_reads_it(real_file):
    """The real file holds emoji written as surrogate pairs."""
    assert repr([sample for _, sample in samples_of(str(real_file))]) == repr(
        json.loads(real_file.read_text(encoding="utf-8"))
    )
