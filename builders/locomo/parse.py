"""LoCoMo samples → canonical records, one sample in, one record out. Every field of a sample is reachable in
its record: typed where the schema has a place, raw in an ``extra`` otherwise (rewritten values too: integer
answers, split or zero-padded evidence ids). A malformed sample raises :class:`FieldError` naming a path into
it (``qa[3].category``); the engine's per-record loop adds file and record."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import pyarrow.compute as pc
from dateutil import parser as dateparser

from convhub import schema
from convhub.builders.locomo.evidence import parse_evidence, parse_observations, session_ids_of
from convhub.engine.inputs.listing import JSON
from convhub.engine.readers.contract import Place
from convhub.engine.readers.long_lists import JSON_LIST, LongLists
from convhub.engine.writers.arrow_rows import ArrowList, session_turns
from convhub.errors import FieldError, Notes, require_field

#: LoCoMo's own evaluation code (task_eval/evaluation.py) and most published results use these names.
#: The format document in shared/seeds calls 1 single-hop, 3 multi-hop and 4 open-domain instead.
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
ADVERSARIAL = 5
#: ``session_01`` is not a LoCoMo session key: it stays, untouched, in the conversation's extra.
SESSION_KEY = re.compile(r"^session_([1-9]\d*)$")
SESSION_DATE_KEY = re.compile(r"^session_([1-9]\d*)_date_time$")
#: Where a large sample's long lists are, read lazily (``readers.long_lists``): its sessions' turns.
LONG_LISTS: LongLists = (("conversation", SESSION_KEY),)
IMAGE_KEYS = frozenset({"img_url", "blip_caption", "query"})
TURN_KEYS = frozenset({"speaker", "dia_id", "text"}) | IMAGE_KEYS
QA_KEYS = {"question", "answer", "adversarial_answer", "evidence", "category"}
#: Each per-session side table and how it names a session's entry (in this order: events, observations, summary).
SESSION_TABLES = {
    "event_summary": "events_session_{}",
    "observation": "session_{}_observation",
    "session_summary": "session_{}_summary",
}
SAMPLE_KEYS = {"sample_id", "conversation", "qa", *SESSION_TABLES}
ROLES = {"speaker_a": "user", "speaker_b": "assistant"}
SPEAKER_KEYS = tuple(ROLES)


def convert(sample: Any, place: Place, notes: Notes) -> dict:
    """The engine's conversion of one sample read at ``place``: its subset is its file's stem."""
    return parse_sample(sample, JSON.stem(place.name), notes)


def parse_timestamp(date_time: str | None, notes: Notes) -> datetime | None:
    """LoCoMo writes "1:56 pm on 8 May, 2023"; anything unreadable stays null (the raw string is kept)."""
    if not date_time:
        return None
    try:
        return dateparser.parse(date_time.replace(" on ", " "), dayfirst=True)
    except (ValueError, OverflowError):
        notes.add("session date_time that is not a date (timestamp left null)")
        return None


class TurnIds:
    """The turn ids of a conversation's sessions, for evidence to be looked up in: a set of the ids of the
    sessions whose turns are dicts, and the ``turn_id`` column of those held as Arrow (``ArrowList``: a session of
    a million tiny turns), looked in with Arrow, not made a Python string per turn."""

    def __init__(self, sessions: list[schema.Session]) -> None:
        self.in_dicts: set[str] = set()
        self.columns: list = []
        for session in sessions:
            turns = session["turns"]
            if isinstance(turns, ArrowList):
                self.columns.append(turns.array.field("turn_id"))
            else:
                self.in_dicts.update(turn["turn_id"] for turn in turns)

    def __contains__(self, turn_id: object) -> bool:
        if turn_id in self.in_dicts:
            return True
        return isinstance(turn_id, str) and any(
            pc.index(column, turn_id).as_py() >= 0 for column in self.columns
        )


def parse_sample(sample: Any, subset: str, notes: Notes) -> dict:
    """One LoCoMo sample → one canonical record: its sessions, questions and whatever no field claims."""
    if not isinstance(sample, dict):
        raise FieldError(None, f"expected an object, got {type(sample).__name__}")
    sample_id = require_field(sample, "sample_id", str)
    conversation = require_field(sample, "conversation", dict)
    speakers = [require_field(conversation, key, str, "conversation") for key in SPEAKER_KEYS]
    if speakers[0] == speakers[1]:
        raise FieldError("conversation.speaker_b", f"same name as speaker_a ({speakers[0]!r})")
    tables = {name: require_field(sample, name, dict, optional=True) for name in SESSION_TABLES}
    sessions = parse_sessions(conversation, tables, dict(zip(speakers, ROLES.values(), strict=True)), notes)
    turn_ids = TurnIds(sessions)
    observations = tables["observation"] or {}
    for session in sessions:  # once every turn id is known: an observation may cite a later session
        key = SESSION_TABLES["observation"].format(session["session_id"].removeprefix("session_"))
        if key in observations:
            parse_observations(observations[key], turn_ids, notes, f"observation.{key}")
    qas = enumerate(require_field(sample, "qa", list))
    questions = [parse_question(qa, sample_id, position, turn_ids, notes) for position, qa in qas]
    leftovers = {key: value for key, value in sample.items() if key not in SAMPLE_KEYS}
    leftovers.update(_unclaimed_session_entries(tables, sessions, notes))
    if conversation_leftovers := _conversation_leftovers(conversation, sessions, notes):
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


def _conversation_leftovers(
    conversation: dict, sessions: list[schema.Session], notes: Notes
) -> dict[str, Any]:
    """Conversation keys no session claims, e.g. conv-26's dates of sessions that have no body."""
    claimed = {*SPEAKER_KEYS}.union(*({s["session_id"], f"{s['session_id']}_date_time"} for s in sessions))
    leftovers = {key: value for key, value in conversation.items() if key not in claimed}
    if dates := sum(1 for key in leftovers if SESSION_DATE_KEY.match(key)):
        notes.add("session date with no session body (kept in the conversation's extra)", dates)
    return leftovers


