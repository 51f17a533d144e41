"""Where BEAM's chats are and how each is read in both layouts (``docs/sources.md``): the repository's
folders ``chats/<scale>/<n>/`` (10M: ``plan-<k>/`` chats inside), the Hub's Parquet files (10M: ``plans``)."""

from __future__ import annotations

import ast
import base64
import os
import re
from collections.abc import Iterator
from posixpath import basename, dirname, join
from typing import Any

from convhub.engine.readers.contract import Place, shard_file
from convhub.engine.readers.exact_json import loads_exact
from convhub.errors import FieldError, Reject, SourceError
from convhub.storage.folders import folder_at, parquet_file

CHAT_FILE, QUESTIONS_FILE = "chat.json", "probing_questions/probing_questions.json"
SCALE = re.compile(r"(?:^|[/_-])([0-9]+[KM])(?=$|[/_.-])")  # 100K, 1M, 10M: in a Hub file's path


def chat_shards(data_dir: str, listed: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """A shard per folder holding ``chat.json`` or ``probing_questions/``: ``path``, ``name`` (the chat's
    id, its path from the scale on: ``10M/1/plan-0``), ``files`` ((name in the chat, path), a plan's not)."""
    owners = {dirname(n) for n, _ in listed if basename(n) == CHAT_FILE}
    owners |= {dirname(dirname(n)) for n, _ in listed if basename(dirname(n)) == "probing_questions"}
    found = {owner: [] for owner in owners}
    for name, path in listed:
        owner = max((o for o in owners if not o or name.startswith(f"{o}/")), key=len, default=None)
        if owner is not None:
            found[owner].append((name[len(owner) + 1 :] if owner else name, path))
    result = []
    for owner, files in found.items():
        folder = join(data_dir, owner) if owner else data_dir
        full = folder if "://" in folder else os.path.abspath(folder).replace(os.sep, "/")
        scales = [match.start(1) for match in re.finditer(r"(?:^|/)([0-9]+[KM])(?=/|$)", full)]
        if not scales:
            raise SourceError(folder, None, None, "a chat outside a scale's folder (chats/<scale>/<n>/)")
        result.append({"path": folder, "name": full[scales[-1] :], "files": files})
    return sorted(result, key=lambda s: [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", s["name"])])


class ChatFiles:
    """BEAM's ``READER``: a chat folder's shard (with ``files``) is one raw chat, its files' bytes; a Hub
    Parquet file's, a raw chat per row, 10M plans after theirs. Parsing is the conversion's (``parse``)."""

    def read(self, shard: str | dict[str, Any], reject: Reject | None = None) -> Iterator[tuple[Place, Any]]:
        path, name = shard_file(shard)
        if isinstance(shard, dict) and "files" in shard:  # a chat folder, named by its id
            files = {file: folder_at(file_path).read_bytes() for file, file_path in shard["files"]}
            yield Place(path, name, name), {"id": name, "files": files}
            return
        rows = (row for batch in parquet_file(path).iter_batches(batch_size=1) for row in batch.to_pylist())
        for position, row in enumerate(rows):
            chat_id = f"{scale_of_file(name)}/{row.get('conversation_id')}"
            yield Place(path, name, chat_id, position), {"id": chat_id, "row": row}
            for index, plan in enumerate(row.get("plans") or ()):
                plan_id = f"{chat_id}/plan-{index}"
                yield Place(path, name, plan_id, position), {"id": plan_id, "row": plan, "plan": index}


def folder_chat(raw: dict[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
    """(batches, questions, extra) of a chat folder's files: JSON parsed (else a FieldError naming the file),
    UTF-8 text as text, the rest (``.pickle`` twins too, never unpickled) in ``binary_files`` as base64."""
    files, binary = dict[str, Any](), dict[str, str]()
    for name, data in raw["files"].items():
        try:
            files[name] = loads_exact(data) if name.endswith(".json") else data.decode("utf-8")
        except ValueError as error:  # a UnicodeDecodeError too
            if name.endswith(".json"):
                raise FieldError(name, f"not JSON: {error}") from None
        if name not in files or name.endswith(".pickle"):
            binary[name] = base64.b64encode(data).decode("ascii")
            files.pop(name, None)
    parsed = [name for name in (CHAT_FILE, QUESTIONS_FILE) if name in files]
    extra = {"layout": "repository", "parsed_files": parsed, "files": files, "binary_files": binary}
    return files.pop(CHAT_FILE, None), files.pop(QUESTIONS_FILE, None), extra


def scale_of_file(name: str) -> str:
    found = SCALE.search(name)
    if found is None:
        raise SourceError(name, None, None, "no BEAM scale (100K, 500K, 1M, 10M) in the Parquet file's path")
    return found.group(1)


def hub_chat(raw: dict[str, Any], place: Place) -> tuple[Any, Any, dict[str, Any]]:
    """(batches, questions, extra) of a Hub row or plan: ``probing_questions`` by ``ast.literal_eval`` (never
    ``eval``), other columns (a null one too) in ``extra.columns``, the questions' text if repr differs."""
    row = raw["row"]
    if not isinstance(row, dict):
        raise FieldError(None, f"expected an object of columns, got {type(row).__name__}")
    text = row.get("probing_questions")
    try:
        questions = None if text is None else ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as error:
        raise FieldError("probing_questions", f"not a Python literal: {error}") from None
    where = {"file": place.name, "row": place.position} | ({"plan": raw["plan"]} if "plan" in raw else {})
    extra: dict[str, Any] = {"layout": "hub", **where, "column_order": list(row)}
    parsed = ("chat", "probing_questions", "plans")
    extra["columns"] = {key: value for key, value in row.items() if key not in parsed or value is None}
    if isinstance(row.get("plans"), list):
        extra["plans"] = len(row["plans"])  # each a chat of its own, after this one
    if text is not None and repr(questions) != text:
        extra["probing_questions_text"] = text
    return row.get("chat"), questions, extra
