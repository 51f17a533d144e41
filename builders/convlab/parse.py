"""ConvLab-3 unified datasets (``dialogues.json``, ``ontology.json``, databases) → canonical records and rows.

Pure functions. Every ConvLab dialogue becomes one canonical record with one session; every field is reachable:
typed where the shared schema has a place (acts, state, speaker, utterance), raw in an ``extra`` otherwise. Each
``*_to_source`` function is the exact inverse of its parser, so that ``convhub export`` (``convhub.builders.convlab.export``)
rebuilds ``dialogues.json`` and ``ontology.json`` as equal JSON values; the parsers check that inverse on every
value and keep the raw value in ``extra`` whenever the typed form would not give it back.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from convhub import schema
from convhub.engine.readers.contract import Place
from convhub.engine.writers.output_shards import RESERVED_SPLITS, SPLIT_NAME
from convhub.errors import Notes, SourceError, require

ACT_KINDS = ("categorical", "non-categorical", "binary")
ROLES = {"user": "user", "system": "assistant"}
#: ConvLab-3 datasets that are not English; every other one is.
LANGUAGES = {"crosswoz": "zh"}
TURN_KEYS = {"speaker", "utterance", "utt_idx", "dialogue_acts", "state"}
DIALOGUE_KEYS = {"dataset", "data_split", "dialogue_id", "turns"}
#: Keys convhub itself writes into a turn's ``extra`` (its markers). A source key never lands on one: see
#: :func:`escape_turn_key`.
ACTS_ABSENT = "dialogue_acts_absent"
ACT_KINDS_KEY = "dialogue_acts_kinds"
STATE_EMPTY_DOMAINS = "state_empty_domains"
TURN_MARKERS = frozenset((ACTS_ABSENT, ACT_KINDS_KEY, STATE_EMPTY_DOMAINS))
_ESCAPE = "\\"


# -- dialogues ---------------------------------------------------------------------------------


def split_checker(path: str) -> Callable[[Any, int], str]:
    """What the index of one ``dialogues.json`` needs of each dialogue, as ``(dialogue, position) → its split``: an
    object with a usable split and a ``dialogue_id`` no earlier dialogue of the file has (else a SourceError)."""
    seen: set[str] = set()

    def split_of(dialogue: Any, position: int) -> str:
        if not isinstance(dialogue, dict):
            problem = f"expected a dialogue object, got {type(dialogue).__name__}"
            raise SourceError(path, position, None, problem)
        split = require(dialogue, "data_split", str, path, position)
        if not SPLIT_NAME.fullmatch(split):
            raise SourceError(path, position, "data_split", f"{split!r} is not a usable split name")
        if split.lower() in RESERVED_SPLITS:
            named = dialogue.get("dialogue_id")
            named = f"dialogue {named!r}: " if isinstance(named, str) else ""
            problem = f"{named}{split!r} is a split name datasets reserves (the union of every split)"
            raise SourceError(path, position, "data_split", problem)
        dialogue_id = require(dialogue, "dialogue_id", str, path, position)
        if dialogue_id in seen:
            raise SourceError(path, position, "dialogue_id", f"duplicate dialogue_id {dialogue_id!r}")
        seen.add(dialogue_id)
        return split

    return split_of


def convert(dialogue: dict, place: Place, notes: Notes) -> dict:
    """The engine's conversion of one dialogue read at ``place``: its subset is the input's name."""
    return parse_dialogue(dialogue, place.name, notes, place.file)


def parse_dialogue(dialogue: dict, subset: str, notes: Notes, path: str = "<memory>") -> dict:
    """One ConvLab dialogue (an object with a string id and split: :func:`split_checker` read it) → one canonical
    record (one session holding every turn)."""
    dialogue_id = dialogue["dialogue_id"]
    dataset = require(dialogue, "dataset", str, path, dialogue_id)
    raw_turns = require(dialogue, "turns", list, path, dialogue_id)
    turns = [parse_turn(turn, notes, path, dialogue_id, index) for index, turn in enumerate(raw_turns)]
    extra = {key: value for key, value in dialogue.items() if key not in DIALOGUE_KEYS}
    if dataset != subset:
        notes.add("dialogue whose `dataset` differs from its folder name (kept in extra.dataset)")
        extra["dataset"] = dataset
    if "goal" not in dialogue:
        notes.add("dialogue without goal")
    if not turns:
        notes.add("dialogue without turns")
    elif len(turns) == 1:
        notes.add("dialogue with a single turn")
    session = schema.empty_session(dialogue_id, turns)
    return {
        "conversation_id": dialogue_id,
        "source": "convlab",
        "subset": subset,
        "language": LANGUAGES.get(subset, "en"),
        "speakers": list(dict.fromkeys(turn["speaker"] for turn in turns)),
        "sessions": [session],
        "questions": [],
        "extra": schema.to_json(extra) if extra else None,
    }


def parse_turn(turn: Any, notes: Notes, path: str, dialogue_id: str, index: int) -> schema.Turn:
    where = f"{dialogue_id} turn {index}"
    if not isinstance(turn, dict):
        raise SourceError(path, where, None, f"expected a turn object, got {type(turn).__name__}")
    speaker = require(turn, "speaker", str, path, where)
    if speaker not in ROLES:
        raise SourceError(path, where, "speaker", f"{speaker!r} is neither 'user' nor 'system'")
    utterance = require(turn, "utterance", str, path, where)
    utt_idx = require(turn, "utt_idx", int, path, where)
    if utt_idx != index:
        notes.add("utt_idx that differs from the turn's position (turn_id keeps utt_idx)")
    if not utterance:
        notes.add("empty utterance")
    record = schema.empty_turn(str(utt_idx), speaker, ROLES[speaker], utterance)
    extra = {escape_turn_key(key): value for key, value in turn.items() if key not in TURN_KEYS}
    if "dialogue_acts" in turn:
        record["dialogue_acts"] = parse_acts(turn["dialogue_acts"], extra, notes)
    else:
        notes.add("turn without dialogue_acts (extra.dialogue_acts_absent)")
        extra[ACTS_ABSENT] = True
    if "state" in turn:
        record["state"] = parse_state(turn["state"], extra, notes)
    record["extra"] = schema.to_json(extra) if extra else None
    return record


def escape_turn_key(key: str) -> str:
    """A source turn key as the turn's ``extra`` holds it: a marker's name, after any number of ``\\``, gets
    one ``\\`` more (``state_empty_domains`` → ``\\state_empty_domains``), every other key stays as it is. So
    markers (bare) and source keys never share a name in ``extra``, and :func:`unescape_turn_key` gives every
    source key back; no key is refused (normal ConvLab turns have none such: their ``extra`` is unchanged)."""
    return _ESCAPE + key if key.lstrip(_ESCAPE) in TURN_MARKERS else key


def unescape_turn_key(key: str) -> str:
    """The inverse of :func:`escape_turn_key`, for every key of ``extra`` but the (bare) markers."""
    return key[len(_ESCAPE) :] if key.startswith(_ESCAPE) and key.lstrip(_ESCAPE) in TURN_MARKERS else key


def parse_acts(acts: Any, extra: dict, notes: Notes) -> list[schema.DialogueAct]:
    """``{kind: [act]}`` → typed acts in source order; the raw value is kept in ``extra`` unless
    :func:`acts_to_source` gives it back (a test holds the two consistent)."""
    kinds = list(acts) if isinstance(acts, dict) else []
    typed = [
        _typed_act(kind, act)
        for kind in kinds
        if isinstance(acts[kind], list)
        for act in acts[kind]
        if isinstance(act, dict)
    ]
    if set(kinds) != set(ACT_KINDS):
        notes.add("dialogue_acts without all three kinds (its kinds kept in extra.dialogue_acts_kinds)")
        extra[ACT_KINDS_KEY] = kinds
    if acts_to_source(typed, kinds) != acts:
        notes.add("dialogue_acts not representable as typed acts (raw kept in the turn's extra)")
        extra["dialogue_acts"] = acts
        extra.pop(ACT_KINDS_KEY, None)
        return typed
    for act in typed:
        if act["type"] == "non-categorical" and act["start"] is None:
            notes.add("non-categorical act without start/end (start and end null)")
        if act["type"] == "binary" and (act["domain"] == "" or act["slot"] == ""):
            notes.add("binary act with an empty domain or slot")
    return typed


def _typed_act(kind: str, act: dict) -> schema.DialogueAct:
    """A source act's fields that fit their typed columns (others are None: the rebuild then differs)."""
    start, end = (act.get(key) if _is_span(act.get(key)) else None for key in ("start", "end"))
    return {
        "type": kind,
        "intent": _text(act.get("intent")),
        "domain": _text(act.get("domain")),
        "slot": _text(act.get("slot")),
        "value": _text(act.get("value")),
        "start": start,
        "end": end,
    }


