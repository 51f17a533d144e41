"""Statistics of canonical records, like ConvLab-3's check.py: the numbers the card and ``check`` print."""

from __future__ import annotations

import glob
import json
import os
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from convhub.errors import Notes


@dataclass
class SplitStats:
    """Counts for one (split, subset) pair."""

    conversations: int = 0
    sessions: int = 0
    turns: int = 0
    questions: int = 0
    #: Unicode characters of turn text: a length that means the same in Chinese, Russian and English, where
    #: whitespace-split "tokens" count a whole Chinese utterance as one.
    characters: int = 0
    turns_with_acts: int = 0
    turns_with_state: int = 0
    turns_with_images: int = 0
    categories: Counter = field(default_factory=Counter)
    roles: Counter = field(default_factory=Counter)
    #: Conversations per ``language`` as the rows give it: the card's ``language`` list comes from here.
    languages: Counter = field(default_factory=Counter)

    COUNTS = ("conversations", "sessions", "turns", "questions", "characters")
    COUNTS += ("turns_with_acts", "turns_with_state", "turns_with_images")
    COUNTERS = ("categories", "roles", "languages")

    def add(self, record: dict) -> None:
        self.conversations += 1
        self.sessions += len(record["sessions"])
        self.questions += len(record["questions"])
        self.languages[record["language"]] += 1
        for session in record["sessions"]:
            for turn in session["turns"]:
                self.turns += 1
                self.characters += len(turn["text"])
                self.turns_with_acts += bool(turn["dialogue_acts"])
                self.turns_with_state += bool(turn["state"])
                self.turns_with_images += bool(turn["images"])
                self.roles[turn["role"]] += 1
        for question in record["questions"]:
            self.categories[question["category"]] += 1

    def merge(self, other: SplitStats) -> None:
        for name in self.COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in self.COUNTERS:
            getattr(self, name).update(getattr(other, name))

    def subtract(self, other: SplitStats) -> None:
        for name in self.COUNTS:
            setattr(self, name, getattr(self, name) - getattr(other, name))
        for name in self.COUNTERS:
            counter = getattr(self, name)
            counter.subtract(getattr(other, name))
            setattr(self, name, +counter)

    def to_dict(self) -> dict:
        # not dataclasses.asdict: it rebuilds a Counter from (key, value) pairs, counting the pairs
        return {
            name: dict(value) if isinstance(value, Counter) else value for name, value in vars(self).items()
        }

    @classmethod
    def from_dict(cls, data: dict) -> SplitStats:
        counters = {name: Counter(data.pop(name, {})) for name in cls.COUNTERS}
        return cls(**data, **counters)

    def row(self) -> dict:
        """The figures a statistics table shows, rounded for reading."""
        turns = max(self.turns, 1)
        return {
            "conversations": self.conversations,
            "sessions": self.sessions,
            "turns": self.turns,
            "questions": self.questions,
            "avg turns/conversation": round(self.turns / max(self.conversations, 1), 2),
            "avg characters/turn": round(self.characters / turns, 1),
            "turns with acts": f"{self.turns_with_acts / turns:.0%}",
            "turns with state": f"{self.turns_with_state / turns:.0%}",
            "turns with images": f"{self.turns_with_images / turns:.0%}",
        }


class Statistics:
    """Per (split, subset) counts, plus totals."""

    def __init__(self) -> None:
        self.by_split_subset: dict[tuple[str, str], SplitStats] = defaultdict(SplitStats)

    def add(self, split: str, record: dict) -> None:
        self.by_split_subset[(split, record["subset"])].add(record)

    def add_table(self, split: str, table: pa.Table) -> None:
        """``add(split, row)`` for every row of a table of ``sessions`` rows, counted on columns (a writer given
        a table, not records, makes no Python dict of its rows for the card's statistics)."""
        for subset, stats in table_stats(table).items():
            self.by_split_subset[(split, subset)].merge(stats)

    def total(self) -> SplitStats:
        total = SplitStats()
        for stats in self.by_split_subset.values():
            total.merge(stats)
        return total

    def table(self) -> list[dict]:
        rows = [{"split": split, "subset": subset, **stats.row()} for (split, subset), stats in self.sorted()]
        if len(rows) > 1:
            rows.append({"split": "all", "subset": "all", **self.total().row()})
        return rows

    def sorted(self):
        return sorted(self.by_split_subset.items())


