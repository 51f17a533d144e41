"""Canonical ConvLab records and rows → ConvLab-3 unified files again: the inverse of ``convhub.builders.convlab.parse``.

``dialogue_from_record``, ``ontology_from_row`` and ``database_from_rows`` invert ``parse_dialogue``,
``ontology_row`` and ``database_rows``, so every dialogue, ontology and database file comes back equal as a JSON
value. :func:`write_files` writes ``<subset>/data/dialogues.json`` (split by split: train, validation, test, then
any other, each in file order, as ConvLab lays its files out; one dialogue in memory at a time), ``ontology.json``
and every database file the build has.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from convhub.builders.convlab.builder import DATABASE_VIEW, DIALOGUES, ONTOLOGY, ONTOLOGY_VIEW, ordered_splits
from convhub.builders.convlab.parse import (
    ACT_KINDS,
    ACT_KINDS_KEY,
    ACTS_ABSENT,
    ONTOLOGY_SECTIONS,
    STATE_EMPTY_DOMAINS,
    acts_to_source,
    state_to_source,
    unescape_turn_key,
)
from convhub.export.exporter import SESSIONS, Build, as_object, source_rows
from convhub.export.files import ExportError, JsonListWriter, safe_join, write_json

BATCH_ROWS = 256


def dialogue_from_record(record: dict, split: str) -> dict:
    """The exact inverse of ``parse_dialogue`` (as a JSON value)."""
    extra = as_object(record["extra"])
    dialogue = {
        "dataset": extra.pop("dataset", record["subset"]),
        "data_split": split,
        "dialogue_id": record["conversation_id"],
        **extra,
    }
    dialogue["turns"] = [
        turn_from_record(turn) for session in record["sessions"] for turn in session["turns"]
    ]
    return dialogue


def turn_from_record(turn: dict) -> dict:
    """The inverse of ``parse_turn``: typed acts and state back to ConvLab's dicts, markers removed."""
    extra = as_object(turn["extra"])
    source = {"speaker": turn["speaker"], "utterance": turn["text"], "utt_idx": int(turn["turn_id"])}
    if "dialogue_acts" in extra:
        source["dialogue_acts"] = extra.pop("dialogue_acts")
    elif not extra.pop(ACTS_ABSENT, False):
        source["dialogue_acts"] = acts_to_source(turn["dialogue_acts"], extra.pop(ACT_KINDS_KEY, ACT_KINDS))
    if "state" in extra:
        source["state"] = extra.pop("state")
    elif turn["state"] or STATE_EMPTY_DOMAINS in extra:
        source["state"] = state_to_source(turn["state"], extra.pop(STATE_EMPTY_DOMAINS, ()))
    source.update((unescape_turn_key(key), value) for key, value in extra.items())
    return source


def ontology_from_row(row: dict) -> dict:
    """The inverse of ``ontology_row``: ``ontology.json`` as a JSON value."""
    extra = as_object(row["extra"])
    ontology = {}
    for key, (_, to_source) in ONTOLOGY_SECTIONS.items():
        typed = row[key]
        if typed is None:  # the section was absent (a kept raw section has a typed list beside it)
            continue
        ontology[key] = extra.pop(key) if key in extra else to_source(typed)
    ontology.update(extra)
    return ontology


def database_from_rows(rows: Iterable[dict]) -> Any:
    """The rows of one database file (in build order) → the file's content, the inverse of ``database_rows``.

    A list file gives rows with no ``key`` and an ``entity_index``; a ``{key: [entity]}`` file rows with
    a ``key``; any other content one row with no ``entity_index`` holding it whole.
    """
    content: Any = None
    for row in rows:
        entity = row["entity"]
        if row["entity_index"] is None:
            return entity
        if row["key"] is None:
            content = [] if content is None else content
            content.append(entity)
        else:
            content = {} if content is None else content
            content.setdefault(row["key"], []).append(entity)
    return content


def write_files(build: Build, folder: Path) -> list[str]:
    files = write_dialogues(build, folder)
    if ONTOLOGY_VIEW.name in build.configs():
        for _, row in build.all_rows(ONTOLOGY_VIEW.name):
            name = f"{row['subset']}/data/{ONTOLOGY}"
            write_json(safe_join(folder, name), ontology_from_row(row))
            files.append(name)
    if DATABASE_VIEW.name in build.configs():
        files += write_databases(build, folder)
    return files


def write_dialogues(build: Build, folder: Path) -> list[str]:
    """``<subset>/data/dialogues.json`` of every subset, split after split, one dialogue in memory at a time."""
    writers: dict[str, JsonListWriter] = {}
    try:
        for split in ordered_splits(build.splits(SESSIONS)):
            for _, record in source_rows(_OneSplit(build, split), "convlab", batch_rows=BATCH_ROWS):
                subset = record["subset"]
                if subset not in writers:
                    writers[subset] = JsonListWriter(safe_join(folder, f"{subset}/data/{DIALOGUES}"))
                writers[subset].append(dialogue_from_record(record, split))
    finally:
        for writer in writers.values():
            writer.close()
    return [f"{subset}/data/{DIALOGUES}" for subset in writers]


def write_databases(build: Build, folder: Path) -> list[str]:
    """Every database file: its rows are consecutive in the ``database`` config (one file at a time)."""
    files: list[str] = []
    rows = (row for _, row in build.all_rows(DATABASE_VIEW.name))
    for (subset, file), file_rows in itertools.groupby(rows, key=lambda row: (row["subset"], row["file"])):
        name = f"{subset}/data/{file}"
        if name in files:
            raise ExportError(f"the rows of database file {name} are not consecutive in {build.location}")
        write_json(safe_join(folder, name), database_from_rows(file_rows))
        files.append(name)
    return files


class _OneSplit(Build):
    """One split of a build, so dialogues are written in ConvLab's split order whatever the card's order."""

    def __init__(self, build: Build, split: str):
        self.build, self.split, self.location = build, split, build.location

    def all_rows(self, config: str, batch_rows: int = BATCH_ROWS):
        for row in self.build.rows(config, self.split, batch_rows):
            yield self.split, row
