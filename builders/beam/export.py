"""BEAM records → BEAM's files in the layout read: ``chats/<conversation_id>/`` with every file (JSON as BEAM
writes it, ``indent=4``; text and binary byte for byte), or each Hub Parquet file, 10M plans in their rows."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from convhub.builders.beam.layout import CHAT_FILE, QUESTIONS_FILE
from convhub.export.exporter import Build, as_object, source_rows
from convhub.export.files import safe_join, write_json


def batches_of(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The sessions → BEAM's batches: the batch's own keys, ``turns`` where it stood, cut into its exchanges."""
    key_orders = as_object(record["extra"]).get("message_key_orders", {})
    batches = []
    for session in record["sessions"]:
        extra = as_object(session["extra"])
        messages = [message_of(turn, key_orders.get(turn["turn_id"])) for turn in session["turns"]]
        turns, sizes = messages, extra["exchange_sizes"]
        if sizes is not None:
            turns = [messages[sum(sizes[:index]) : sum(sizes[: index + 1])] for index in range(len(sizes))]
        items = list(extra["batch"].items())
        items.insert(extra["turns_position"], ("turns", turns))
        batches.append(dict(items))
    return batches


def message_of(turn: dict[str, Any], key_order: list[str] | None) -> dict[str, Any]:
    extra = as_object(turn["extra"])
    values = {"role": turn["speaker"], "id": int(turn["turn_id"]), **extra, "content": turn["text"]}
    return {key: values[key] for key in key_order or values}


def questions_of(record: dict[str, Any]) -> dict[str, list]:
    """The probing questions by ability, in the file's order, each exactly as read."""
    abilities: dict[str, list] = {name: [] for name in as_object(record["extra"]).get("abilities", [])}
    for question in record["questions"]:
        extra = as_object(question["extra"])
        abilities.setdefault(extra["ability"], []).append(extra["probing_question"])  # in position order
    return abilities


def write_folder(folder: Path, record: dict[str, Any]) -> list[str]:
    """One chat of the repository's layout, under ``chats/<conversation_id>/``."""
    extra = as_object(record["extra"])
    rebuilt = {CHAT_FILE: batches_of, QUESTIONS_FILE: questions_of}
    files = extra["files"] | {name: rebuilt[name](record) for name in extra["parsed_files"]}
    files |= {name: base64.b64decode(value) for name, value in extra["binary_files"].items()}
    for name, value in files.items():
        target = safe_join(folder, f"chats/{record['conversation_id']}/{name}")
        target.parent.mkdir(parents=True, exist_ok=True)
        if name.endswith(".json"):
            write_json(target, value, indent=4)
        else:
            target.write_bytes(value if isinstance(value, bytes) else value.encode("utf-8"))
    return [f"chats/{record['conversation_id']}/{name}" for name in files]


def hub_row(record: dict[str, Any]) -> dict[str, Any]:
    """One chat → its Hub row (or plan), ``chat`` and ``probing_questions`` rebuilt, ``plans`` for those after it."""
    extra = as_object(record["extra"])
    text = extra.get("probing_questions_text", repr(questions_of(record)))
    values = {"chat": batches_of(record), "plans": [], "probing_questions": text, **extra["columns"]}
    return {key: values[key] for key in extra["column_order"]}


def write_files(build: Build, folder: Path) -> list[str]:
    """Every chat in the layout it was read from."""
    written, hub_files = list[str](), dict[str, list[dict]]()
    for _, record in source_rows(build, "beam"):
        extra = as_object(record["extra"])
        if extra["layout"] == "repository":
            written += write_folder(folder, record)
        elif "plan" in extra:
            hub_files[extra["file"]][-1]["plans"].append(hub_row(record))
        else:
            hub_files.setdefault(extra["file"], []).append(hub_row(record))
    for name, rows in hub_files.items():
        safe_join(folder, name).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows), safe_join(folder, name))
    return written + list(hub_files)
