"""Canonical MNBVC records → MNBVC JSONL rows again: the inverse of ``convhub.builders.mnbvc.parse``.

The turn a source row starts (a Q/A pair's question, a forum thread's topic post) keeps in its ``extra``
the file, the line, the row without its text fields (every value with its JSON type, the raw ``扩展字段``
string included) and the row's key order; a forum reply keeps its own reply object the same way. So each
row comes back whole, at its file and line, whichever conversation the build grouped it into.
:func:`write_files` spools rows as they come (a 多轮对话 conversation gathers rows from anywhere in several
~500 MB shards) and writes each shard in line order, gzipped when its name ends ``.gz``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from convhub.builders.mnbvc.json_lines_builder import rebuilt_row
from convhub.builders.mnbvc.parse import FORUM
from convhub.export.exporter import Build, as_object, source_rows
from convhub.export.files import LineSpool

BATCH_ROWS = 512


def rows_from_record(record: dict[str, Any]) -> list[tuple[str, int, dict[str, Any]]]:
    """(file, line, source row) of every source row one record holds, from its turns alone."""
    turns = record["sessions"][0]["turns"]
    if as_object(record["extra"])["format"] == FORUM:
        return [forum_row(turns)]
    rebuilt = []
    for index, turn in enumerate(turns):
        if turn["role"] != "user":
            continue
        following = turns[index + 1] if index + 1 < len(turns) else None
        answer = following if following and following["reply_to"] == turn["turn_id"] else None
        rebuilt.append(pair_row(turn, answer))
    return rebuilt


def pair_row(question: dict[str, Any], answer: dict[str, Any] | None) -> tuple[str, int, dict[str, Any]]:
    """A 问答 or 多轮对话 row from its question turn and its answer turn (None: 答 was ``""``)."""
    kept = as_object(question["extra"])
    texts = {"问": question["text"], "答": answer["text"] if answer else ""}
    return kept["file"], kept["line"], rebuilt_row(kept["keys"], kept["row"], texts)


def forum_row(turns: list[dict[str, Any]]) -> tuple[str, int, dict[str, Any]]:
    """A 论坛 row from its topic turn and reply turns."""
    topic = as_object(turns[0]["extra"])
    texts = {"主题": turns[0]["text"], "回复": [reply_from_turn(turn) for turn in turns[1:]]}
    return topic["file"], topic["line"], rebuilt_row(topic["keys"], topic["row"], texts)


def reply_from_turn(turn: dict[str, Any]) -> dict[str, Any]:
    kept = as_object(turn["extra"])
    return rebuilt_row(kept["keys"], kept["reply"], {"回复": turn["text"]})


def write_files(build: Build, folder: Path) -> list[str]:
    """Every shard the build read (its name relative to ``--data-dir``), rows at their line numbers."""
    spool = LineSpool(folder, build.location)
    for _, record in source_rows(build, "mnbvc", batch_rows=BATCH_ROWS):
        where = f"the row of conversation {record['conversation_id']!r}"
        for file, line, row in rows_from_record(record):
            spool.add(file, line, json.dumps(row, ensure_ascii=False), where)
    return spool.write(folder)
