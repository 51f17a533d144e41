"""Where BEAM's chats are and how each is read, in both published layouts (``docs/sources.md``, BEAM): the
repository's folders ``chats/<scale>/<n>/`` (10M: ``plan-<k>/`` chats inside) and the Hub's Parquet files (a row
per chat, 10M rows' ``plans`` inside), into the one shape ``parse.convert_chat`` reads."""

from __future__ import annotations

import ast
import base64
import os
import re
from collections.abc import Iterator
from posixpath import basename, dirname, join
from typing import Any

from convhub.engine.readers.exact_json import loads_exact
from convhub.errors import FieldError, SourceError
from convhub.storage.folders import open_file, parquet_file

CHAT_FILE, QUESTIONS_FILE = "chat.json", "probing_questions/probing_questions.json"
#: A scale as BEAM names it (``100K``, ``1M``, ``10M``): a folder of the repository, a part of a Hub file's path.
SCALE = re.compile(r"(?:^|[/_-])([0-9]+[KM])(?=$|[/_.-])")


def chats(data_dir: str, listed: list[tuple[str, str]]) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """(conversation id: the path from its scale on, ``10M/1/plan-0``; folder; its files as (name in the chat,
    path), a plan's not) of every folder holding ``chat.json`` or ``probing_questions/`` in ``listed``."""
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
        parts = (folder if "://" in folder else os.path.abspath(folder).replace(os.sep, "/")).split("/")
        scales = [index for index, part in enumerate(parts) if SCALE.fullmatch("/" + part)]
        if not scales:
            raise SourceError(folder, None, None, "a chat outside a scale's folder (chats/<scale>/<n>/)")
        result.append(("/".join(parts[scales[-1] :]), folder, files))
    return sorted(result, key=lambda i: [int(p) if p.isdigit() else p for p in re.split("([0-9]+)", i[0])])


def read_folder(conversation_id: str, listed: list[tuple[str, str]]) -> dict[str, Any]:
    """A chat's files: JSON parsed (else a FieldError naming the file), UTF-8 text as text, the rest
    (``.pickle`` twins too, never unpickled) in ``binary_files`` as base64."""
    files, binary = dict[str, Any](), dict[str, str]()
    for name, path in listed:
        with open_file(path) as handle:
            raw = handle.read()
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
    """(conversation id, (:func:`hub_chat`, its arguments)) of every row of a Hub file, 10M plans after theirs."""
    scale = scale_of_file(name)
    rows = (row for batch in parquet_file(path).iter_batches(batch_size=1) for row in batch.to_pylist())
    for position, row in enumerate(rows):
        conversation_id = f"{scale}/{row.get('conversation_id')}"
        yield conversation_id, (hub_chat, (conversation_id, scale, row, {"file": name, "row": position}))
        for index, plan in enumerate(row.get("plans") or ()):
            place, plan_id = {"file": name, "row": position, "plan": index}, f"{conversation_id}/plan-{index}"
            yield plan_id, (hub_chat, (plan_id, scale, plan, place))


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
