"""``dialogues.json`` without loading it whole: one scan learns each dialogue's split and byte range.

``dialogues.json`` is one JSON list (MultiWOZ's is 200+ MB). :func:`index_dialogues` walks it once, one
chunk and one dialogue in memory, and gives each split's dialogues as byte ranges; a shard is a list of
ranges one worker reads with forward seeks (:func:`read_ranges`), so ``num_proc`` workers share the file.

Under ``--on-bad-record skip`` a break in the list (invalid JSON, a missing comma, a truncated end) costs
only the dialogues it holds: the scan reads on from the next dialogue, and the quarantine gets the exact
bytes it skipped and how many dialogues they held (tests/convlab/test_convlab_hostile.py).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from typing import IO, Any

from builders.convlab.files import DIALOGUES, SubsetInput
from convhub.engine.json_list import CHUNK_BYTES, scan_json_array
from convhub.engine.jsonio import loads_exact
from convhub.engine.shards import RESERVED_SPLITS, SPLIT_NAME
from convhub.errors import Reject, SourceError, raise_error, require

Ranges = list[tuple[int, int, int]]  # (start byte, end byte, position in the file) of each dialogue
#: A zipped ``dialogues.json`` at least this large is inflated to one copy before it is scanned (``dialogue_index``).
EXTRACT_MIN_BYTES = 8 << 20


# -- the index of a subset's dialogues ---------------------------------------------------------

#: stat key of an input → (split → its dialogues' ranges, the copy of a large zipped dialogues.json or None)
_INDEX_CACHE: dict[tuple, tuple[dict[str, Ranges], str | None]] = {}
_TEMP_DIR: list = []  # [folder, pid of the process that made it]


def dialogue_index(
    source: SubsetInput, reject: Reject = raise_error, recover: bool = False
) -> tuple[dict[str, Ranges], str | None]:
    """(split → byte ranges of its dialogues, the copy to read them from); scanned and copied once per file
    and process, so that streams of several configs, and a build after them, make one temporary copy. Bad
    dialogues go to ``reject``; an index that rejected some is not kept, so that each build reports them.

    A zipped dialogues.json of ``EXTRACT_MIN_BYTES`` or more is first inflated to a temporary copy, which the
    scan and every shard then read: a zip member cannot seek, so each shard would otherwise inflate it again
    from its start, a cost that grows with the square of the file (MultiWOZ: 14 shards). At bench scale 0.2
    (35 MB, 6 shards) the shards read in 0.4 s instead of 1.2 s.
    (``test_every_large_split_gets_two_shards_and_a_large_zip_is_read_from_one_copy``.)
    """
    key = source.stat_key()
    if key in _INDEX_CACHE:
        return _INDEX_CACHE[key]
    rejected = []

    def counting_reject(error, raw=None, scope="record", records=None):
        rejected.append(error)
        reject(error, raw, scope, records=records)

    copy = None
    if source.kind == "zip" and source.zipped_size(DIALOGUES) >= EXTRACT_MIN_BYTES:
        copy = _copy_path(source)
        with source.open(DIALOGUES) as member, open(copy, "wb") as written:
            shutil.copyfileobj(member, written, 16 << 20)
    with open(copy, "rb") if copy else source.open(DIALOGUES) as stream:
        index = index_dialogues(stream, source.label(DIALOGUES), counting_reject, recover)
    if not rejected:
        _INDEX_CACHE[key] = (index, copy)
    return index, copy


def _copy_path(source: SubsetInput) -> str:
    """A new file in this process's temporary folder (under ``$CONVHUB_TMPDIR`` when set), removed at exit."""
    if not _TEMP_DIR or _TEMP_DIR[1] != os.getpid():
        folder = tempfile.mkdtemp(prefix="convhub-convlab-", dir=os.environ.get("CONVHUB_TMPDIR"))
        _TEMP_DIR[:] = [folder, os.getpid()]
        atexit.register(_remove_temp_dir, *_TEMP_DIR)
    handle, path = tempfile.mkstemp(dir=_TEMP_DIR[0], suffix=f"-{source.name}-{DIALOGUES}")
    os.close(handle)
    return path


def _remove_temp_dir(folder: str, pid: int) -> None:
    if os.getpid() == pid:  # a forked worker inherits the hook: only the process that made it removes it
        shutil.rmtree(folder, ignore_errors=True)


# -- the scan ----------------------------------------------------------------------------------


def index_dialogues(
    stream: IO[bytes],
    path: str,
    reject: Reject = raise_error,
    recover: bool = False,
    chunk_size: int = CHUNK_BYTES,
) -> dict[str, Ranges]:
    """Split → the ranges of its dialogues, in file order, checking each split name and that ids are unique.

    A bad dialogue goes to ``reject`` with its value (raising by default). When the list itself breaks, the
    rest of the file goes there once; with ``recover`` the scan reads on after the break and ``reject`` gets
    the break's bytes, scope ``"span"`` and ``records``, the dialogues it held. (Invalid UTF-8 still ends
    the scan.) A position counts the dialogues lost before it, so positions stay positions in the file.
    """
    by_split: dict[str, Ranges] = {}
    seen: set[str] = set()

    def on_break(error: SourceError, raw: bytes, lost: int) -> None:
        reject(error, raw, "span", records=lost)

    scan = scan_json_array(
        stream, path, chunk_size, on_break if recover else None, element="dialogue", key="dialogue_id"
    )
    while True:
        try:
            start, end, position, dialogue = next(scan)
        except StopIteration:
            break
        except SourceError as error:
            reject(error, None, "file")
            break
        try:
            check_indexable(dialogue, position, path, seen)
        except SourceError as error:
            reject(error, dialogue)
            continue
        seen.add(dialogue["dialogue_id"])
        by_split.setdefault(dialogue["data_split"], []).append((start, end, position))
    return by_split


def check_indexable(dialogue: Any, position: int, path: str, seen: set[str]) -> None:
    """What the index needs of one dialogue: an object with a usable split and an id not ``seen``."""
    if not isinstance(dialogue, dict):
        raise SourceError(path, position, None, f"expected a dialogue object, got {type(dialogue).__name__}")
    split = require(dialogue, "data_split", str, path, position)
    if not SPLIT_NAME.fullmatch(split):
        raise SourceError(path, position, "data_split", f"{split!r} is not a usable split name")
    if split.lower() in RESERVED_SPLITS:
        named = dialogue.get("dialogue_id")
        named = f"dialogue {named!r}: " if isinstance(named, str) else ""
        problem = f"{named}{split!r} is a split name datasets reserves (the union of every split)"
        raise SourceError(path, position, "data_split", problem)
    dialogue_id = require(dialogue, "dialogue_id", str, path, position)
    if dialogue_id in seen:
        raise SourceError(path, position, "dialogue_id", f"duplicate dialogue_id {dialogue_id!r}")


def read_ranges(
    stream: IO[bytes], ranges: Iterable[tuple[int, int, int]], path: str
) -> Iterator[tuple[int, Any]]:
    """(position, dialogue) for each byte range, read in file order with forward seeks only."""
    for start, end, position in sorted(ranges):
        stream.seek(start)
        data = stream.read(end - start)
        try:
            yield position, loads_exact(data)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise SourceError(path, position, None, f"not valid JSON: {error}") from error
