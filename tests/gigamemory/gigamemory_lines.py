"""GigaMemory test fixtures: lines in the contest's format written to files, and the round trip `convhub export`
makes (:func:`rebuild_lines` rebuilds every source line from the ``sessions`` config alone, so nothing is lost).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from convhub.builders.gigamemory import builder, export, line_groups
from convhub.engine.inputs.listing import JSON_LINES
from convhub.errors import Notes, raise_error

# -- fixture writers ----------------------------------------------------------------------------------


def session(session_id, *messages):
    """A session from (role, content) pairs."""
    return {"id": session_id, "messages": [{"role": role, "content": content} for role, content in messages]}


def line(record_id, question_type, sessions, evidence, question="Как меня зовут?", ans="Иван"):
    return {
        "id": record_id,
        "question": question,
        "ans": ans,
        "question_type": question_type,
        "sessions": sessions,
        "ans_session_ids": evidence,
    }


DIALOGUE_A = [
    session(1, ("user", "Привет, меня зовут Иван."), ("assistant", "Приятно познакомиться, Иван!")),
    session(2, ("user", "У меня есть кот Барсик."), ("assistant", "Сколько ему лет?"), ("user", "Ему 2.")),
]
DIALOGUE_B = [
    session(1, ("assistant", "Добрый день!"), ("user", "Я живу в Самаре."), ("assistant", "Отлично."))
]


def write_jsonl(path: Path, records, gz: bool = False, newline: str = "\n") -> Path:
    text = "".join(json.dumps(record, ensure_ascii=False) + newline for record in records)
    if gz:
        with gzip.open(path, "wt", encoding="utf-8", newline="") as handle:
            handle.write(text)
    else:
        path.write_text(text, encoding="utf-8", newline="")
    return path


def parse_path(path: Path, shard_bytes: int = 1 << 30) -> tuple[list[dict], Notes]:
    """Canonical records of one file through both passes, as the builder runs them."""
    notes = Notes()
    return [
        record for shard in shards_of(path, shard_bytes) for record in builder.parse_shard(shard, notes)
    ], notes


def shards_of(path: Path, shard_bytes: int = 1 << 30, reject=raise_error) -> list[dict]:
    """Pass 1 over one file and its shards, as the builder plans them."""
    file_groups, notes = builder.index_file(str(path), reject=reject)
    fields = {"file_name": path.name, "subset": JSON_LINES.stem(path.name)}
    return line_groups.group_shards(file_groups, notes, shard_bytes, str(path), **fields)


def extra(value):
    """A Json column as parsed records hold it (text) or as load_dataset returns it (decoded)."""
    return json.loads(value) if isinstance(value, str) else (value or {})


# -- the round trip `convhub export` makes (convhub.builders.gigamemory.export) ----------------------------------


def rebuild_lines(records) -> dict[tuple[str, int], dict]:
    """(file, line number) → the source line rebuilt from canonical records alone, as `convhub export` does."""
    return {
        (file, line): value for record in records for file, line, value in export.lines_from_record(record)
    }


def source_lines(path: Path) -> dict[tuple[str, int], str]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", newline="") as handle:
        return {(path.name, n): text.rstrip("\r\n") for n, text in enumerate(handle, 1) if text.strip()}


def assert_round_trip(records, paths: list[Path]) -> None:
    rebuilt = rebuild_lines(records)
    expected = {key: text for path in paths for key, text in source_lines(path).items()}
    assert sorted(rebuilt) == sorted(expected)
    for key, text in expected.items():
        # key order matters: compare serializations, not dicts
        assert json.dumps(rebuilt[key], ensure_ascii=False) == json.dumps(
            json.loads(text), ensure_ascii=False
        ), key
