"""LoCoMo's evidence: the turn ids ("D8:6") a question or an observation points at. Written by hand, it varies
("D8:6; D9:17", "D30:05", "D:4:2", "D"): it is normalized into ids a reader can join on turns, and the caller
keeps the raw evidence beside them."""

from __future__ import annotations

import re
from collections.abc import Container
from typing import Any

from convhub.errors import FieldError, Notes

EVIDENCE_ID = re.compile(r"D:?(\d+):(\d+)")


def parse_evidence(
    evidence: Any, notes: Notes, field: str = "evidence", label: str = "QA evidence", kept_in: str = ""
) -> tuple[list[str], list[str]]:
    """Evidence (a list of strings, or one string as observations write "D4:17, D4:19") → the normalized turn ids
    it names, deduplicated, in order ("D8:6; D9:17" → two ids, "D30:05" → "D30:5"), and its pieces that hold no id
    (e.g. "D"). ``label`` names the evidence in the normalization counts, ``kept_in`` where unreadable pieces go."""
    if evidence is None:
        notes.add(f"{label} absent")
        return [], []
    if isinstance(evidence, str):
        evidence = [evidence]
    if not isinstance(evidence, list) or not all(isinstance(item, str) for item in evidence):
        raise FieldError(field, f"expected a string or a list of strings, got {evidence!r}")
    if not evidence:
        notes.add(f"{label} empty")
        return [], []
    ids, unreadable = [], []
    for item in evidence:
        found = [f"D{int(session)}:{int(turn)}" for session, turn in EVIDENCE_ID.findall(item)]
        if not found:
            notes.add(f"{label} string with no turn id (kept in {kept_in or 'unresolved_evidence'})")
            unreadable.append(item)
        elif len(found) > 1:
            notes.add(f"{label} string holding several ids, split")
        elif found[0] != item:
            notes.add(f"{label} id rewritten (leading zero, stray colon or spaces)")
        ids.extend(found)
    unique = list(dict.fromkeys(ids))
    if len(unique) < len(ids):
        notes.add(f"{label} id repeated in one evidence list, deduplicated", len(ids) - len(unique))
    return unique, unreadable


def session_ids_of(turn_ids: list[str]) -> list[str]:
    """ "D3:5" → "session_3", in the turn ids' order, each once."""
    return list(dict.fromkeys("session_" + turn_id[1 : turn_id.index(":")] for turn_id in turn_ids))


def parse_observations(
    entry: Any, turn_ids: Container[str], notes: Notes, field: str
) -> list[dict[str, Any]]:
    """One session's ``observation`` entry ({speaker: [[text, evidence], ...]}) → rows, evidence normalized as QA
    evidence is and returned raw beside the ids; ids that name no turn are counted and left out of the ids."""
    if not isinstance(entry, dict):
        raise FieldError(field, f"expected an object of speakers, got {type(entry).__name__}")
    rows = []
    for speaker, observations in entry.items():
        if not isinstance(observations, list):
            raise FieldError(f"{field}.{speaker}", "expected a list of [text, evidence] pairs")
        for position, pair in enumerate(observations):
            where = f"{field}.{speaker}[{position}]"
            if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
                raise FieldError(where, f"expected a [text, evidence] pair, got {pair!r}")
            ids, _ = parse_evidence(pair[1], notes, where, "observation evidence", "the raw evidence")
            found = [turn_id for turn_id in ids if turn_id in turn_ids]
            if missing := len(ids) - len(found):
                notes.add("observation evidence id that names no turn (raw evidence kept)", missing)
            text, raw = pair
            rows.append(
                dict(
                    speaker=speaker,
                    position=position,
                    observation=text,
                    evidence_turn_ids=found,
                    evidence=raw,
                )
            )
    return rows
