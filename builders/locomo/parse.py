"""LoCoMo (``locomo10.json``) → canonical conversation records.

Pure functions: one LoCoMo sample in, one canonical record out. Every field of the sample is reachable
in the record: typed where the schema has a place for it, raw in an ``extra`` otherwise, and every
rewritten value (integer answers, split or zero-padded evidence ids) keeps its raw form in ``extra``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from dateutil import parser as dateparser

from builders import schema
from builders.errors import Notes, SourceError

#: LoCoMo's own evaluation code (task_eval/evaluation.py) and most published results use these names.
#: The format document in shared/seeds calls 1 single-hop, 3 multi-hop and 4 open-domain instead.
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}

SESSION_KEY = re.compile(r"^session_(\d+)$")
SESSION_DATE_KEY = re.compile(r"^session_(\d+)_date_time$")
EVIDENCE_ID = re.compile(r"D:?(\d+):(\d+)")
TURN_KEYS = {"speaker", "dia_id", "text", "img_url", "blip_caption", "query"}
QA_KEYS = {"question", "answer", "adversarial_answer", "evidence", "category"}
SAMPLE_KEYS = {"sample_id", "conversation", "qa", "event_summary", "observation", "session_summary"}


def read_samples(path: str | Path) -> list[dict[str, Any]]:
    """The samples of one LoCoMo file; an error names the file when it is not a JSON list of objects."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise SourceError(path, None, None, f"not valid UTF-8 JSON: {error}") from error
    if not isinstance(data, list):
        raise SourceError(path, None, None, f"expected a JSON list of samples, got {type(data).__name__}")
    for index, sample in enumerate(data):
        if not isinstance(sample, dict):
            raise SourceError(path, index, None, f"expected an object, got {type(sample).__name__}")
    return data


def parse_file(path: str | Path, notes: Notes) -> Iterator[dict[str, Any]]:
    subset = Path(path).stem
    seen: set[str] = set()
    for index, sample in enumerate(read_samples(path)):
        record = parse_sample(sample, subset, notes, path=str(path), index=index)
        if record["conversation_id"] in seen:
            raise SourceError(path, index, "sample_id", f"duplicate sample_id {record['conversation_id']!r}")
        seen.add(record["conversation_id"])
        yield record


def _require(sample: dict, key: str, kind: type, path: str, record: str | int) -> Any:
    if key not in sample:
        raise SourceError(path, record, key, "missing")
    value = sample[key]
    if not isinstance(value, kind):
        raise SourceError(path, record, key, f"expected {kind.__name__}, got {type(value).__name__}")
    return value


def parse_timestamp(date_time: str | None, notes: Notes) -> datetime | None:
    """LoCoMo writes "1:56 pm on 8 May, 2023"; anything unreadable stays null (the raw string is kept)."""
    if not date_time:
        return None
    try:
        return dateparser.parse(date_time.replace(" on ", " "), dayfirst=True)
    except (ValueError, OverflowError):
        notes.add("session date_time that is not a date (timestamp left null)")
        return None


def parse_sample(sample: dict, subset: str, notes: Notes, path: str = "<memory>", index: int = 0) -> dict:
    sample_id = _require(sample, "sample_id", str, path, index)
    conversation = _require(sample, "conversation", dict, path, sample_id)
    speakers = [_require(conversation, key, str, path, sample_id) for key in ("speaker_a", "speaker_b")]
    roles = {speakers[0]: "user", speakers[1]: "assistant"}
    sessions = parse_sessions(sample, conversation, roles, notes, path, sample_id)
    turn_ids = {turn["turn_id"] for session in sessions for turn in session["turns"]}
    questions = [
        parse_question(qa, sample_id, position, turn_ids, notes, path)
        for position, qa in enumerate(_require(sample, "qa", list, path, sample_id))
    ]
    leftovers = {key: value for key, value in sample.items() if key not in SAMPLE_KEYS}
    leftovers.update(_unclaimed_session_keys(sample, sessions))
    session_ids = {session["session_id"] for session in sessions}
    conversation_leftovers = {
        key: value
        for key, value in conversation.items()
        if key not in ("speaker_a", "speaker_b")
        and not (SESSION_KEY.match(key) or SESSION_DATE_KEY.match(key) and key[: -len("_date_time")] in session_ids)
    }
    dates_without_turns = [key for key in conversation_leftovers if SESSION_DATE_KEY.match(key)]
    if dates_without_turns:
        notes.add("session date with no session body (kept in the conversation's extra)", len(dates_without_turns))
    if conversation_leftovers:
        leftovers["conversation"] = conversation_leftovers
    return {
        "conversation_id": sample_id,
        "source": "locomo",
        "subset": subset,
        "language": "en",
        "speakers": speakers,
        "sessions": sessions,
        "questions": questions,
        "extra": schema.to_json(leftovers) if leftovers else None,
    }