def _is_span(value: Any) -> bool:
    """Whether a source ``start``/``end`` fits the typed act's int32 field (a bool is not a span)."""
    return isinstance(value, int) and not isinstance(value, bool) and -(2**31) <= value < 2**31


def acts_to_source(typed: Sequence[Mapping[str, Any]], kinds: Iterable[str] = ACT_KINDS) -> dict:
    """Typed acts → ConvLab's ``{kind: [act]}`` (absent ``start``/``end`` and ``value`` stay absent)."""
    acts: dict[str, list[dict]] = {kind: [] for kind in kinds}
    for act in typed:
        fields = ("intent", "domain", "slot", "value", "start", "end")
        acts.setdefault(act["type"], []).append({key: act[key] for key in fields if act[key] is not None})
    return acts


def parse_state(state: Any, extra: dict, notes: Notes) -> list[schema.StateSlot]:
    """``{domain: {slot: value}}`` → one {domain, slot, value} per present slot ("" and "dontcare" included).

    Absent slots are simply not listed. Empty domain dicts (``{"weather": {}}``) and an empty state are
    kept in ``extra.state_empty_domains``; a state :func:`state_to_source` would not give back is kept raw.
    """
    domains = list(state.items()) if isinstance(state, dict) else []
    typed: list[schema.StateSlot] = [
        {"domain": domain, "slot": slot, "value": value}
        for domain, slots in domains
        if isinstance(slots, dict)
        for slot, value in slots.items()
        if isinstance(value, str)
    ]
    empty_domains = [domain for domain, slots in domains if isinstance(slots, dict) and not slots]
    if empty_domains or not typed:
        extra[STATE_EMPTY_DOMAINS] = empty_domains
    if state_to_source(typed, empty_domains) != state:
        notes.add("state not representable as typed slots (raw kept in the turn's extra)")
        extra["state"] = state
        extra.pop(STATE_EMPTY_DOMAINS, None)
        return typed
    if empty_domains:
        notes.add("empty domain dict in a state (kept in extra.state_empty_domains)", len(empty_domains))
    return typed


