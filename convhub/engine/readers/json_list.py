"""A top-level JSON list read one element at a time, with ``json.loads``'s values and errors that name the byte.

ConvLab's ``dialogues.json`` (MultiWOZ's is 200+ MB) and LoCoMo's files are each one JSON list. Read whole, a
file's objects take several times its size; read here, memory follows one chunk and the largest element. Each
element is ``json.loads``'s value (``decode_with_long_lists``; ijson's C parser read lone surrogates as ``?``) and
comes with its byte range, so a worker can read it again with one seek.
"""

from __future__ import annotations

import codecs
import json
import os
import posixpath
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any

from convhub.engine.readers.contract import Place, shard_file
from convhub.engine.readers.long_lists import JSON_SPACE, LongLists, decode_with_long_lists, may_be_cut
from convhub.errors import NESTED_TOO_DEEPLY, RAW_LIMIT, Reject, SkippedBytes, SourceError
from convhub.storage.folders import open_file

_NOT_UTF8 = re.compile("[\udc80-\udcff]")  # a byte the decoder held (surrogateescape): decoded UTF-8 has none
_SCAN_SPACE = re.compile("[ \t\r\n\ufeff]*")  # (one C loop: 40 MB of spaces cost no Python step each)
#: Bytes read at a time. A chunk is held as text, at up to 4 bytes a character once it holds an emoji, and
#: copied as the scan reads on: large chunks leave a build's process holding far more than the text, small ones
#: cost time (the sizes measured: ``docs/performance.md``).
CHUNK_BYTES = 256 << 10
#: How far past a candidate element start the scan reads, after a break, to decide whether it is one.
RESYNC_MAX_CHARS = 64 << 20
#: ``large`` of :func:`~convhub.engine.readers.long_lists.decode_with_long_lists`, which reads every element.
LONG_ELEMENT_CHARS = 1 << 20


class _SkippedSpan:
    """A stretch of the file skipped after a break, taken a piece at a time as the scan lets it go: its first
    bytes, its size, and the elements it held (each has one ``"key":``; a broken object counts at least one).
    A key cut between two pieces is counted once: the last characters of a piece are searched again with the
    next."""

    _CARRY = 4096

    def __init__(self, key_pattern: re.Pattern | None, starts_in_element: bool) -> None:
        self.key_pattern, self.starts_in_element = key_pattern, starts_in_element
        self.head, self.size, self.keys, self.carry = bytearray(), 0, 0, ""

    def add(self, text: str, start: int, end: int) -> int:
        """Take ``text[start:end]``; returns its size in bytes."""
        if end <= start:
            return 0
        piece = text[start:end]
        data = piece.encode("utf-8", "surrogateescape")
        self.head += data[: max(RAW_LIMIT - len(self.head), 0)]
        self.size += len(data)
        if self.key_pattern is not None:
            searched = self.carry + piece
            self.keys += sum(
                1 for match in self.key_pattern.finditer(searched) if match.end() > len(self.carry)
            )
            self.carry = searched[-self._CARRY :]
        return len(data)

    @property
    def elements(self) -> int:
        return max(self.keys, 1) if self.starts_in_element else self.keys

    def raw(self) -> bytes | SkippedBytes:
        if self.size <= RAW_LIMIT:
            return bytes(self.head)
        return SkippedBytes(bytes(self.head), self.size)


def _byte_size(text: str, start: int, end: int) -> int:
    """The bytes ``text[start:end]`` was decoded from (a byte that is not UTF-8 held as a lone surrogate)."""
    return len(text[start:end].encode("utf-8", "surrogateescape"))


