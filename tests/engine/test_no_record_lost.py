"""Issue #54: under ``--on-bad-record skip`` every source record is in the build or in the quarantine (with its raw
bytes and reason), whatever breaks the file: a missing comma, garbage between two records, one broken record, a
file cut short. Every reader is run, for every source: the JSON list (LoCoMo, LongMemEval), ConvLab's ranged
reader of ``dialogues.json``, JSON Lines (GigaMemory, MNBVC)."""

from __future__ import annotations

import json
import re

import pytest

from convhub.build import build_source
from tests.support.hostile_sources import SOURCES, Source, load, read_quarantine

COUNT, BROKEN = 10, 3


def longmemeval_instance(i: int, text: str = "") -> dict:
    return {
        "question_id": f"q{i}",
        "question_type": "single-session-user",
        "question": "What did I say?",
        "answer": "hello",
        "question_date": "2023/05/30 (Tue) 23:40",
        "haystack_session_ids": [f"answer_{i}"],
        "haystack_dates": ["2023/05/20 (Sat) 02:21"],
        "haystack_sessions": [[{"role": "user", "content": text or f"hello {i}", "has_answer": True}]],
        "answer_session_ids": [f"answer_{i}"],
    }


SOURCES_HERE = {
    **SOURCES,
    "longmemeval": Source("longmemeval", longmemeval_instance, "lme.json", False, (None, ""), (None, "")),
}
JSON_LIST_SOURCES = ("locomo", "longmemeval", "convlab")


def built_positions(name: str, output) -> list[int]:
    """The file positions of the records the build holds (each source names them its own way)."""
    sessions = load(output, "sessions")
    if name == "gigamemory":
        return sorted(int(q["question_id"]) for questions in sessions["questions"] for q in questions)
    numbers = [int(re.search(r"(\d+)$", cid).group(1)) for cid in sessions["conversation_id"]]
    return sorted(n - 1 if name == "mnbvc" else n for n in numbers)  # (MNBVC's count lines from 1)


def broken_file(source: Source, how: str) -> bytes:
    """``COUNT`` records, the file broken at record ``BROKEN`` as ``how`` says."""
    records = [
        source.record(i, "NOT-UTF-8" if how == "not_utf8" and i == BROKEN else "") for i in range(COUNT)
    ]
    texts = [json.dumps(record, ensure_ascii=False) for record in records]
    if source.jsonl:
        if how == "broken":
            texts[BROKEN] = texts[BROKEN][:-12]
        lines = "\n".join(texts) + "\n"
        return (lines[:-20] if how == "truncated" else lines).encode().replace(b"NOT-UTF-8", b"\xe5\x8c!")
    head, tail = ", ".join(texts[:BROKEN]), ", ".join(texts[BROKEN + 1 :])
    middle = {
        "missing_comma": f", {texts[BROKEN]} ",
        "garbage": f", <<garbage>> , {texts[BROKEN]}, ",
        "broken": f", {texts[BROKEN][:-12]}, ",
        "truncated": f", {texts[BROKEN]}, ",
        "not_utf8": f", {texts[BROKEN]}, ",
    }[how]
    text = f"[{head}{middle}{tail}]"
    return (text[:-30] if how == "truncated" else text).encode().replace(b"NOT-UTF-8", b"\xe5\x8c!")


CASES = [
    (name, how)
    for name in JSON_LIST_SOURCES
    for how in ("missing_comma", "garbage", "broken", "truncated", "not_utf8")
]
CASES += [(name, how) for name in ("gigamemory", "mnbvc") for how in ("broken", "truncated", "not_utf8")]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "how"), CASES)
def test_every_record_is_built_or_quarantined_with_its_bytes(tmp_path, name, how):
    source = SOURCES_HERE[name]
    data_dir = tmp_path / "data"
    source.path(data_dir).write_bytes(broken_file(source, how))
    result = build_source(name, tmp_path / "out", str(data_dir), ["sessions"], 1, on_bad_record="skip")
    built = built_positions(name, result.output)
    entries = read_quarantine(result)
    lost = [i for i in range(COUNT) if i not in built]
    assert result.skipped == sum(entry.get("records", 1) for entry in entries) == len(lost)
    assert len(built) + result.skipped == COUNT
    expected_lost = {
        "missing_comma": [],
        "garbage": [],
        "broken": [BROKEN],
        "truncated": [COUNT - 1],
        "not_utf8": [BROKEN],
    }[how]
    assert lost == expected_lost
    assert entries, "a break in a file is always in the quarantine, even one that cost no record"
    for entry in entries:
        assert entry["reason"] and entry["scope"] in ("record", "span")
        assert entry["raw"] or (how == "missing_comma" and entry["raw_size"] == 0 and entry["records"] == 0)