def parse_sessions(conversation: dict, tables: dict, roles: dict, notes: Notes) -> list[schema.Session]:
    """One session per ``session_N`` key, in numeric order, with its date, summary and raw side tables."""
    events, observations, summaries = (table or {} for table in tables.values())
    numbers = {int(match.group(1)) for key in conversation if (match := SESSION_KEY.match(key))}
    sessions: list[schema.Session] = []
    for number in sorted(numbers):
        body_key, date_key = f"session_{number}", f"session_{number}_date_time"
        body = conversation[body_key]  # (a list, or a long one's LazyJsonArray)
        if not isinstance(body, JSON_LIST):
            raise FieldError(f"conversation.{body_key}", f"expected list, got {type(body).__name__}")
        event_key, observation_key, summary_key = (key.format(number) for key in SESSION_TABLES.values())
        extra: dict[str, Any] = {}
        if date_key not in conversation:
            notes.add("session without date_time")
            extra["has_date_time"] = False
        if event_key in events:
            parse_events(events[event_key], f"event_summary.{event_key}")
            extra["event_summary"] = events[event_key]
        if observation_key in observations:
            extra["observation"] = observations[observation_key]
        turns = session_turns(
            parse_turn(turn, roles, notes, f"conversation.{body_key}[{i}]") for i, turn in enumerate(body)
        )
        session = schema.empty_session(body_key, turns)
        session["date_time"] = require_field(conversation, date_key, str, "conversation", optional=True)
        session["timestamp"] = parse_timestamp(session["date_time"], notes)
        session["summary"] = require_field(summaries, summary_key, str, "session_summary", optional=True)
        session["extra"] = schema.to_json(extra) if extra else None
        sessions.append(session)
    return sessions


def _unclaimed_session_entries(
    tables: dict[str, dict | None], sessions: list[schema.Session], notes: Notes
) -> dict:
    """Side-table entries that name no session, kept whole under the table's name; an absent table is that name
    with null (a source table is never null), so that an export leaves it out again."""
    numbers = [session["session_id"].removeprefix("session_") for session in sessions]
    unclaimed: dict[str, Any] = {}
    for name, key_format in SESSION_TABLES.items():
        table = tables[name]
        if table is None:
            notes.add(f"sample without {name}")
            unclaimed[name] = None
            continue
        claimed = {key_format.format(number) for number in numbers}
        if rest := {key: value for key, value in table.items() if key not in claimed}:
            notes.add(f"{name} entry naming no session (kept in the conversation's extra)", len(rest))
            unclaimed[name] = rest
    return unclaimed


def parse_turn(turn: Any, roles: dict, notes: Notes, field: str) -> schema.Turn:
    """One turn (at ``field``): speaker, dia_id and text typed, image keys into ``images``; other keys
    (LoCoMo's undocumented ``re-download``) and an empty ``img_url`` kept in the turn's extra."""
    if not isinstance(turn, dict):
        raise FieldError(field, f"expected an object, got {type(turn).__name__}")
    speaker = require_field(turn, "speaker", str, field)
    if speaker not in roles:
        raise FieldError(f"{field}.speaker", f"{speaker!r} is neither speaker_a nor speaker_b")
    dia_id, text = (require_field(turn, key, str, field) for key in ("dia_id", "text"))
    record = schema.empty_turn(dia_id, speaker, roles[speaker], text)
    record["images"] = parse_images(turn, notes, field)
    rest = {key: value for key, value in turn.items() if key not in TURN_KEYS}
    if "img_url" in turn and turn["img_url"] in ([], None):
        rest["img_url"] = turn["img_url"]  # no image to hold it: keep the empty list (or null) itself
    if "re-download" in rest:
        notes.add("turn key 're-download' (undocumented) kept in the turn's extra")
    record["extra"] = schema.to_json(rest) if rest else None
    return record