def table_stats(table: pa.Table) -> dict:
    """The ``SplitStats`` of each subset of a table of ``sessions`` rows, as ``SplitStats.add`` of its rows would
    count them: a turn's characters are its text's code points, a counter's keys come in the order the rows
    first give them (as adding row by row inserts them)."""
    if table.num_rows == 0:
        return {}
    subsets, subset_of_row = _codes(table.column("subset").combine_chunks())
    sessions = table.column("sessions").combine_chunks()
    session_row = _parents(sessions)
    turns_lists = pc.struct_field(pc.list_flatten(sessions), "turns")
    turns = pc.list_flatten(turns_lists)
    turn_row = session_row[_parents(turns_lists)]
    questions = table.column("questions").combine_chunks()
    question_row = _parents(questions)
    by_turn = subset_of_row[turn_row]
    count = len(subsets)
    stats = {subset: SplitStats() for subset in subsets}
    sums = {
        "conversations": np.bincount(subset_of_row, minlength=count),
        "sessions": np.bincount(subset_of_row[session_row], minlength=count),
        "questions": np.bincount(subset_of_row[question_row], minlength=count),
        "turns": np.bincount(by_turn, minlength=count),
        "characters": _sums(by_turn, pc.utf8_length(pc.struct_field(turns, "text")), count),
    }
    for name, kind in (
        ("turns_with_acts", "dialogue_acts"),
        ("turns_with_state", "state"),
        ("turns_with_images", "images"),
    ):
        held = pc.fill_null(pc.greater(pc.list_value_length(pc.struct_field(turns, kind)), 0), False)
        sums[name] = np.bincount(by_turn[held.to_numpy(zero_copy_only=False)], minlength=count)
    for name, values in sums.items():
        for subset, value in zip(subsets, values.tolist(), strict=True):
            setattr(stats[subset], name, value)
    counted = (
        ("languages", subset_of_row, table.column("language").combine_chunks()),
        ("roles", by_turn, pc.struct_field(turns, "role")),
        ("categories", subset_of_row[question_row], pc.struct_field(pc.list_flatten(questions), "category")),
    )
    for name, owner, values in counted:
        for subset, counter in _counters(subsets, owner, values).items():
            getattr(stats[subset], name).update(counter)
    return stats


def _codes(values: pa.Array) -> tuple[list, np.ndarray]:
    """The distinct values (a null too) and each element's index among them."""
    encoded = values.dictionary_encode(null_encoding="encode")
    return encoded.dictionary.to_pylist(), encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)


def _parents(lists: pa.Array) -> np.ndarray:
    """The list of each element of ``lists``' values (a null list has none)."""
    return pc.list_parent_indices(lists).to_numpy(zero_copy_only=False).astype(np.int64)


def _sums(owner: np.ndarray, values: pa.Array, count: int) -> np.ndarray:
    """The sum of ``values`` (a null as 0) of each owner, exact in integers."""
    numbers = pc.fill_null(values, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    order = np.argsort(owner, kind="stable")
    totals = np.zeros(count, dtype=np.int64)
    if len(order):
        starts = np.searchsorted(owner[order], np.arange(count))
        present = np.bincount(owner, minlength=count) > 0
        totals[present] = np.add.reduceat(numbers[order], starts[present])
    return totals


def _counters(subsets: list, owner: np.ndarray, values: pa.Array) -> dict:
    """A Counter of ``values`` for each subset (``owner``: the subset of each value), keys in first-seen order."""
    if len(values) == 0:
        return {}
    names, codes = _codes(values)
    keys = owner * len(names) + codes
    distinct, first, times = np.unique(keys, return_index=True, return_counts=True)
    counters: dict = defaultdict(Counter)
    for position in np.argsort(first, kind="stable").tolist():
        key = int(distinct[position])
        counters[subsets[key // len(names)]][names[key % len(names)]] += int(times[position])
    return counters


def markdown_table(rows: list[dict]) -> str:
    if not rows:
        return "(no rows)"
    header = list(rows[0])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(row[name]) for name in header) + " |" for row in rows]
    return "\n".join(lines)


def _cell(value) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


class Report:
    """Notes and statistics gathered while a worker parses, saved as JSON for the build to merge."""

    def __init__(self) -> None:
        self.notes = Notes()
        self.statistics = Statistics()

    def counting(self, split: str, records):
        """``records`` as they come, each counted: a record, or a table of ``sessions`` rows."""
        for record in records:
            if isinstance(record, dict):
                self.statistics.add(split, record)
            else:
                self.statistics.add_table(split, record)
            yield record

    def save(self, folder: str) -> None:
        payload = {
            "notes": dict(self.notes),
            "statistics": [
                {"split": split, "subset": subset, **stats.to_dict()}
                for (split, subset), stats in self.statistics.sorted()
            ],
        }
        fd, _ = tempfile.mkstemp(prefix="report-", suffix=".json", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(payload, handle)

    @classmethod
    def load_all(cls, folder: str) -> Report | None:
        """The merged reports of every worker, or None when no worker wrote one."""
        paths = sorted(glob.glob(os.path.join(folder, "report-*.json")))
        if not paths:
            return None
        merged = cls()
        for path in paths:
            with open(path, encoding="utf-8") as handle:
                payload = json.load(handle)
            merged.notes.update(payload["notes"])
            for entry in payload["statistics"]:
                key = (entry.pop("split"), entry.pop("subset"))
                merged.statistics.by_split_subset[key].merge(SplitStats.from_dict(entry))
        return merged
