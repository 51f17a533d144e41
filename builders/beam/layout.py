"""Where BEAM's chats are and how each is read, in both published layouts (``docs/sources.md``, BEAM): the
repository's folders ``chats/<scale>/<n>/`` (10M: ``plan-<k>/`` chats inside) and the Hub's Parquet files (a row
per chat, 10M rows' ``plans`` inside), into the one shape ``parse.convert_chat`` reads."""

from __future__ import annotations

import ast
import base64
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from convhub.engine.readers.exact_json import loads_exact
from convhub.errors import FieldError, SourceError
from convhub.storage.folders import parquet_file

CHAT_FILE, QUESTIONS_FILE = "chat.json", "probing_questions/probing_questions.json"
#: A scale as BEAM names it (``100K``, ``1M``, ``10M``): a folder of the repository, a part of a Hub file's path.
SCALE = re.compile(r"(?:^|[/_-])([0-9]+[KM])(?=$|[/_.-])")


def is_chat_folder(folder: str) -> bool:
    return any(os.path.exists(os.path.join(folder, name)) for name in (CHAT_FILE, "probing_questions"))


def chat_folders(data_dir: str) -> list[tuple[str, str]]:
    """(conversation id: the path from the scale on, ``10M/1/plan-0``, folder) of every chat under ``data_dir``."""
    found = []
    for root, folders, _ in os.walk(data_dir):
        folders[:] = [name for name in folders if not name.startswith(".")]
        if is_chat_folder(root):
            parts = os.path.abspath(root).replace(os.sep, "/").split("/")
            scales = [index for index, part in enumerate(parts) if SCALE.fullmatch("/" + part)]
            if not scales:
                raise SourceError(root, None, None, "a chat outside a scale's folder (chats/<scale>/<n>/)")
            found.append(("/".join(parts[scales[-1] :]), root))
    return sorted(found, key=lambda i: [int(p) if p.isdigit() else p for p in re.split("([0-9]+)", i[0])])


def read_folder(conversation_id: str, folder: str) -> dict[str, Any]:
    """A chat folder, every file but a plan's: JSON parsed (else a FieldError naming the file), UTF-8 text as text,
    the rest (``.pickle`` twins too, never unpickled) in ``binary_files`` as base64."""
    files, binary = dict[str, Any](), dict[str, str]()
    for root, folders, names in os.walk(folder):
        folders[:] = sorted(n for n in folders if not is_chat_folder(os.path.join(root, n)))
        for path in (os.path.join(root, name) for name in sorted(names)):
            name = os.path.relpath(path, folder).replace(os.sep, "/")
            raw = Path(path).read_bytes()
            try:
                text = None if name.endswith(".pickle") else raw.decode("utf-8")
            except UnicodeDecodeError:
                text = None
            if name.endswith(".json"):
                try:
                    files[name] = loads_exact(raw)
                except ValueError as error:
                    raise FieldError(name, f"not JSON: {error}") from None
            elif text is None:
                binary[name] = base64.b64encode(raw).decode("ascii")
            else:
                files[name] = text
    parsed = [name for name in (CHAT_FILE, QUESTIONS_FILE) if name in files]
    chat = {"conversation_id": conversation_id, "scale": conversation_id.split("/")[0]}
    chat |= {"batches": files.pop(CHAT_FILE, None), "questions": files.pop(QUESTIONS_FILE, None)}
    extra = {"layout": "repository", "parsed_files": parsed, "files": files, "binary_files": binary}
    return chat | {"extra": extra}


def scale_of_file(name: str) -> str:
    found = SCALE.search(name)
    if found is None:
        raise SourceError(name, None, None, "no BEAM scale (100K, 500K, 1M, 10M) in the Parquet file's path")
    return found.group(1)


def hub_rows(name: str, path: str) -> Iterator[tuple[str, tuple]]:
    """(conversation id, :func:`hub_chat`'s arguments) of every row of a Hub file, a 10M row's plans after it."""
    scale = scale_of_file(name)
    rows = (row for batch in parquet_file(path).iter_batches(batch_size=1) for row in batch.to_pylist())
    for position, row in enumerate(rows):
        conversation_id = f"{scale}/{row.get('conversation_id')}"
        yield conversation_id, (conversation_id, scale, row, {"file": name, "row": position})
        plans = row.get("plans")
        for index, plan in enumerate(plans if isinstance(plans, list) else ()):
            place = {"file": name, "row": position, "plan": index}
            yield f"{conversation_id}/plan-{index}", (f"{conversation_id}/plan-{index}", scale, plan, place)


def hub_chat(conversation_id: str, scale: str, row: Any, place: dict[str, Any]) -> dict[str, Any]:
    """A Hub row (or plan): ``chat`` and ``probing_questions`` (``ast.literal_eval``, never ``eval``) parsed, the
    other columns (a null one too) in ``extra.columns``; the questions' text where ``repr`` would not give it."""
    if not isinstance(row, dict):
        raise FieldError(None, f"expected an object of columns, got {type(row).__name__}")
    text = row.get("probing_questions")
    try:
        questions = None if text is None else ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as error:
        raise FieldError("probing_questions", f"not a Python literal: {error}") from None
    parsed = ("chat", "probing_questions", "plans")
    extra: dict[str, Any] = {"layout": "hub", **place, "column_order": list(row)}
    extra["columns"] = {key: value for key, value in row.items() if key not in parsed or value is None}
    if isinstance(row.get("plans"), list):
        extra["plans"] = len(row["plans"])  # each a chat of its own, after this one
    if text is not None and repr(questions) != text:
        extra["probing_questions_text"] = text
    chat = {"conversation_id": conversation_id, "scale": scale, "batches": row.get("chat")}
    return chat | {"questions": questions, "extra": extra}
