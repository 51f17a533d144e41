"""Canonical LongMemEval records → LongMemEval files again: the inverse of ``convhub.builders.longmemeval.parse``. Each file
comes back under its own name (with or without ``.json``), equal to the original as JSON, key order and number
types included (a numeric answer and a key order other than the documented one are kept in the question's extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from convhub.export.exporter import Build, as_object, source_rows
from convhub.export.files import JsonListWriter, safe_join


def instance_from_record(record: dict[str, Any]) -> dict[str, Any]:
    """One ``sessions`` row → the LongMemEval instance it was parsed from."""
    question = record["questions"][0]
    extra = as_object(question["extra"])
    orders, sessions = extra.get("turn_key_orders", {}), record["sessions"]
    values = {
        "question_id": question["question_id"],
        "question_type": question["category"],
        "question": question["question"],
        "answer": extra.get("answer", question["answer"]),
        "question_date": extra["question_date"],
        "haystack_session_ids": [session_id_of(session) for session in sessions],
        "haystack_dates": [session["date_time"] for session in sessions],
        "haystack_sessions": [[turn_from_record(t, orders) for t in s["turns"]] for s in sessions],
        "answer_session_ids": extra.get("answer_session_ids", question["evidence_session_ids"]),
        **as_object(record["extra"]).get("other_keys", {}),
    }
    return {key: values[key] for key in extra.get("key_order", values)}


def session_id_of(session: dict[str, Any]) -> str:
    """The session's id in the file: a repeat within its haystack was stored as ``<id>#<k>``, its id kept."""
    return as_object(session["extra"]).get("session_id", session["session_id"])


def turn_from_record(turn: dict[str, Any], key_orders: dict[str, list[str]]) -> dict[str, Any]:
    """A turn → ``role`` (its speaker), ``content`` (its text), its other keys, in the source's key order."""
    values = {"role": turn["speaker"], "content": turn["text"], **as_object(turn["extra"])}
    return {key: values[key] for key in key_orders.get(turn["turn_id"], values)}


def write_files(build: Build, folder: Path) -> list[str]:
    """Each file of the build under the name it was read from, in the build's (the file's) order."""
    writers: dict[str, JsonListWriter] = {}
    try:
        for _, record in source_rows(build, "longmemeval"):
            name = as_object(record["extra"])["file"]
            if name not in writers:
                writers[name] = JsonListWriter(safe_join(folder, name))
            writers[name].append(instance_from_record(record))
    finally:
        for writer in writers.values():
            writer.close()
    return list(writers)
