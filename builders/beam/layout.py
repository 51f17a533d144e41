"""Where BEAM's chats are and how each is read, in both published layouts, into the one shape ``parse`` converts.

- The repository: ``chats/<scale>/<n>/`` per chat (``--data-dir`` may be the folder holding ``chats/``, ``chats/``
  itself or one scale's folder); the 10M scale's ``chats/10M/<n>/plan-<k>/`` are chats of their own
  (``10M/<n>/plan-<k>``). A chat is ``chat.json`` (batches), ``probing_questions/probing_questions.json`` and every
  other file of its folder, in the conversation's ``extra.files`` by its path in the folder: JSON files as JSON
  values, UTF-8 text as text, anything else (the ``.pickle`` twins: never unpickled) in ``extra.binary_files``
  as base64.
- The Hub (``Mohammadta/BEAM``, ``Mohammadta/BEAM-10M``): Parquet, one row per chat, the scale in the file's path
  (``100K-00000-of-00001.parquet``, ``100K/0000.parquet``); ``probing_questions`` a Python literal
  (``ast.literal_eval``, never ``eval``); the 10M rows' ``plans`` are chats ``10M/<id>/plan-<k>`` of their own.
"""

from __future__ import annotations

import ast
import base64
import os
import re
from collections.abc import Iterator
from typing import Any

from convhub.engine.readers.exact_json import loads_exact
from convhub.errors import FieldError, SourceError
from convhub.storage.folders import parquet_file

CHAT_FILE, QUESTIONS_FILE = "chat.json", "probing_questions/probing_questions.json"
#: A scale as BEAM names it (``100K``, ``1M``, ``10M``): a folder of the repository, a part of a Hub file's name.
SCALE = re.compile(r"(?:^|[/_-])([0-9]+[KM])(?=$|[/_.-])")
#: The Hub columns a chat's turns and questions are made of; every other column is kept in ``extra.columns``.
HUB_PARSED = ("chat", "probing_questions")


def natural(path: str) -> list:
    """``100K/2`` before ``100K/10``."""
    return [int(part) if part.isdigit() else part for part in re.split(r"([0-9]+)", path)]


def is_chat_folder(folder: str) -> bool:
    return os.path.isfile(os.path.join(folder, CHAT_FILE)) or os.path.isdir(os.path.join(folder, "probing_questions"))


def holds_chat_folder(data_dir: str) -> bool:
    """Whether ``data_dir`` is in the repository's layout (else it is taken for the Hub's Parquet files)."""
    return any(is_chat_folder(root) for root, _, _ in os.walk(data_dir))


def chat_folders(data_dir: str) -> list[tuple[str, str]]:
    """(conversation id, folder) of every chat under ``data_dir``, the id the folder's path from its scale on."""
    found = []
    for root, folders, _ in os.walk(data_dir):
        folders[:] = [name for name in folders if not name.startswith(".")]
        if is_chat_folder(root):
            parts = os.path.abspath(root).replace(os.sep, "/").split("/")
            scales = [index for index, part in enumerate(parts) if SCALE.fullmatch("/" + part)]
            if not scales:
                raise SourceError(root, None, None, "a BEAM chat outside a scale's folder (chats/<scale>/<n>/)")
            found.append(("/".join(parts[scales[-1] :]), root))
    if not found:
        raise FileNotFoundError(f"no BEAM chat (a folder holding chat.json) in {data_dir}")
    return sorted(found, key=lambda item: natural(item[0]))


def folder_files(folder: str) -> Iterator[tuple[str, str]]:
    """(name in the chat, path) of every file of the chat's folder, not those of a chat inside it (a plan)."""
    for root, folders, names in os.walk(folder):
        folders[:] = sorted(n for n in folders if not is_chat_folder(os.path.join(root, n)))
        for name in sorted(names):
            path = os.path.join(root, name)
            yield os.path.relpath(path, folder).replace(os.sep, "/"), path


