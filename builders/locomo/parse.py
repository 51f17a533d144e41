"""LoCoMo (``locomo10.json``) → canonical conversation records.

Pure functions: one LoCoMo sample in, one canonical record out. Every field of the sample is reachable
in the record: typed where the schema has a place for it, raw in an ``extra`` otherwise, and every
rewritten value (integer answers, split or zero-padded evidence ids) keeps its raw form in ``extra``.
Malformed input raises :class:`SourceError` naming the file, the sample (and turn or question) and the
field, so that ``convhub check`` fails before a build writes anything.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from itertools import repeat
from pathlib import Path
from typing import Any

from dateutil import parser as dateparser

from builders.locomo.evidence import parse_evidence, parse_observations, session_ids_of
from builders.locomo.read import iter_samples
from convhub import schema
from convhub.errors import Notes, Reject, SourceError, raise_error, require

#: LoCoMo's own evaluation code (task_eval/evaluation.py) and most published results use these names.
#: The format document in shared/seeds calls 1 single-hop, 3 multi-hop and 4 open-domain instead.
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
ADVERSARIAL = 5

#: ``session_01`` is not a LoCoMo session key: it stays, untouched, in the conversation's extra.
SESSION_KEY = re.compile(r"^session_([1-9]\d*)$")
SESSION_DATE_KEY = re.compile(r"^session_([1-9]\d*)_date_time$")
IMAGE_KEYS = frozenset({"img_url", "blip_caption", "query"})
PLAIN_TURN_KEYS = frozenset({"speaker", "dia_id", "text"})
TURN_KEYS = PLAIN_TURN_KEYS | IMAGE_KEYS
QA_KEYS = {"question", "answer", "adversarial_answer", "evidence", "category"}
SESSION_TABLES = {
    "event_summary": "events_session_{}",
    "observation": "session_{}_observation",
    "session_summary": "session_{}_summary",
}
SAMPLE_KEYS = {"sample_id", "conversation", "qa", *SESSION_TABLES}
SPEAKER_KEYS = ("speaker_a", "speaker_b")


def parse_file(path: str | Path, notes: Notes, reject: Reject = raise_error) -> Iterator[dict[str, Any]]:
    """Canonical records of one file, in file order; the file's stem is their ``subset``.

    A bad sample goes to ``reject`` with the sample itself (which raises by default); its normalization
    counts are kept only when it converts.
    """
    return (record for _, record in parse_indexed(path, notes, reject))


def parse_indexed(
    path: str | Path, notes: Notes, reject: Reject = raise_error, recover: bool = False
) -> Iterator[tuple[int, dict[str, Any]]]:
    """:func:`parse_file`'s records with their sample's position in the file (errors name a sample by it
    where its id cannot be trusted). With ``recover`` a break in the file's list goes to ``reject`` with the
    bytes it skipped (scope ``"span"``, and ``records``: the samples they held), and reading goes on."""
    subset = Path(path).stem
    seen: set[str] = set()

    def on_break(error: SourceError, raw: bytes, held: int) -> None:
        reject(error, raw, "span", records=held)

    for index, sample in iter_samples(path, on_break if recover else None):
        counted = Notes()
        try:
            if not isinstance(sample, dict):
                raise SourceError(path, index, None, f"expected an object, got {type(sample).__name__}")
            record = parse_sample(sample, subset, counted, path=str(path), index=index)
            if record["conversation_id"] in seen:
                raise SourceError(
                    path, index, "sample_id", f"duplicate sample_id {record['conversation_id']!r}"
                )
        except SourceError as error:
            reject(error, sample)
            continue
        seen.add(record["conversation_id"])
        notes.update(counted)
        yield index, record


def _optional(
    mapping: dict, key: str, kind: type, path: str, record: str | int, field: str | None = None
) -> Any:
    return require(mapping, key, kind, path, record, field) if key in mapping else None


#: How every date_time of locomo10.json is written. ``strptime`` reads it in 22 µs, dateutil in 240 µs: over
#: the 5,440 sessions of the benchmark's scale-0.2 input, 1.2 s of a 10-14 s sessions build.
LOCOMO_DATE_FORMAT = "%I:%M %p on %d %B, %Y"


def parse_timestamp(date_time: str | None, notes: Notes) -> datetime | None:
    """LoCoMo writes "1:56 pm on 8 May, 2023"; anything unreadable stays null (the raw string is kept).

    The exact format is tried first; dateutil reads every other spelling (and gives the same datetime
    for the exact one: tests/locomo checks it on every date of the real file).
    """
    if not date_time:
        return None
    try:
        return datetime.strptime(date_time, LOCOMO_DATE_FORMAT)
    except ValueError:
        pass
    try:
        return dateparser.parse(date_time.replace(" on ", " "), dayfirst=True)
    except (ValueError, OverflowError):
        notes.add("session date_time that is not a date (timestamp left null)")
        return None


def parse_sample(sample: dict, subset: str, notes: Notes, path: str = "<memory>", index: int = 0) -> dict:
    """One LoCoMo sample → one canonical record: its sessions, questions and whatever no field claims."""
    sample_id = require(sample, "sample_id", str, path, index)
    conversation = require(sample, "conversation", dict, path, sample_id)
    speakers = [
        require(conversation, key, str, path, sample_id, f"conversation.{key}") for key in SPEAKER_KEYS
    ]
    if speakers[0] == speakers[1]:
        raise SourceError(
            path, sample_id, "conversation.speaker_b", f"same name as speaker_a ({speakers[0]!r})"
        )
    roles = {speakers[0]: "user", speakers[1]: "assistant"}
    tables = {name: _optional(sample, name, dict, path, sample_id) for name in SESSION_TABLES}
    sessions = parse_sessions(conversation, tables, roles, notes, path, sample_id)
    turn_ids = {turn["turn_id"] for session in sessions for turn in session["turns"]}
    observations = tables["observation"] or {}
    for session in sessions:  # once every turn id is known: an observation may cite a later session
        key = SESSION_TABLES["observation"].format(session["session_id"].removeprefix("session_"))
        if key in observations:
            parse_observations(observations[key], turn_ids, notes, path, sample_id, f"observation.{key}")
    questions = [
        parse_question(qa, sample_id, position, turn_ids, notes, path)
        for position, qa in enumerate(require(sample, "qa", list, path, sample_id))
    ]
    leftovers = {key: value for key, value in sample.items() if key not in SAMPLE_KEYS}
    leftovers.update(_unclaimed_session_entries(tables, sessions, notes))
    conversation_leftovers = _conversation_leftovers(conversation, sessions, notes)
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


def _conversation_leftovers(conversation: dict, sessions: list[dict], notes: Notes) -> dict[str, Any]:
    """Conversation keys no session claims, e.g. conv-26's dates of sessions that have no body."""
    session_ids = {session["session_id"] for session in sessions}
    leftovers = {}
    for key, value in conversation.items():
        date = SESSION_DATE_KEY.match(key)
        if (
            key in SPEAKER_KEYS
            or SESSION_KEY.match(key)
            or (date and f"session_{date.group(1)}" in session_ids)
        ):
            continue
        if date:
            notes.add("session date with no session body (kept in the conversation's extra)")
        leftovers[key] = value
    return leftovers