def state_to_source(typed: Sequence[Mapping[str, Any]], empty_domains: Iterable[str] = ()) -> dict:
    state: dict[str, dict[str, str]] = {domain: {} for domain in empty_domains}
    for item in typed:
        state.setdefault(item["domain"], {})[item["slot"]] = item["value"]
    return state


# -- ontology ----------------------------------------------------------------------------------


def parse_act_string(text: str) -> dict:
    """``"{'user': True, 'system': False, 'intent': 'inform', ...}"`` (a Python repr) → its fields."""
    try:
        value = ast.literal_eval(text) if isinstance(text, str) else None
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        value = None
    value = value if isinstance(value, dict) else {}
    fields = {key: _text(value.get(key)) for key in ("intent", "domain", "slot")}
    return {**fields, **{key: _bool(value.get(key)) for key in ("user", "system")}}


def ontology_row(ontology: Any, subset: str, notes: Notes, path: str) -> dict:
    """``ontology.json`` → one typed row; sections that would not rebuild exactly are kept raw in ``extra``.

    ``extra`` holds source keys only: an absent section is a null column (a present one is a list, empty
    or not), so no source key, whatever its name, can be taken for convhub's bookkeeping.
    """
    if not isinstance(ontology, dict):
        raise SourceError(path, None, None, f"expected an ontology object, got {type(ontology).__name__}")
    row = {"subset": subset, **dict.fromkeys(ONTOLOGY_SECTIONS)}
    extra = {key: value for key, value in ontology.items() if key not in ONTOLOGY_SECTIONS}
    for key, (to_typed, to_source) in ONTOLOGY_SECTIONS.items():
        if key not in ontology:
            continue
        try:
            typed = to_typed(ontology[key])
            exact = to_source(typed) == ontology[key]
        except (AttributeError, TypeError, KeyError, ValueError):
            typed, exact = [], False
        row[key] = typed
        if not exact:
            notes.add(f"ontology {key} not representable as typed rows (raw kept in the ontology's extra)")
            extra[key] = ontology[key]
    row["extra"] = schema.to_json(extra) if extra else None
    return row


def _text(value: Any) -> str | None:
    """A string for a typed string column, or None (the caller then finds the rebuild differs)."""
    return value if isinstance(value, str) else None


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _domains_to_typed(domains: dict) -> list[dict]:
    return [
        {
            "name": name,
            "description": _text(domain.get("description")),
            "slots": [
                {
                    "name": slot_name,
                    "description": _text(slot.get("description")),
                    "is_categorical": _bool(slot.get("is_categorical")),
                    "possible_values": [
                        value for value in slot.get("possible_values", []) if isinstance(value, str)
                    ],
                }
                for slot_name, slot in domain.get("slots", {}).items()
            ],
        }
        for name, domain in domains.items()
    ]


def _domains_to_source(typed: list[dict]) -> dict:
    return {
        domain["name"]: {
            "description": domain["description"],
            "slots": {
                slot["name"]: {
                    "description": slot["description"],
                    "is_categorical": slot["is_categorical"],
                    "possible_values": slot["possible_values"],
                }
                for slot in domain["slots"]
            },
        }
        for domain in typed
    }


def _intents_to_typed(intents: dict) -> list[dict]:
    return [{"name": name, "description": _text(value.get("description"))} for name, value in intents.items()]