def _session_numbers(conversation: dict) -> list[int]:
    numbers = set()
    for key in conversation:
        match = SESSION_KEY.match(key) or SESSION_DATE_KEY.match(key)
        if match:
            numbers.add(int(match.group(1)))
    return sorted(numbers)


def parse_sessions(sample: dict, conversation: dict, roles: dict, notes: Notes, path: str, sample_id: str):
    events = sample.get("event_summary") or {}
    observations = sample.get("observation") or {}
    summaries = sample.get("session_summary") or {}
    sessions = []
    for number in _session_numbers(conversation):
        body_key, date_key = f"session_{number}", f"session_{number}_date_time"
        body = conversation.get(body_key)
        extra: dict[str, Any] = {}
        if body is None:
            continue  # a date with no session body (conv-26): kept in the record's extra
        if not isinstance(body, list):
            raise SourceError(path, sample_id, body_key, f"expected a list of turns, got {type(body).__name__}")
        if date_key not in conversation:
            extra["has_date_time"] = False
        for name, table, key in (
            ("event_summary", events, f"events_session_{number}"),
            ("observation", observations, f"session_{number}_observation"),
        ):
            if key in table:
                extra[name] = table[key]
        session = schema.empty_session(
            body_key,
            [parse_turn(turn, roles, notes, path, sample_id, body_key, i) for i, turn in enumerate(body)],
        )
        session["date_time"] = conversation.get(date_key)
        session["timestamp"] = parse_timestamp(session["date_time"], notes)
        session["summary"] = summaries.get(f"session_{number}_summary")
        session["extra"] = schema.to_json(extra) if extra else None
        sessions.append(session)
    return sessions


def _unclaimed_session_keys(sample: dict, sessions: list[dict]) -> dict[str, Any]:
    """Summary, event or observation entries that name no session: kept whole in the record's extra."""
    numbers = {session["session_id"].removeprefix("session_") for session in sessions}
    claimed = {
        "event_summary": {f"events_session_{n}" for n in numbers},
        "observation": {f"session_{n}_observation" for n in numbers},
        "session_summary": {f"session_{n}_summary" for n in numbers},
    }
    unclaimed = {}
    for field, keys in claimed.items():
        table = sample.get(field)
        if table is None:
            unclaimed[f"{field}_absent"] = True
            continue
        rest = {key: value for key, value in table.items() if key not in keys}
        if rest:
            unclaimed[field] = rest
    return unclaimed


def parse_turn(turn: Any, roles: dict, notes: Notes, path: str, sample_id: str, session_id: str, i: int):
    where = f"{sample_id} {session_id} turn {i}"
    if not isinstance(turn, dict):
        raise SourceError(path, where, None, f"expected an object, got {type(turn).__name__}")
    speaker = _require(turn, "speaker", str, path, where)
    if speaker not in roles:
        raise SourceError(path, where, "speaker", f"{speaker!r} is neither speaker_a nor speaker_b")
    record = schema.empty_turn(
        _require(turn, "dia_id", str, path, where), speaker, roles[speaker], _require(turn, "text", str, path, where)
    )
    record["images"] = parse_images(turn, notes, path, where)
    rest = {key: value for key, value in turn.items() if key not in TURN_KEYS}
    if "re-download" in rest:
        notes.add("turn key 're-download' (undocumented) kept in the turn's extra")
    if rest:
        record["extra"] = schema.to_json(rest)
    return record