def _session_numbers(conversation: dict) -> list[int]:
    numbers = set()
    for key in conversation:
        match = SESSION_KEY.match(key) or SESSION_DATE_KEY.match(key)
        if match:
            numbers.add(int(match.group(1)))
    return sorted(numbers)


def parse_sessions(
    conversation: dict, tables: dict[str, dict | None], roles: dict, notes: Notes, path: str, sample_id: str
) -> list[dict]:
    """One session per ``session_N`` key, in numeric order, with its date, summary and raw side tables."""
    events = tables.get("event_summary") or {}
    observations = tables.get("observation") or {}
    summaries = tables.get("session_summary") or {}
    sessions = []
    for number in _session_numbers(conversation):
        body_key, date_key = f"session_{number}", f"session_{number}_date_time"
        if body_key not in conversation:
            continue  # a date with no session body (conv-26): kept in the conversation's extra
        body = require(conversation, body_key, list, path, sample_id, f"conversation.{body_key}")
        extra: dict[str, Any] = {}
        if date_key not in conversation:
            notes.add("session without date_time")
            extra["has_date_time"] = False
        event_key = SESSION_TABLES["event_summary"].format(number)
        if event_key in events:
            parse_events(events[event_key], path, sample_id, f"event_summary.{event_key}")
            extra["event_summary"] = events[event_key]
        observation_key = SESSION_TABLES["observation"].format(number)
        if observation_key in observations:
            extra["observation"] = observations[observation_key]
        session = schema.empty_session(
            body_key,
            [parse_turn(turn, roles, notes, path, sample_id, body_key, i) for i, turn in enumerate(body)],
        )
        session["date_time"] = _optional(
            conversation, date_key, str, path, sample_id, f"conversation.{date_key}"
        )
        session["timestamp"] = parse_timestamp(session["date_time"], notes)
        summary_key = SESSION_TABLES["session_summary"].format(number)
        session["summary"] = _optional(
            summaries, summary_key, str, path, sample_id, f"session_summary.{summary_key}"
        )
        session["extra"] = schema.to_json(extra) if extra else None
        sessions.append(session)
    return sessions