def scan_json_array(
    stream: IO[bytes],
    path: str,
    chunk_size: int = CHUNK_BYTES,
    on_break: Reject | None = None,
    element: str = "element",
    key: str | None = None,
    long_lists: LongLists = (),
    refuse_empty: bool = False,
) -> Iterator[tuple[int, int, int, Any]]:
    """(start byte, end byte, position, value) of each element of a top-level JSON list, reading a chunk at a
    time. A position counts the elements a break lost before it, so positions stay positions in the file.

    The break protocol, which every reader of a JSON list follows: where the list breaks the error is raised;
    given ``on_break`` (and ``key``, a key every element has once and nothing inside one has), the scan instead
    skips to the next ``{`` that decodes to an object with ``key`` followed by ``,`` or ``]``, hands the break to
    ``on_break`` as to a ``Reject``: ``(error, skipped, "span", records=held)``, the bytes skipped (to the next
    element that reads or the end of the file: the exact bytes, or past ``RAW_LIMIT`` their start and
    size) and the elements they held (:class:`_SkippedSpan`), and goes on: one missing comma costs no element, a
    broken element that one. Bytes that are not UTF-8 then cost the element that holds them (reported with its
    exact bytes), not the rest of the file.

    ``element`` names an element in errors; ``long_lists``: the paths :func:`decode_with_long_lists` reads lazily.
    ``refuse_empty``: a list that held no element (none read, none lost to a break) is an error.
    """
    if on_break is not None and key is None:
        raise ValueError("reading on after a break needs the key every element has")
    key_pattern = re.compile(re.escape(json.dumps(key)) + r"\s*:") if key else None
    decoder = json.JSONDecoder()
    # reading on after a break, a byte that is not UTF-8 is held as a lone surrogate (U+DC80..U+DCFF: _NOT_UTF8)
    utf8 = codecs.getincrementaldecoder("utf-8")("strict" if on_break is None else "surrogateescape")
    text, pos, byte_pos, eof = "", 0, 0, False
    # whether the buffer is ASCII: then a slice's bytes are its characters, counted, not encoded
    ascii_text = True
    read_bytes = 0  # of the file, before the chunk being decoded

    def fill(keep: bool = False) -> bool:
        """Read one more chunk (at least as much again as the buffer holds from ``pos``); False at the end. The
        text before ``pos`` is let go, unless ``keep``: an element being decoded holds positions in the buffer."""
        nonlocal text, pos, eof, read_bytes, ascii_text
        if eof:
            return False
        chunk = stream.read(max(chunk_size, len(text) - pos))
        eof = not chunk
        held = len(utf8.getstate()[0])  # the decoder's bytes of a character the last chunk cut
        try:
            text = (text if keep else text[pos:]) + utf8.decode(chunk, final=eof)
        except UnicodeDecodeError as error:
            at = read_bytes - held + error.start
            raise SourceError(path, None, None, f"not valid UTF-8 at byte {at}: {error.reason}") from error
        read_bytes += len(chunk)
        pos, ascii_text = pos if keep else 0, text.isascii()
        return True

    def read_on() -> str | None:
        """The buffer with the next chunk after it (its positions unchanged), or None at the end of the file."""
        return text if fill(keep=True) else None

    def skip_space() -> str:
        """The next character that is not whitespace (or a BOM), or "" at the end of the file."""
        nonlocal pos, byte_pos
        while True:
            end = _SCAN_SPACE.match(text, pos).end()  # type: ignore[union-attr]  (it matches no space too)
            byte_pos += end - pos + 2 * text.count("\ufeff", pos, end)  # a BOM is 3 bytes
            pos = end
            if pos < len(text) or not fill():
                return text[pos] if pos < len(text) else ""

    def starts_element(at: int) -> bool | None:
        """Whether an element of the list starts at ``text[at]`` (None: the buffer ends too soon to say)."""
        try:
            value, end = decoder.raw_decode(text, at)
        except json.JSONDecodeError as error:
            cut = may_be_cut(error, text)
            return None if cut and not eof and len(text) - at < RESYNC_MAX_CHARS else False
        except (ValueError, RecursionError):  # (an integer past Python's 4300 digits is a ValueError)
            return False
        if not isinstance(value, dict) or key not in value:
            return False
        after = JSON_SPACE.match(text, end).end()  # type: ignore[union-attr]
        if after == len(text):
            return None if not eof else False
        return text[after] in ",]"

    def resync(error: SourceError, search_from: int, in_element: bool) -> bool:
        """Skip from ``pos`` to the next element (True) or to the end of the file (False); report the skip. The
        ``error`` of the break is raised where reading on was not asked for (no ``on_break``).

        The skipped text is let go as the search passes it (a break early in a 2.75 GB file with nothing to
        resynchronize on would otherwise hold the whole rest of the file): only its first ``RAW_LIMIT``
        are kept, its size and the elements it held are counted as it goes."""
        nonlocal pos, byte_pos, index
        if on_break is None:
            raise error
        skipped = _SkippedSpan(key_pattern, in_element and text.startswith("{", pos))
        offset = search_from - pos  # (offsets from pos: filling the buffer moves pos to 0)
        while True:
            found = text.find("{", pos + offset)
            if found < 0:
                let_go(skipped, len(text))
                offset = 0
                if fill():
                    continue
                found = len(text)
                break
            verdict, offset = starts_element(found), found - pos
            if verdict is None:
                let_go(skipped, found)
                offset = 0
                if fill():
                    continue  # the same candidate, with more of the file
            if verdict:
                break
            offset += 1
        let_go(skipped, found)
        on_break(error, skipped.raw(), "span", records=skipped.elements)
        index += skipped.elements
        return found < len(text)

    def let_go(skipped: _SkippedSpan, upto: int) -> None:
        """Add ``text[pos:upto]`` to the skipped span and move ``pos`` past it."""
        nonlocal pos, byte_pos
        byte_pos += skipped.add(text, pos, upto)
        pos = upto

    def decode_element() -> tuple[Any, int] | SourceError:
        """The element at ``pos`` and its end (:func:`decode_with_long_lists`), or the error that breaks it."""
        try:
            return decode_with_long_lists(text, pos, long_lists, read_on, LONG_ELEMENT_CHARS)
        except json.JSONDecodeError as error:
            at = byte_pos + _byte_size(text, pos, error.pos)  # (error.pos counts the buffer)
            return SourceError(
                path, index, None, f"not valid JSON: {error.msg.removesuffix(' at')} at byte {at}"
            )
        except SourceError:  # (bytes that are not UTF-8, met reading on)
            raise
        except ValueError as error:  # an integer past Python's int-string limit (4300 digits)
            return SourceError(path, index, None, f"not valid JSON: {error}")
        except RecursionError:
            return SourceError(path, index, None, NESTED_TOO_DEEPLY)

    first = skip_space()
    if first == "":
        raise SourceError(path, None, None, f"the file is empty (expected a JSON list of {element}s)")
    if first != "[":
        raise SourceError(path, None, None, f"expected a JSON list of {element}s")
    pos, byte_pos = pos + 1, byte_pos + 1
    index, resumed = 0, False
    while True:
        char = skip_space()
        if char == "]" and not resumed:
            pos, byte_pos = pos + 1, byte_pos + 1
            break
        if index and not resumed:
            if char != ",":
                got = repr(char) if char else "the end of the file"
                error = SourceError(
                    path, index, None, f"expected ',' or ']' after {element} {index - 1}, got {got}"
                )
                if not resync(error, pos, in_element=False):
                    break
                resumed = True
                continue
            pos, byte_pos = pos + 1, byte_pos + 1
            skip_space()
        resumed = False
        decoded = decode_element()
        if isinstance(decoded, SourceError):
            if not resync(decoded, pos + 1, in_element=True):
                break
            resumed = True
            continue
        element_box, end = [decoded[0]], decoded[1]
        # the element is held by ``element_box`` alone, which the yield empties: not while it is used
        del decoded
        size = end - pos if ascii_text else _byte_size(text, pos, end)
        not_utf8 = _NOT_UTF8.search(text, pos, end) if on_break is not None and not ascii_text else None
        if not_utf8 and on_break is not None:
            at = byte_pos + _byte_size(text, pos, not_utf8.start())
            error = SourceError(path, index, None, f"not valid UTF-8 at byte {at}")
            on_break(error, text[pos:end].encode("utf-8", "surrogateescape"), "span", records=1)
        else:
            if end >= chunk_size:  # a large element's text is let go before it is handed on
                text, end = text[end:], 0
            yield byte_pos, byte_pos + size, index, element_box.pop()
        pos, byte_pos, index = end, byte_pos + size, index + 1
    if skip_space():
        raise SourceError(path, None, None, "data after the end of the top-level list")
    if refuse_empty and not index:  # (a list whose every element a break lost is not an empty one)
        raise SourceError(path, None, None, f"no {element}s: the list is empty")


