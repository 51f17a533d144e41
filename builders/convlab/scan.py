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
import codecs
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

from convhub.convlab.files import DIALOGUES, SubsetInput
from convhub.errors import NESTED_TOO_DEEPLY, Reject, SourceError, raise_error, require
from convhub.jsonio import loads_exact

Ranges = list[tuple[int, int, int]]  # (start byte, end byte, position in the file) of each dialogue
SPLIT_NAME = re.compile(r"^\w+(\.\w+)*$")
#: Split names ``datasets`` keeps for itself (``all`` is the union of every split, in any case).
RESERVED_SPLITS = frozenset(("all",))
#: A key every ConvLab dialogue has once and nothing inside one has: it counts the dialogues a break holds.
_DIALOGUE_KEY = re.compile(r'"dialogue_id"\s*:')
_TEXT_SPACE = re.compile(r"[ \t\r\n]*")
_SCAN_SPACE = re.compile("[ \t\r\n\ufeff]*")  # (one C loop: 40 MB of spaces cost no Python step each)
#: How far past a candidate dialogue start the scan reads, after a break, to decide whether it is one.
_RESYNC_MAX_DIALOGUE_CHARS = 64 << 20
#: A zipped ``dialogues.json`` at least this large is copied out while it is scanned (see ``dialogue_index``).
EXTRACT_MIN_BYTES = 8 << 20
#: Called at a break in the list: the error, the exact bytes skipped (from the break to the next dialogue
#: that reads, or to the end of the file) and how many dialogues they held.
OnBreak = Callable[[SourceError, bytes, int], None]


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
    chunk_size: int = 1 << 22,
) -> dict[str, Ranges]:
    """Split → the ranges of its dialogues, in file order, checking each split name and that ids are unique.

    A bad dialogue goes to ``reject`` with its value (raising by default). When the list itself breaks, the
    rest of the file goes there once; with ``recover`` the scan reads on after the break and ``reject`` gets
    the break's bytes, scope ``"span"`` and ``records``, the dialogues it held. (Invalid UTF-8 still ends
    the scan.) A position counts the dialogues lost before it, so positions stay positions in the file.
    """
    by_split: dict[str, Ranges] = {}
    seen: set[str] = set()
    lost_before = 0

    def on_break(error: SourceError, raw: bytes, lost: int) -> None:
        nonlocal lost_before
        lost_before += lost
        reject(error, raw, "span", records=lost)

    scan = scan_json_array(stream, path, chunk_size, on_break if recover else None)
    read = 0
    while True:
        try:
            start, end, dialogue = next(scan)
        except StopIteration:
            break
        except SourceError as error:
            reject(error, None, "file")
            break
        position, read = read + lost_before, read + 1
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
    if not SPLIT_NAME.match(split):
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


def _maybe_cut(error: json.JSONDecodeError, text: str) -> bool:
    """Whether more text after the buffer's end could make this error go away (else it is the file's own):
    JSON is read left to right, so only an error at the end, or an unterminated string, may be the cut."""
    return error.pos >= len(text) - 16 or error.msg.startswith("Unterminated string")