def _unclaimed_session_entries(tables: dict[str, dict | None], sessions: list[dict], notes: Notes) -> dict:
    """Summary, event or observation entries that name no session: kept whole in the record's extra, under
    the table's own name.

    An absent table is that name with ``null`` (a source table is an object, so it is never null), so that an
    export can leave it out again. convhub writes only the source's own key names into a sample's extra, and
    only names the parser claims: no unknown key of the sample can collide with them.
    """
    numbers = [session["session_id"].removeprefix("session_") for session in sessions]
    unclaimed: dict[str, Any] = {}
    for name, key_format in SESSION_TABLES.items():
        table = tables[name]
        if table is None:
            notes.add(f"sample without {name}")
            unclaimed[name] = None
            continue
        claimed = {key_format.format(number) for number in numbers}
        rest = {key: value for key, value in table.items() if key not in claimed}
        if rest:
            notes.add(f"{name} entry naming no session (kept in the conversation's extra)", len(rest))
            unclaimed[name] = rest
    return unclaimed


def parse_turn(turn: Any, roles: dict, notes: Notes, path: str, sample_id: str, session_id: str, i: int):
    """One turn: speaker, dia_id and text typed; image keys into ``images``; any other key (LoCoMo's
    undocumented ``re-download``) and an empty ``img_url`` kept in the turn's extra.

    Most turns are a speaker, a dia_id and a text, nothing else: they take no error-message string and no
    look at their other keys. A build parses millions; without this path LoCoMo's sessions build of the
    benchmark's input took 1.35x as long (5.3-5.6 s against 3.9-4.1 s for one 55 MB file).
    """
    try:
        speaker, turn_id, text = turn["speaker"], turn["dia_id"], turn["text"]
        role = roles[speaker]  # a str: roles' keys are the two speakers' names
    except (KeyError, TypeError):  # a key missing, or not a dict: _checked_turn names what is wrong
        role = None
    if role is not None and isinstance(turn, dict) and isinstance(turn_id, str) and isinstance(text, str):
        record = schema.empty_turn(turn_id, speaker, role, text)
    else:
        record = _checked_turn(turn, roles, path, f"{sample_id} {session_id} turn {i}")
    if turn.keys() <= PLAIN_TURN_KEYS:
        return record
    where = f"{sample_id} {session_id} turn {i}"
    record["images"] = parse_images(turn, notes, path, where)
    rest = {key: value for key, value in turn.items() if key not in TURN_KEYS}
    if "img_url" in turn and turn["img_url"] in ([], None):
        rest["img_url"] = turn["img_url"]  # no image to hold it: keep the empty list (or null) itself
    if "re-download" in rest:
        notes.add("turn key 're-download' (undocumented) kept in the turn's extra")
    if rest:
        record["extra"] = schema.to_json(rest)
    return record


def _checked_turn(turn: Any, roles: dict, path: str, where: str) -> dict:
    """The turn's record, or the SourceError naming what is wrong with it (checked in this order)."""
    if not isinstance(turn, dict):
        raise SourceError(path, where, None, f"expected an object, got {type(turn).__name__}")
    speaker = require(turn, "speaker", str, path, where)
    if speaker not in roles:
        raise SourceError(path, where, "speaker", f"{speaker!r} is neither speaker_a nor speaker_b")
    return schema.empty_turn(
        require(turn, "dia_id", str, path, where),
        speaker,
        roles[speaker],
        require(turn, "text", str, path, where),
    )