def parse_images(turn: dict, notes: Notes, path: str, where: str) -> list[dict[str, Any]]:
    """``img_url`` (a list), ``blip_caption`` and ``query`` → one image per URL, or one without a URL."""
    if not any(key in turn for key in ("img_url", "blip_caption", "query")):
        return []
    urls = turn.get("img_url")
    if urls is not None and not (isinstance(urls, list) and all(isinstance(u, str) for u in urls)):
        raise SourceError(path, where, "img_url", f"expected a list of strings, got {urls!r}")
    caption, query = turn.get("blip_caption"), turn.get("query")
    for field, value in (("blip_caption", caption), ("query", query)):
        if value is not None and not isinstance(value, str):
            raise SourceError(path, where, field, f"expected a string, got {type(value).__name__}")
    if not urls:
        notes.add("image caption without img_url")
        return [{"url": None, "caption": caption, "query": query}]
    return [{"url": url, "caption": caption, "query": query} for url in urls]


def parse_question(qa: Any, sample_id: str, position: int, turn_ids: set, notes: Notes, path: str) -> dict:
    where = f"{sample_id} qa {position}"
    if not isinstance(qa, dict):
        raise SourceError(path, where, None, f"expected an object, got {type(qa).__name__}")
    category_id = _require(qa, "category", int, path, where)
    if category_id not in CATEGORY_NAMES:
        raise SourceError(path, where, "category", f"unknown category {category_id!r}")
    question = schema.empty_question(f"{sample_id}:qa{position}", _require(qa, "question", str, path, where))
    question["category_id"] = category_id
    question["category"] = CATEGORY_NAMES[category_id]
    extra: dict[str, Any] = {"evidence": qa.get("evidence")}
    for field in ("answer", "adversarial_answer"):
        if field not in qa:
            continue
        value = qa[field]
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise SourceError(path, where, field, f"expected a string or number, got {type(value).__name__}")
        if not isinstance(value, str):
            notes.add(f"{type(value).__name__} {field} → string (raw kept in extra)")
            extra[f"raw_{field}"] = value
        question[field] = str(value)
    if category_id == 5 and question["answer"] is None:
        notes.add("adversarial question without answer (answer null)")
    ids, unreadable = parse_evidence(qa.get("evidence"), notes, path, where)
    missing = [turn_id for turn_id in ids if turn_id not in turn_ids]
    if missing:
        notes.add("evidence id that names no turn (moved to extra.evidence_not_found)", len(missing))
        extra["evidence_not_found"] = missing
    if unreadable:
        extra["evidence_unreadable"] = unreadable
    question["evidence_turn_ids"] = [turn_id for turn_id in ids if turn_id in turn_ids]
    question["evidence_session_ids"] = list(
        dict.fromkeys("session_" + turn_id[1:].split(":")[0] for turn_id in question["evidence_turn_ids"])
    )
    rest = {key: value for key, value in qa.items() if key not in QA_KEYS}
    extra.update(rest)
    question["extra"] = schema.to_json(extra)
    return question


def parse_evidence(evidence: Any, notes: Notes, path: str, where: str) -> tuple[list[str], list[str]]:
    """Evidence strings → normalized turn ids ("D8:6; D9:17" → two ids, "D30:05" → "D30:5").

    Returns the ids (deduplicated, in order) and the pieces that hold no id at all (e.g. "D").
    """
    if evidence is None:
        notes.add("question without evidence")
        return [], []
    if isinstance(evidence, str):
        evidence = [evidence]
    if not isinstance(evidence, list) or not all(isinstance(item, str) for item in evidence):
        raise SourceError(path, where, "evidence", f"expected a list of strings, got {evidence!r}")
    if not evidence:
        notes.add("question with empty evidence")
    ids: list[str] = []
    unreadable: list[str] = []
    for item in evidence:
        found = EVIDENCE_ID.findall(item)
        if not found:
            notes.add("evidence string with no turn id (kept in extra.evidence_unreadable)")
            unreadable.append(item)
            continue
        normalized = [f"D{int(session)}:{int(turn)}" for session, turn in found]
        if len(found) > 1:
            notes.add("evidence string holding several ids, split")
        elif normalized[0] != item:
            notes.add("evidence id rewritten (leading zero, stray colon or spaces)")
        ids.extend(normalized)
    return list(dict.fromkeys(ids)), unreadable