def _intents_to_source(typed: list[dict]) -> dict:
    return {intent["name"]: {"description": intent["description"]} for intent in typed}


def _act_inventory_to_typed(inventory: dict) -> list[dict]:
    return [
        {"type": kind, **parse_act_string(text), "raw": _text(text)}
        for kind, items in inventory.items()
        for text in items
    ]


def _act_inventory_to_source(typed: list[dict]) -> dict:
    inventory: dict[str, list[str]] = {}
    for act in typed:
        inventory.setdefault(act["type"], []).append(act["raw"])
    return inventory


def _ontology_state_to_typed(state: dict) -> list[dict]:
    return [
        {"domain": domain, "slot": slot, "value": _text(value)}
        for domain, slots in state.items()
        for slot, value in slots.items()
    ]


ONTOLOGY_SECTIONS = {
    "domains": (_domains_to_typed, _domains_to_source),
    "intents": (_intents_to_typed, _intents_to_source),
    "dialogue_acts": (_act_inventory_to_typed, _act_inventory_to_source),
    "state": (_ontology_state_to_typed, state_to_source),
}


# -- the dialogues config: a record's ConvLab-only fields, typed ---------------------------------------


GOAL_KEYS = ("description", "inform", "request")


def _loads(text: str | None) -> Any:
    return json.loads(text) if text else {}


def _slots(table: Any) -> list[dict]:
    """``{domain: {slot: value}}`` of a goal → typed slots; a non-string value is given as JSON text."""
    if not isinstance(table, dict):
        return []
    return [
        {"domain": domain, "slot": slot, "value": value if isinstance(value, str) else schema.to_json(value)}
        for domain, slots in table.items()
        if isinstance(slots, dict)
        for slot, value in slots.items()
    ]


def dialogue_rows(record: dict) -> Iterator[dict]:
    """ConvLab's dialogue-level fields typed: ``original_id``, ``domains``, ``goal`` and every ``db_results``."""
    extra = _loads(record["extra"])
    goal = extra.get("goal")
    domains = extra.get("domains")
    original_id = extra.get("original_id")
    turns = [turn for session in record["sessions"] for turn in session["turns"]]
    yield {
        **{name: record[name] for name in schema.CONVERSATION_IDS},
        "original_id": None if original_id is None else str(original_id),
        "domains": [d for d in domains if isinstance(d, str)] if isinstance(domains, list) else [],
        "goal": (
            {
                key: _slots(goal.get(key)) if key != "description" else _text(goal.get(key))
                for key in GOAL_KEYS
            }
            if isinstance(goal, dict)
            else None
        ),
        "num_turns": len(turns),
        "db_results": [row for turn_index, turn in enumerate(turns) for row in _db_results(turn, turn_index)],
    }


def _db_results(turn: dict, turn_index: int) -> Iterator[dict]:
    """One entry per entity a system turn's ``db_results`` (``{domain: [entity]}``) lists."""
    results = _loads(turn["extra"]).get("db_results")
    if not isinstance(results, dict):
        return
    for domain, entities in results.items():
        for rank, entity in enumerate(entities if isinstance(entities, list) else []):
            place = {"turn_id": turn["turn_id"], "turn_index": turn_index, "domain": domain, "rank": rank}
            yield {**place, "entity": schema.to_json(entity)}


# -- database ----------------------------------------------------------------------------------


def database_domain(file_name: str, ontology_domains: list[str]) -> str:
    """``hotel_db.json`` → ``hotel``; a single-domain dataset's file (``CamRestDB.json``) → that domain."""
    stem = file_name.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    name = re.sub(r"[_-]?db$", "", stem, flags=re.IGNORECASE)
    if name not in ontology_domains and len(ontology_domains) == 1:
        return ontology_domains[0]
    return name


def database_rows(content: Any, subset: str, file_name: str, domain: str) -> Iterator[dict]:
    """One row per entity: a list file gives its elements, a ``{key: [entity]}`` file its keys' elements.

    Anything else is one row holding the whole content, an empty list or a key with no entity included
    (no entity row would keep it, and ``convhub export`` must write the file back).
    """
    base = {"subset": subset, "file": file_name}
    if isinstance(content, list) and content:
        groups = [(None, domain, content)]  # (key, domain, entities)
    elif isinstance(content, dict) and content and all(isinstance(v, list) and v for v in content.values()):
        groups = [(key, key, entities) for key, entities in content.items()]
    else:
        yield {**base, "key": None, "domain": domain, "entity_index": None, "entity": schema.to_json(content)}
        return
    for key, group_domain, entities in groups:
        for index, entity in enumerate(entities):
            place = {"key": key, "domain": group_domain, "entity_index": index}
            yield {**base, **place, "entity": schema.to_json(entity)}