#: Why the first element of a file is not the source's (None: it is); see :class:`JsonList`.
Recognize = Callable[[Any], "str | None"]


@dataclass(frozen=True)
class JsonList:
    """The reader of a file that is one JSON list of records (LoCoMo's samples, LongMemEval's instances).

    ``element`` names a record in errors (``sample``); ``id_field`` is the ``key`` a break is read past by
    (``--on-bad-record skip``; the protocol: :func:`scan_json_array`). ``names_by_id``: an error names a record by
    that id where it has a non-empty string one (LoCoMo's ``conv-26``), else by its position. ``recognize``,
    given, looks at the first element: where it is not the source's (LoCoMo's file beside LongMemEval's), the
    whole file is the error, not one field of one record (rejected with ``file`` scope and its first bytes).
    ``long_lists``: where a large record's long lists are (LoCoMo's sessions), for a parser that takes them lazy
    (``JSON_LIST``). A list that held no element is an error (nothing would keep the file's name)."""

    element: str
    id_field: str
    names_by_id: bool = False
    recognize: Recognize | None = None
    long_lists: LongLists = ()

    def read(self, shard: str | dict[str, Any], reject: Reject | None = None) -> Iterator[tuple[Place, Any]]:
        path, name = shard_file(shard)
        with open_file(path) as handle:
            elements = scan_json_array(
                handle,
                path,
                on_break=reject,
                element=self.element,
                key=self.id_field,
                long_lists=self.long_lists,
                refuse_empty=True,
            )
            recognize = self.recognize
            for start, end, position, value in elements:
                problem, recognize = (None if recognize is None else recognize(value)), None  # (the first)
                if problem is not None:
                    error = SourceError(path, None, None, problem)
                    if reject is None:
                        raise error
                    size = handle.seek(0, os.SEEK_END)  # the file left out whole, its first bytes kept
                    handle.seek(0)
                    reject(error, SkippedBytes(handle.read(RAW_LIMIT), size), "file")
                    return
                place = self.place(path, position, value, name, (start, end))
                value_box = [value]
                del value  # not held here while its record is converted and written
                yield place, value_box.pop()

    def place(
        self,
        path: str,
        position: int,
        value: Any,
        name: str | None = None,
        span: tuple[int, int] | tuple[None, None] = (None, None),
    ) -> Place:
        """The place of element ``position`` (``value``, its bytes ``span``) of ``path`` (listed as ``name``)."""
        record = position
        if self.names_by_id:
            found = value.get(self.id_field) if isinstance(value, dict) else None
            record = found if isinstance(found, str) and found else position
        name = name or posixpath.basename(path)
        return Place(path, name, record, position, start=span[0], end=span[1])