def parse_images(turn: dict, notes: Notes, field: str) -> list[schema.Image]:
    """``img_url`` (a list), ``blip_caption`` and ``query`` → one image per URL, or one without a URL (the
    turn's ``text`` keeps no caption)."""
    if turn.keys().isdisjoint(IMAGE_KEYS):
        return []
    urls = turn.get("img_url")
    if urls is not None and not (isinstance(urls, list) and all(isinstance(url, str) for url in urls)):
        raise FieldError(f"{field}.img_url", f"expected a list of strings, got {urls!r}")
    caption = require_field(turn, "blip_caption", str, field, optional=True)
    query = require_field(turn, "query", str, field, optional=True)
    if not urls:
        if caption is None and query is None:
            notes.add("empty img_url with no caption or query (kept in the turn's extra)")
            return []
        notes.add("image caption or query without img_url (url null)")
        return [{"url": None, "caption": caption, "query": query}]
    if len(urls) > 1:
        notes.add("turn with several img_url (caption and query repeated on each image)")
    return [{"url": url, "caption": caption, "query": query} for url in urls]


def parse_question(
    qa: Any, sample_id: str, position: int, turn_ids: set | TurnIds, notes: Notes
) -> schema.Question:
    """``qa[position]`` → a question: category named, answers as strings (a number's raw value in extra),
    evidence normalized into the turn ids it names and the pieces that name none."""
    field = f"qa[{position}]"
    if not isinstance(qa, dict):
        raise FieldError(field, f"expected an object, got {type(qa).__name__}")
    category_id = require_field(qa, "category", int, field)
    if category_id not in CATEGORY_NAMES:
        raise FieldError(f"{field}.category", f"unknown category {category_id!r}")
    question = schema.empty_question(f"{sample_id}:qa{position}", require_field(qa, "question", str, field))
    question.update(category_id=category_id, category=CATEGORY_NAMES[category_id])
    extra = {"evidence": qa["evidence"]} if "evidence" in qa else {}
    for key in ("answer", "adversarial_answer"):
        value = qa.get(key)
        if key not in qa or isinstance(value, str):
            question[key] = value
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            raise FieldError(f"{field}.{key}", f"expected a string or number, got {type(value).__name__}")
        else:
            notes.add(f"{type(value).__name__} {key} → string (raw kept in extra.{key})")
            question[key], extra[key] = str(value), value
    if category_id == ADVERSARIAL and question["answer"] is None:
        notes.add("adversarial question without answer (answer null)")
    elif category_id == ADVERSARIAL:
        notes.add("adversarial question with both answer and adversarial_answer (both kept)")
    elif question["answer"] is None:
        notes.add("non-adversarial question without answer (answer null)")
    ids, unreadable = parse_evidence(qa.get("evidence"), notes, f"{field}.evidence")
    found = [turn_id for turn_id in ids if turn_id in turn_ids]
    if missing := [turn_id for turn_id in ids if turn_id not in turn_ids]:
        notes.add("QA evidence id that names no turn (moved to unresolved_evidence)", len(missing))
    question["unresolved_evidence"] = missing + unreadable
    question["evidence_turn_ids"], question["evidence_session_ids"] = found, session_ids_of(found)
    extra.update((key, value) for key, value in qa.items() if key not in QA_KEYS)
    question["extra"] = schema.to_json(extra) if extra else None
    return question


def parse_events(entry: Any, field: str) -> list[dict[str, Any]]:
    """One session's ``event_summary`` entry ({speaker: [event, ...], "date": str}) → typed rows."""
    if not isinstance(entry, dict):
        raise FieldError(field, f"expected an object of speakers, got {type(entry).__name__}")
    date = require_field(entry, "date", str, field, optional=True)
    rows = []
    for speaker, events in entry.items():
        if speaker == "date":
            continue
        if not (isinstance(events, list) and all(isinstance(event, str) for event in events)):
            raise FieldError(f"{field}.{speaker}", f"expected a list of strings, got {events!r}")
        rows.extend(
            {"speaker": speaker, "position": position, "event": event, "date": date}
            for position, event in enumerate(events)
        )
    return rows
