"""Canonical BEAM records → BEAM's files again, in the layout they were read from: the inverse of ``parse`` and
``layout``. The repository's layout gives ``chats/<conversation_id>/`` with every file of the chat (JSON files
as BEAM writes them, ``indent=4``, equal to the input as JSON values; text and binary files byte for byte); the
Hub's layout gives each Parquet file under its own name, a row per chat, a 10M row's plans inside it."""

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
    """The record's sessions → BEAM's batches: each batch's own keys, ``turns`` where it stood, its messages
    cut into the exchanges they were read from (a flat list where the batch had no exchanges)."""
    key_orders = as_object(record["extra"]).get("message_key_orders", {})
    batches = []
    for session in record["sessions"]:
        extra = as_object(session["extra"])
        messages = [message_of(turn, key_orders) for turn in session["turns"]]
        turns: list = messages
        if extra["exchange_sizes"] is not None:
            turns, start = [], 0
            for size in extra["exchange_sizes"]:
                turns.append(messages[start : start + size])
                start += size
        items = list(extra["batch"].items())
        items.insert(extra["turns_position"], ("turns", turns))
        batches.append(dict(items))
    return batches


def message_of(turn: dict[str, Any], key_orders: dict[str, list[str]]) -> dict[str, Any]:
    values = {"role": turn["speaker"], "id": int(turn["turn_id"]), **as_object(turn["extra"]), "content": turn["text"]}
    return {key: values[key] for key in key_orders.get(turn["turn_id"], values)}


def questions_of(record: dict[str, Any]) -> dict[str, list]:
    """The probing questions, by ability in the file's order, each exactly as read."""
    abilities: dict[str, list] = {name: [] for name in as_object(record["extra"]).get("abilities", [])}
    for question in record["questions"]:
        extra = as_object(question["extra"])
        abilities.setdefault(extra["ability"], []).append((extra["position"], extra["probing_question"]))
    return {name: [question for _, question in sorted(listed)] for name, listed in abilities.items()}


def write_folder(folder: Path, record: dict[str, Any]) -> list[str]:
    """One chat of the repository's layout, under ``chats/<conversation_id>/``."""
    extra = as_object(record["extra"])
    chat = f"chats/{record['conversation_id']}"
    files = dict(extra["files"])
    if CHAT_FILE in extra["parsed_files"]:
        files[CHAT_FILE] = batches_of(record)
    if QUESTIONS_FILE in extra["parsed_files"]:
        files[QUESTIONS_FILE] = questions_of(record)
    for name, value in files.items():
        target = safe_join(folder, f"{chat}/{name}")
        if name.endswith(".json"):
            write_json(target, value, indent=4)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(value.encode("utf-8"))
    for name, value in extra["binary_files"].items():
        target = safe_join(folder, f"{chat}/{name}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(base64.b64decode(value))
    return [f"{chat}/{name}" for name in (*files, *extra["binary_files"])]


def hub_row(record: dict[str, Any]) -> dict[str, Any]:
    """One chat → its Hub row (or plan): its columns in their order, ``chat`` and ``probing_questions`` rebuilt."""
    extra = as_object(record["extra"])
    values = dict(extra["columns"])
    if "chat" not in values:
        values["chat"] = batches_of(record)
    if "probing_questions" not in values:
        values["probing_questions"] = extra.get("probing_questions_text", repr(questions_of(record)))
    if "plans" in extra:
        values["plans"] = []
    return {key: values[key] for key in extra["column_order"]}


def write_files(build: Build, folder: Path) -> list[str]:
    """Every chat in the layout it was read from; the Hub's files each under its own name."""
    written: list[str] = []
    hub_files: dict[str, list[dict]] = {}
    for _, record in source_rows(build, "beam"):
        extra = as_object(record["extra"])
        if extra["layout"] == "repository":
            written += write_folder(folder, record)
            continue
        rows = hub_files.setdefault(extra["file"], [])
        if "plan" in extra:
            rows[-1]["plans"].append(hub_row(record))
        else:
            rows.append(hub_row(record))
    for name, rows in hub_files.items():
        target = safe_join(folder, name)
        target.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows), target)
        written.append(name)
    return written
