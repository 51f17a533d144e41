"""Hostile input for every source, the fixtures: each source's valid record and file layout (:class:`Source`), a
bad record of each kind, what a failed build must leave behind (nothing), and reading back a build made with
``on_bad_record="skip"`` and its quarantine.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets
import pytest

from convhub import registry
from convhub.build import build_source
from convhub.engine.checks import quarantine
from convhub.errors import SourceError

ROOT = Path(__file__).resolve().parents[2]


# -- each source's format: a valid record, and how files are laid out ------------------------------------


def locomo_record(i: int, text: str = "") -> dict:
    return {
        "sample_id": f"conv-{i}",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": text or f"hello {i}"},
                {"speaker": "Bob", "dia_id": "D1:2", "text": "hi"},
            ],
        },
        "qa": [{"question": "who?", "answer": "Ann", "evidence": ["D1:1"], "category": 1}],
        "event_summary": {},
        "observation": {},
        "session_summary": {},
    }


def gigamemory_record(i: int, text: str = "") -> dict:
    messages = [{"role": "user", "content": text or f"привет {i}"}, {"role": "assistant", "content": "да"}]
    return {
        "id": i,
        "question": "как?",
        "ans": "так",
        "question_type": "fact_equal_session",
        "sessions": [{"id": 1, "messages": messages}],
        "ans_session_ids": [1],
    }


def convlab_record(i: int, text: str = "", subset: str = "toy") -> dict:
    return {
        "dataset": subset,
        "data_split": "train",
        "dialogue_id": f"{subset}-train-{i}",
        "turns": [
            {"speaker": "user", "utterance": text or f"hello {i}", "utt_idx": 0},
            {"speaker": "system", "utterance": "ok", "utt_idx": 1},
        ],
    }


def mnbvc_record(i: int, text: str = "") -> dict:
    return {
        "id": i,
        "问": text or f"问题 {i}",
        "答": "回答",
        "来源": "test",
        "时间": "20230517",
        "元数据": {"create_time": "20230517 06:47:18"},
    }


def longmemeval_record(i: int, text: str = "") -> dict:
    turns = [{"role": "user", "content": text or f"hello {i}"}, {"role": "assistant", "content": "ok"}]
    return {
        "question_id": f"q-{i}",
        "question_type": "single-session-user",
        "question": "what did I say?",
        "answer": f"hello {i}",
        "question_date": "2023/06/10 (Sat) 09:00",
        "haystack_session_ids": [f"s-{i}"],
        "haystack_dates": ["2023/06/02 (Fri) 19:45"],
        "haystack_sessions": [turns],
        "answer_session_ids": [f"s-{i}"],
    }


@dataclass
class Source:
    """How one source lays out its files and what one record is, for the fixtures below."""

    name: str
    record: Callable[..., dict]
    file_name: str  # of the one data file a case writes
    jsonl: bool  # one record per line, or one JSON list per file
    #: (mutation of a valid record, the field the error must name) for a wrong type and a missing field
    wrong_type: tuple[Callable[[dict], None], str]
    missing: tuple[Callable[[dict], None], str]

    def path(self, data_dir: Path, file_name: str | None = None) -> Path:
        path = data_dir / (file_name or self.file_name)
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def encode(self, records: list[Any]) -> bytes:
        if self.jsonl:
            return b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in records)
        return json.dumps(records, ensure_ascii=False).encode()

    def write(self, data_dir: Path, records: list[Any], file_name: str | None = None) -> Path:
        path = self.path(data_dir, file_name)
        path.write_bytes(self.encode(records))
        return path

    def conversation_id(self, i: int, file_name: str | None = None) -> str:
        """The conversation id the build gives valid record ``i`` (written at line/position ``i``)."""
        if self.name == "locomo":
            return f"conv-{i}"
        if self.name == "convlab":
            return f"toy-train-{i}"
        if self.name == "mnbvc":
            return f"{file_name or self.file_name}:{i + 1}"
        if self.name == "longmemeval":  # the file's subset (its name without .json), then the question's id
            return f"{Path(file_name or self.file_name).stem}:q-{i}"
        raise ValueError("gigamemory ids are digests: compare question ids")


def _set(path: str, value: Any) -> Callable[[dict], None]:
    def mutate(record: dict) -> None:
        *parents, last = path.split("/")
        target = record
        for key in parents:
            target = target[int(key) if key.isdigit() else key]
        target[int(last) if last.isdigit() else last] = value

    return mutate


def _drop(key: str) -> Callable[[dict], None]:
    return lambda record: record.pop(key)


SOURCES = {
    "locomo": Source(
        "locomo",
        locomo_record,
        "locomo.json",
        False,
        (_set("conversation/session_1/0/text", 42), "text"),
        (_drop("qa"), "qa"),
    ),
    "gigamemory": Source(
        "gigamemory",
        gigamemory_record,
        "dialogues.jsonl",
        True,
        (_set("sessions/0/messages/0/content", 42), "sessions[0].messages[0].content"),
        (_drop("question"), "question"),
    ),
    "convlab": Source(
        "convlab",
        convlab_record,
        "toy/data/dialogues.json",
        False,
        (_set("turns/0/utterance", 42), "utterance"),
        (_drop("turns"), "turns"),
    ),
    "mnbvc": Source(
        "mnbvc",
        mnbvc_record,
        "qa.jsonl",
        True,
        (_set("元数据", "not an object"), "元数据"),
        (lambda record: (record.pop("问"), record.pop("答")), "问"),
    ),
    "longmemeval": Source(
        "longmemeval",
        longmemeval_record,
        "longmemeval_s.json",
        False,
        (_set("haystack_sessions/0/0/content", 42), "content"),
        (_drop("question"), "question"),
    ),
}
#: The sources every hostile case runs on: each the registry has, but those that ``NOT_ONE_FILE`` names.
NOT_ONE_FILE = {
    "beam": "a BEAM chat is a folder of files (chat.json, probing_questions/, plans), never one record of a "
    "file of several: the cases here write records into one JSON list or JSON Lines file, and break it; "
    "BEAM's own hostile chats are in tests/beam/test_beam_build.py (a bad field, a JSON file that does not "
    "parse, one quarantined whole under skip, a chat id read twice)",
}
NAMES = [name for name in registry.names() if name not in NOT_ONE_FILE]
missing = sorted(set(NAMES) - set(SOURCES))
if missing:  # a new source: give it a Source above (its record and file layout), or a reason in NOT_ONE_FILE
    raise RuntimeError(f"tests/support/hostile_sources.py has no Source for {', '.join(missing)}")


def bad_record(source: Source, kind: str, i: int) -> dict:
    record = source.record(i)
    mutate, _ = getattr(source, kind)
    mutate(record)
    return record


# -- what a failed build must leave behind: nothing -----------------------------------------------------


def assert_fails_cleanly(source: str, data_dir: Path, tmp_path: Path, *expected: str) -> SourceError:
    """The default build raises a SourceError whose message holds every ``expected`` piece; no folder."""
    output = tmp_path / "out" / "built"
    with pytest.raises(SourceError) as caught:
        build_source(source, output, data_dir=str(data_dir))
    message = str(caught.value)
    for piece in expected:
        assert piece in message, f"{piece!r} not in {message!r}"
    leftovers = list((tmp_path / "out").iterdir())
    assert leftovers == [], f"a failed build left {leftovers}"
    return caught.value


def record_marker(source: Source, i: int) -> str:
    """How an error names record ``i`` of a fixture file (a line for JSONL, a position or id otherwise)."""
    if source.jsonl:
        return f"line {i + 1}"
    return f"conv-{i}" if source.name == "locomo" else f"record {i}"


# -- reading back a build made with skip--------------------------------------------------------------


def load(folder: Path, config: str) -> dict:
    """The columns of a built config's one split, loaded back with ``load_dataset``."""
    [dataset] = datasets.load_dataset(str(folder), config).values()
    return dataset[:]


def read_quarantine(result) -> list[dict]:
    assert result.quarantine == quarantine.path_beside(result.output)
    lines = result.quarantine.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def hostile_mix(source: Source, data_dir: Path) -> int:
    """Good records 0, 2, 4 with a wrong type, a missing field and (JSONL) invalid JSON and UTF-8 between."""
    records = [
        source.record(0),
        bad_record(source, "wrong_type", 1),
        source.record(2),
        bad_record(source, "missing", 3),
        source.record(4),
    ]
    raw = source.encode(records)
    bad = 2
    if source.jsonl:
        raw += b'{"broken": \n' + b"\xff\xfe not utf-8\n"
        bad += 2
    source.path(data_dir).write_bytes(raw)
    return bad
