"""Hub-layout fixtures (``Mohammadta/BEAM``, ``Mohammadta/BEAM-10M``) written from chats in the repository's layout.

No real Hub Parquet file is on this machine: the columns are those BEAM's own ``download_dataset.py`` reads
(``conversation_id``, ``conversation_seed``, ``narratives``, ``user_profile {user_info, user_relationships}``,
``conversation_plan``, ``user_questions``, ``chat``, ``probing_questions`` as a Python literal; 10M rows with
``plans``). The chat's batches list their messages flat (the seed note: "not yet cut into exchanges")."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def read(folder: Path, name: str):
    path = folder / name
    return json.loads(path.read_text(encoding="utf-8")) if name.endswith(".json") else path.read_text("utf-8")


def flat_chat(folder: Path) -> list[dict]:
    return [
        {**batch, "turns": [message for exchange in batch["turns"] for message in exchange]}
        for batch in read(folder, "chat.json")
    ]


def hub_row(folder: Path) -> dict:
    """A 100K/500K/1M row from a chat folder (``plan.txt`` has no column: the Hub leaves it out)."""
    return {
        "conversation_id": folder.name,
        "conversation_seed": read(folder, "topic.json"),
        "narratives": read(folder, "labels.txt"),
        "user_profile": {
            "user_info": read(folder, "main_spec.txt"),
            "user_relationships": read(folder, "relationships.txt"),
        },
        "conversation_plan": read(folder, "plan_new.txt"),
        "user_questions": read(folder, "user_messages.json"),
        "chat": flat_chat(folder),
        "probing_questions": repr(read(folder, "probing_questions/probing_questions.json")),
    }


def write_hub_file(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path