def parse_images(turn: dict, notes: Notes, path: str, where: str) -> list[dict[str, Any]]:
    """``img_url`` (a list), ``blip_caption`` and ``query`` → one image per URL, or one without a URL.

    ``text`` is left as the speaker wrote it: the caption is not inlined.
    """
    if turn.keys().isdisjoint(IMAGE_KEYS):
        return []
    urls = turn.get("img_url")
    if urls is not None and not (isinstance(urls, list) and all(map(isinstance, urls, repeat(str)))):
        raise SourceError(path, where, "img_url", f"expected a list of strings, got {urls!r}")
    caption = _optional(turn, "blip_caption", str, path, where)
    query = _optional(turn, "query", str, path, where)
    if not urls:
        if caption is None and query is None:
            notes.add("empty img_url with no caption or query (kept in the turn's extra)")
            return []
        notes.add("image caption or query without img_url (url null)")
        return [{"url": None, "caption": caption, "query": query}]
    if len(urls) > 1:
        notes.add("turn with several img_url (caption and query repeated on each image)")
    return [{"url": url, "caption": caption, "query": query} for url in urls]


def parse_question(qa: Any, sample_id: str, position: int, turn_ids: set, notes: Notes, path: str) -> dict:
    where = f"{sample_id} qa {position}"
    if not isinstance(qa, dict):
        raise SourceError(path, where, None, f"expected an object, got {type(qa).__name__}")
    category_id = require(qa, "category", int, path, where)
    if category_id not in CATEGORY_NAMES:
        raise SourceError(path, where, "category", f"unknown category {category_id!r}")
    question = schema.empty_question(f"{sample_id}:qa{position}", require(qa, "question", str, path, where))
    question["category_id"] = category_id
    question["category"] = CATEGORY_NAMES[category_id]
    extra: dict[str, Any] = {}
    if "evidence" in qa:
        extra["evidence"] = qa["evidence"]
    for field in ("answer", "adversarial_answer"):
        if field not in qa:
            continue
        value = qa[field]
        if isinstance(value, str):
            question[field] = value
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SourceError(path, where, field, f"expected a string or number, got {type(value).__name__}")
        notes.add(f"{type(value).__name__} {field} → string (raw kept in extra.{field})")
        extra[field] = value
        question[field] = str(value)
    _count_answers(question, notes)
    ids, unreadable = parse_evidence(qa.get("evidence"), notes, path, where)
    found = [turn_id for turn_id in ids if turn_id in turn_ids]
    missing = [turn_id for turn_id in ids if turn_id not in turn_ids]
    if missing:
        notes.add("QA evidence id that names no turn (moved to unresolved_evidence)", len(missing))
    question["unresolved_evidence"] = missing + unreadable
    question["evidence_turn_ids"] = found
    question["evidence_session_ids"] = session_ids_of(found)
    extra.update((key, value) for key, value in qa.items() if key not in QA_KEYS)
    question["extra"] = schema.to_json(extra) if extra else None
    return question


def _count_answers(question: dict, notes: Notes) -> None:
    if question["category_id"] == ADVERSARIAL:
        if question["answer"] is None:
            notes.add("adversarial question without answer (answer null)")
        else:
            notes.add("adversarial question with both answer and adversarial_answer (both kept)")
    elif question["answer"] is None:
        notes.add("non-adversarial question without answer (answer null)")


def parse_events(entry: Any, path: str, sample_id: str, field: str) -> list[dict[str, Any]]:
    """One session's ``event_summary`` entry ({speaker: [event, ...], "date": str}) → typed rows."""
    if not isinstance(entry, dict):
        raise SourceError(
            path, sample_id, field, f"expected an object of speakers, got {type(entry).__name__}"
        )
    date = _optional(entry, "date", str, path, sample_id, f"{field}.date")
    rows = []
    for speaker, events in entry.items():
        if speaker == "date":
            continue
        if not (isinstance(events, list) and all(isinstance(event, str) for event in events)):
            raise SourceError(
                path, sample_id, f"{field}.{speaker}", f"expected a list of strings, got {events!r}"
            )
        rows.extend(
            {"speaker": speaker, "position": position, "event": event, "date": date}
            for position, event in enumerate(events)
        )
    return rows
