"""Statistics of canonical records, like ConvLab-3's check.py: the numbers the card and ``check`` print."""

from __future__ import annotations

import glob
import json
import os
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field

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
        return cls(**{**data, **counters})

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
        for record in records:
            self.statistics.add(split, record)
            yield record

    def save(self, folder: str) -> None:
        payload = {
            "notes": dict(self.notes),
            "statistics": [
                {"split": split, "subset": subset, **stats.to_dict()}
                for (split, subset), stats in self.statistics.sorted()
            ],
        }
        save_report(folder, json.dumps(payload))

    @classmethod
    def load_all(cls, folder: str) -> Report | None:
        """The merged reports of every worker, or None when no worker wrote one."""
        texts = saved_reports(folder)
        if not texts:
            return None
        merged = cls()
        for payload in map(json.loads, texts):
            merged.notes.update(payload["notes"])
            for entry in payload["statistics"]:
                key = (entry.pop("split"), entry.pop("subset"))
                merged.statistics.by_split_subset[key].merge(SplitStats.from_dict(entry))
        return merged


def save_report(folder: str, text: str) -> None:
    """A report's JSON text in a file of its own in ``folder`` (a worker's, or a Spark task's on the driver)."""
    fd, _ = tempfile.mkstemp(prefix="report-", suffix=".json", dir=folder)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def saved_reports(folder: str) -> list[str]:
    """The texts of the reports saved in ``folder``, in the order of their names."""
    texts = []
    for path in sorted(glob.glob(os.path.join(folder, "report-*.json"))):
        with open(path, encoding="utf-8") as handle:
            texts.append(handle.read())
    return texts
