"""What the LoCoMo tests share: the packaged sample, and tiny hand-written samples in the file's own shape."""

from __future__ import annotations

import json
from pathlib import Path

import datasets

from convhub.builders.locomo import parse
from convhub.builders.locomo.builder import SAMPLES, LocomoBuilder
from convhub.engine.readers.contract import Place
from convhub.engine.readers.record_loop import convert_one
from convhub.errors import Notes

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = Path(LocomoBuilder.sample_dir()) / "locomo_sample.json"
ALL_CONFIGS = ["sessions", "turns", "qa", "messages", "observations", "events"]


def turn(dia_id: str, speaker: str, text: str, **optional) -> dict:
    return {"speaker": speaker, "dia_id": dia_id, "text": text, **optional}


def tiny_sample(sample_id: str = "conv-t1", **changes) -> dict:
    """A two-session LoCoMo sample in the file's own shape; ``changes`` replace top-level keys."""
    sample = {
        "qa": [{"question": "Where does Ana live?", "answer": "Porto", "evidence": ["D1:1"], "category": 4}],
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Bo",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [turn("D1:1", "Ana", "I live in Porto."), turn("D1:2", "Bo", "Nice!")],
            "session_2_date_time": "7:05 pm on 1 June, 2023",
            "session_2": [turn("D2:1", "Bo", "Any news?"), turn("D2:2", "Ana", "I got a dog.")],
        },
        "event_summary": {
            "events_session_1": {"Ana": ["Ana moves to Porto."], "Bo": [], "date": "8 May, 2023"},
            "events_session_2": {"Ana": ["Ana adopts a dog."], "Bo": [], "date": "1 June, 2023"},
        },
        "observation": {
            "session_1_observation": {"Ana": [["Ana lives in Porto.", "D1:1"]]},
            "session_2_observation": {"Ana": [["Ana has a dog.", ["D2:2"]]]},
        },
        "session_summary": {"session_1_summary": "Ana tells Bo about Porto.", "session_2_summary": "A dog."},
        "sample_id": sample_id,
    }
    sample.update(changes)
    return sample


def parse_tiny(sample: dict, notes: Notes | None = None) -> dict:
    """``sample`` through the engine's per-record loop, as the file ``tiny.json`` (errors name file and record)."""
    place = SAMPLES.place("tiny.json", 0, sample)
    return convert_one(place, sample, parse.convert, notes if notes is not None else Notes())


def question(qa: dict, turn_ids=("D1:1", "D1:2", "D2:1", "D2:2"), notes: Notes | None = None) -> dict:
    """``qa`` as the first question of sample conv-t1 of ``t.json``."""
    convert = lambda raw, _, counted: parse.parse_question(raw, "conv-t1", 0, set(turn_ids), counted)  # noqa: E731
    place = Place("t.json", "t.json", "conv-t1")
    return convert_one(place, qa, convert, notes if notes is not None else Notes())


def shard_of(path) -> dict[str, str]:
    """The shard of one file, as ``LocomoBuilder.shards`` lists it for a ``--data-dir`` that is that file."""
    [shard] = LocomoBuilder(config_name="sessions", data_dir=str(path)).shards(None)["test"]
    return shard


def records_of(path, notes: Notes | None = None) -> list[dict]:
    """The canonical records of one file, as a build parses them."""
    builder = LocomoBuilder(config_name="sessions")
    return list(builder.parse_shard(shard_of(path), notes if notes is not None else Notes()))


def extra(value) -> object:
    return json.loads(value) if value is not None else None


def load(result, config: str) -> datasets.Dataset:
    return datasets.load_dataset(str(result.output), config, split="test")


def split_sample(folder: Path) -> Path:
    """The sample as two files (two shards, two subsets) in ``folder``."""
    folder.mkdir()
    first, second = json.loads(SAMPLE.read_text(encoding="utf-8"))
    (folder / "part_a.json").write_text(json.dumps([first]), encoding="utf-8")
    (folder / "part_b.json").write_text(json.dumps([second]), encoding="utf-8")
    return folder