def read_folder(conversation_id: str, folder: str) -> dict[str, Any]:
    """A chat of the repository's layout, read (``parse.convert_chat``'s input); a file that is not what its
    name says (JSON that does not parse) is a FieldError naming the file."""
    files: dict[str, Any] = {}
    binary: dict[str, str] = {}
    for name, path in folder_files(folder):
        with open(path, "rb") as handle:
            raw = handle.read()
        if name.endswith(".json"):
            try:
                files[name] = loads_exact(raw)
            except ValueError as error:
                raise FieldError(name, f"not JSON: {error}") from None
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is None or name.endswith(".pickle"):
            binary[name] = base64.b64encode(raw).decode("ascii")
        else:
            files[name] = text
    extra: dict[str, Any] = {"layout": "repository", "parsed_files": [n for n in (CHAT_FILE, QUESTIONS_FILE) if n in files]}
    chat = {"conversation_id": conversation_id, "scale": conversation_id.split("/")[0]}
    chat |= {"batches": files.pop(CHAT_FILE, None), "questions": files.pop(QUESTIONS_FILE, None)}
    extra |= {"files": files, "binary_files": binary}
    return chat | {"extra": extra}


def scale_of_file(name: str) -> str:
    found = SCALE.search(name)
    if found is None:
        raise SourceError(name, None, None, "no BEAM scale (100K, 500K, 1M, 10M) in the Parquet file's name")
    return found.group(1)


def hub_rows(name: str, path: str) -> Iterator[tuple[str, tuple]]:
    """(conversation id, chat) of every row of a Hub Parquet file, a 10M row's plans after it."""
    scale = scale_of_file(name)
    file = parquet_file(path)
    position = 0
    for batch in file.iter_batches(batch_size=1):
        for row in batch.to_pylist():
            yield from hub_chats(scale, name, position, row)
            position += 1


def hub_chats(scale: str, name: str, position: int, row: dict[str, Any]) -> Iterator[tuple[str, tuple]]:
    """A Hub row's chat and, in ``BEAM-10M``, each of its ``plans`` as a chat of its own: (conversation id,
    :func:`hub_chat`'s arguments)."""
    conversation_id = f"{scale}/{row.get('conversation_id')}"
    yield conversation_id, (conversation_id, scale, row, {"file": name, "row": position})
    plans = row.get("plans")
    for index, plan in enumerate(plans if isinstance(plans, list) else ()):
        plan_id = f"{conversation_id}/plan-{index}"
        place = {"file": name, "row": position, "plan": index}
        yield plan_id, (plan_id, scale, plan, place)


def hub_chat(conversation_id: str, scale: str, row: dict[str, Any], place: dict[str, Any]) -> dict[str, Any]:
    """One Hub row (or plan) → ``parse.convert_chat``'s input: ``chat`` and the questions parsed, every other column
    in ``extra.columns`` (their order in ``extra.column_order``); the questions' text kept where Python's ``repr``
    of the parsed literal would not give it back."""
    if not isinstance(row, dict):
        raise FieldError(None, f"expected an object of columns, got {type(row).__name__}")
    text = row.get("probing_questions")
    questions = None
    if isinstance(text, str):
        try:
            questions = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError) as error:
            raise FieldError("probing_questions", f"not a Python literal: {error}") from None
    elif text is not None:
        raise FieldError("probing_questions", f"expected a string, got {type(text).__name__}")
    extra: dict[str, Any] = {"layout": "hub", **place, "column_order": list(row)}
    parsed = (*HUB_PARSED, "plans")  # a null chat or questions column is kept as a column, as it is
    extra["columns"] = {key: value for key, value in row.items() if key not in parsed or value is None}
    if isinstance(row.get("plans"), list):
        extra["plans"] = len(row["plans"])  # each a chat of its own, after this one
    if isinstance(text, str) and repr(questions) != text:
        extra["probing_questions_text"] = text
    return {"conversation_id": conversation_id, "scale": scale, "batches": row.get("chat"), "questions": questions, "extra": extra}