def scan_json_array(
    stream: IO[bytes], path: str, chunk_size: int = 1 << 22, on_break: OnBreak | None = None
) -> Iterator[tuple[int, int, Any]]:
    """(start byte, end byte, value) of each element of a top-level JSON list, reading a chunk at a time.

    Where the list breaks the error is raised; given ``on_break``, the scan instead skips to the next
    ``{`` that decodes to an object with a ``dialogue_id`` followed by ``,`` or ``]``, reports the skipped
    bytes and the dialogues they held (each has one ``"dialogue_id":``; a broken object counts at least
    one), and goes on: one missing comma costs no dialogue, a broken dialogue that one.
    """
    decoder = json.JSONDecoder()
    utf8 = codecs.getincrementaldecoder("utf-8")()
    text, pos, byte_pos, eof = "", 0, 0, False
    read_bytes = 0  # of the file, before the chunk being decoded

    def fill() -> bool:
        """Read one more chunk (at least as much again as the buffer holds); False at the end."""
        nonlocal text, pos, eof, read_bytes
        if eof:
            return False
        chunk = stream.read(max(chunk_size, len(text) - pos))
        eof = not chunk
        held = len(utf8.getstate()[0])  # the decoder's bytes of a character the last chunk cut
        try:
            text = text[pos:] + utf8.decode(chunk, final=eof)
        except UnicodeDecodeError as error:
            at = read_bytes - held + error.start
            raise SourceError(path, None, None, f"not valid UTF-8 at byte {at}: {error.reason}") from error
        read_bytes += len(chunk)
        pos = 0
        return True

    def skip_space() -> str:
        """The next character that is not whitespace (or a BOM), or "" at the end of the file."""
        nonlocal pos, byte_pos
        while True:
            end = _SCAN_SPACE.match(text, pos).end()
            byte_pos += end - pos + 2 * text.count("\ufeff", pos, end)  # a BOM is 3 bytes
            pos = end
            if pos < len(text) or not fill():
                return text[pos] if pos < len(text) else ""

    def starts_dialogue(at: int) -> bool | None:
        """Whether a dialogue of the list starts at ``text[at]`` (None: the buffer ends too soon to say)."""
        try:
            value, end = decoder.raw_decode(text, at)
        except json.JSONDecodeError as error:
            cut = _maybe_cut(error, text)
            return None if cut and not eof and len(text) - at < _RESYNC_MAX_DIALOGUE_CHARS else False
        except RecursionError:
            return False
        if not isinstance(value, dict) or "dialogue_id" not in value:
            return False
        after = _TEXT_SPACE.match(text, end).end()
        if after == len(text):
            return None if not eof else False
        return text[after] in ",]"

    def resync(error: SourceError, search_from: int, in_element: bool) -> bool:
        """Skip from ``pos`` to the next dialogue (True) or to the end of the file (False); report the skip."""
        nonlocal pos, byte_pos, index
        offset = search_from - pos  # (offsets from pos: filling the buffer moves pos to 0)
        while True:
            found = text.find("{", pos + offset)
            if found < 0:
                offset = len(text) - pos
                if fill():
                    continue
                found = len(text)
                break
            verdict, offset = starts_dialogue(found), found - pos
            if verdict is None and fill():
                continue  # the same candidate, with more of the file
            if verdict:
                break
            offset += 1
        span = text[pos:found]
        raw = span.encode("utf-8")
        lost = len(_DIALOGUE_KEY.findall(span))
        if in_element and span.startswith("{"):  # a broken object is a dialogue even without its id
            lost = max(lost, 1)
        on_break(error, raw, lost)
        pos, byte_pos, index = found, byte_pos + len(raw), index + lost
        return found < len(text)

    def decode_element() -> tuple[Any, int] | SourceError:
        """The element at ``pos`` and its end, reading more where the buffer cuts it, or what breaks it."""
        while True:
            try:
                value, end = decoder.raw_decode(text, pos)
            except json.JSONDecodeError as error:
                if _maybe_cut(error, text) and fill():
                    continue
                at = byte_pos + len(text[pos : error.pos].encode("utf-8"))  # (error.pos counts the buffer)
                broken = SourceError(path, index, None, f"not valid JSON at byte {at}: {error.msg}")
                if on_break is None:
                    raise broken from error
                return broken
            except RecursionError:
                if on_break is None:
                    raise SourceError(path, index, None, NESTED_TOO_DEEPLY) from None
                return SourceError(path, index, None, NESTED_TOO_DEEPLY)
            if end == len(text) and not eof and not isinstance(value, (dict, list)) and fill():
                continue  # a number cut at the chunk's end
            return value, end

    first = skip_space()
    if first == "":
        raise SourceError(path, None, None, "the file is empty (expected a JSON list of dialogues)")
    if first != "[":
        raise SourceError(path, None, None, "expected a JSON list of dialogues")
    pos, byte_pos = pos + 1, byte_pos + 1
    index, resumed = 0, False
    while True:
        char = skip_space()
        if char == "]" and not resumed:
            pos, byte_pos = pos + 1, byte_pos + 1
            break
        if index and not resumed:
            if char != ",":
                error = SourceError(
                    path, index, None, f"expected ',' or ']' after dialogue {index - 1}, got {char!r}"
                )
                if on_break is None:
                    raise error
                if not resync(error, pos, in_element=False):
                    return
                resumed = True
                continue
            pos, byte_pos = pos + 1, byte_pos + 1
            skip_space()
        resumed = False
        decoded = decode_element()
        if isinstance(decoded, SourceError):
            if not resync(decoded, pos + 1, in_element=True):
                return
            resumed = True
            continue
        value, end = decoded
        size = len(text[pos:end].encode("utf-8"))
        yield byte_pos, byte_pos + size, value
        pos, byte_pos, index = end, byte_pos + size, index + 1
    if skip_space():
        raise SourceError(path, None, None, "data after the end of the top-level list")
