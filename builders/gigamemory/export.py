"""Canonical GigaMemory records → GigaMemory JSONL lines again: the inverse of ``convhub.builders.gigamemory.parse``.

Each question's ``extra`` names its file and line and keeps what the canonical fields do not (raw ids, a numeric
``ans``, key order), so every line comes back whole, at its place: written as ``json.dumps(line,
ensure_ascii=False)`` it is byte for byte the line of the public file. A rebuilt ~350k-character line is spooled
to disk at once (``LineSpool``), never held with the others.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from convhub.builders.gigamemory.parse import MESSAGE_KEYS, RECORD_KEYS, SESSION_KEYS
from convhub.export.exporter import Build, as_object, source_rows
from convhub.export.files import LineSpool

#: ``sessions`` rows per Arrow batch: each is a whole dialogue.
BATCH_ROWS = 16


def _ordered(values: dict[str, Any], keys) -> dict[str, Any]:
    return {key: values[key] for key in keys}


def session_from_record(session: dict[str, Any]) -> dict[str, Any]:
    """A canonical session → GigaMemory's ``{"id", "messages"}`` (raw id type, unknown keys, key order)."""
    info = as_object(session["extra"])
    messages = []
    for turn in session["turns"]:
        turn_info = as_object(turn["extra"])
        values = {"role": turn["speaker"], "content": turn["text"], **turn_info.get("fields", {})}
        messages.append(_ordered(values, turn_info.get("key_order", MESSAGE_KEYS)))
    values = {"id": info.get("id", session["session_id"]), "messages": messages, **info.get("fields", {})}
    return _ordered(values, info.get("key_order", SESSION_KEYS))


def line_from_question(question: dict[str, Any], sessions: list[dict[str, Any]]) -> dict[str, Any]:
    """One question and its dialogue's source sessions → the JSONL line it was parsed from."""
    info = as_object(question["extra"])
    values = {
        "id": info["id"],
        "question": question["question"],
        "ans": info.get("ans", question["answer"]),
        "question_type": question["category"],
        "sessions": sessions,
        "ans_session_ids": info.get("ans_session_ids"),
        **info.get("fields", {}),
    }
    return _ordered(values, info.get("key_order", RECORD_KEYS))


def lines_from_record(record: dict[str, Any]) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """(file, line number, line) of every question of one record; the dialogue is rebuilt once."""
    sessions = [session_from_record(session) for session in record["sessions"]]
    for question in record["questions"]:
        info = as_object(question["extra"])
        yield info["file"], info["line"], line_from_question(question, sessions)


def write_files(build: Build, folder: Path) -> list[str]:
    """Each source file (``<subset>.jsonl``, or ``.jsonl.gz`` gzipped) with its lines in their original order."""
    spool = LineSpool(folder, build.location)
    for _, record in source_rows(build, "gigamemory", batch_rows=BATCH_ROWS):
        where = f"the row of conversation {record['conversation_id']!r}"
        for file, line, value in lines_from_record(record):
            spool.add(file, line, json.dumps(value, ensure_ascii=False), where)
    return spool.write(folder)
