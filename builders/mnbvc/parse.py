"""MNBVC dialogue rows (多轮对话, 问答, 论坛) → canonical conversation records.

Pure functions, no ``datasets``: reading JSONL lines (plain or gzipped, LF or CRLF), the tolerant reader
for the ``扩展字段`` JSON strings, MNBVC dates, format detection, and one function per format that turns
source rows into canonical records.

What is kept so that a later export can rebuild every source row exactly: the turn that a source row
starts (the question of a Q/A pair, the topic post of a forum thread) carries in its ``extra`` the file,
the line, the row with only its text fields taken out (``row``, every value with its own JSON type, the
raw ``扩展字段`` string included) and the row's key order (``keys``). Forum replies carry their own reply
object the same way.
"""

from __future__ import annotations

import functools
import gzip
import io
import json
import logging
import mmap
import os
import re
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, BinaryIO

import numpy as np
import orjson
from convhub import schema
from convhub.errors import NESTED_TOO_DEEPLY, Notes, Reject, SourceError, raise_error
from convhub.jsonio import refuse_json_document

logger = logging.getLogger(__name__)

MULTITURN, QA, FORUM = "multiturn", "qa", "forum"
FORMATS = (MULTITURN, QA, FORUM)
#: Names a user may give for a format (``--format``), MNBVC's own names included.
FORMAT_ALIASES = {
    MULTITURN: MULTITURN,
    "multi-turn": MULTITURN,
    "dialogue": MULTITURN,
    "多轮对话": MULTITURN,
    QA: QA,
    "问答": QA,
    "问答语料": QA,
    FORUM: FORUM,
    "论坛": FORUM,
    "论坛语料": FORUM,
}

QUESTION_SPEAKER, ANSWER_SPEAKER = "问", "答"
TOPIC_SPEAKER = "楼主"
#: Forum speakers that name the thread's author (树洞 boards write 洞主): their replies map to ``user``.
THREAD_AUTHOR_NAMES = frozenset({"楼主", "洞主"})
TOPIC_TURN_ID = "topic"
DETECT_ROWS = 50
MAX_WARNINGS_PER_FILE = 20
#: A gap in 多轮序号 of at most this many numbers is listed number by number (``missing_多轮序号``);
#: beyond, as [first, last] ranges (``missing_多轮序号_ranges``). The raw 多轮序号 of every row is kept either way.
MAX_MISSING_LISTED = 1000


def normalize_format(name: str) -> str:
    try:
        return FORMAT_ALIASES[name.strip().lower()]
    except KeyError:
        raise ValueError(f"unknown MNBVC format {name!r}; formats: {', '.join(FORMATS)}") from None


# -- reading lines ------------------------------------------------------------------------------------


def open_local(path: str) -> BinaryIO:
    return open(path, "rb")


def open_lines(opener: Callable[[], BinaryIO], name: str = "<stream>") -> Iterator[tuple[int, bytes]]:
    """(line number from 1, line without its LF or CRLF) of a JSONL file, gunzipped when it is gzip.

    ``opener`` returns a binary file object: ``open`` for local files, datasets' ``xopen`` when streaming
    (URLs, fsspec paths). Gzip is recognized by its magic bytes, not by the name. Lines are bytes: JSON
    text cannot hold a raw newline, so splitting on LF is exact, and CRLF endings lose their CR here.
    """
    with opener() as raw:
        buffered = raw if hasattr(raw, "peek") else io.BufferedReader(raw)
        gzipped = buffered.peek(2)[:2] == b"\x1f\x8b"
        stream = gzip.GzipFile(fileobj=buffered) if gzipped else buffered
        number = 0
        try:
            for number, line in enumerate(stream, start=1):
                yield number, line.rstrip(b"\n").rstrip(b"\r")
        except (OSError, EOFError, zlib.error) as error:
            kind = "corrupt or truncated gzip" if gzipped else "unreadable file"
            problem = f"cannot read the file ({kind}): {error}"
            raise SourceError(name, f"line {number + 1}", None, problem) from error
        finally:
            if stream is not buffered:
                stream.close()


def is_gzip(path: str) -> bool:
    """Gzip by its magic bytes, as ``open_lines`` decides."""
    with open(path, "rb") as file:
        return file.read(2) == b"\x1f\x8b"


def line_ranges(path: str, range_bytes: int) -> list[tuple[int, int, int]]:
    """(start, end, number of the first line) of line-aligned byte ranges of about ``range_bytes`` each
    that cover a plain (not gzipped) JSONL file, so one big file can be read by several workers.

    Each boundary is the byte after the first LF at or after an even cut, so a range never splits a line
    (a cut inside a line moves to its end); the line numbers count LFs, as ``open_lines`` does.
    """
    size = os.path.getsize(path)
    count = -(-size // range_bytes) if range_bytes > 0 else 1
    if count <= 1:
        return [(0, size, 1)]
    ranges, start, first_line = [], 0, 1
    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        for cut in (size * index // count for index in range(1, count)):
            if cut <= start:
                continue
            newline = mapped.find(b"\n", cut - 1)
            if newline < 0 or newline + 1 >= size:
                break
            end = newline + 1
            ranges.append((start, end, first_line))
            first_line += mapped[start:end].count(b"\n")
            start = end
    ranges.append((start, size, first_line))
    return ranges


def range_lines(path: str, name: str, start: int, end: int, first_line: int) -> Iterator[tuple[int, bytes]]:
    """``open_lines`` of the lines of a plain file between the line-aligned offsets ``start`` and ``end``
    (see ``line_ranges``), numbered from ``first_line`` so that errors name the file's own line."""
    number = first_line - 1
    remaining = end - start
    with open(path, "rb") as file:
        file.seek(start)
        try:
            for number, line in enumerate(file, start=first_line):
                remaining -= len(line)
                yield number, line.rstrip(b"\n").rstrip(b"\r")
                if remaining <= 0:
                    break
        except OSError as error:
            problem = f"cannot read the file (unreadable file): {error}"
            raise SourceError(name, f"line {number + 1}", None, problem) from error


def loads(text: bytes | str) -> Any:
    """``json.loads(text)``, through orjson (2-3x faster) when orjson gives exactly the same value.

    orjson rejects what ``json`` reads leniently (NaN, Infinity, a BOM, lone surrogates, UTF-16):
    ``json`` then reads it, or raises its own error. orjson also reads an integer beyond 64 bits as a
    float without a word; such a value holds a float, so a result with any float is read again by ``json``.
    """
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return _json_loads(text)
    return _json_loads(text) if _holds_float(value) else value


def _holds_float(value: Any) -> bool:
    """``jsonio.holds_float`` as one loop, without a generator: MNBVC's rows and 扩展字段 objects are
    small, so setting up the generator cost more than the walk."""
    kind = type(value)
    if kind is float:
        return True
    if kind is not dict and kind is not list:
        return False
    pending = [value]
    while pending:
        container = pending.pop()
        for item in container.values() if type(container) is dict else container:
            kind = type(item)
            if kind is str or kind is int:
                continue
            if kind is float:
                return True
            if kind is dict or kind is list or kind is tuple:
                pending.append(item)
    return False


def _json_loads(text: bytes | str) -> Any:
    """``json.loads``, where an integer past Python's int-string limit (4300 digits), a plain
    ValueError that would escape as a crash, is a JSONDecodeError like any other unreadable text."""
    try:
        return json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise
    except ValueError as error:
        document = text if isinstance(text, str) else text.decode("utf-8", "replace")
        raise json.JSONDecodeError(str(error), document, 0) from error


def load_row(line: bytes, path: str, number: int) -> dict[str, Any] | None:
    """One JSONL row as a dict (``None`` for a blank line); anything else is a SourceError."""
    if not line or line.isspace():  # ``not line.strip()`` without copying the line
        return None
    try:
        row = loads(line)
    except UnicodeDecodeError as error:
        raise SourceError(path, f"line {number}", None, f"not UTF-8: {error}") from error
    except json.JSONDecodeError as error:
        raise SourceError(path, f"line {number}", None, f"not valid JSON: {error}") from error
    except RecursionError:
        raise SourceError(path, f"line {number}", None, NESTED_TOO_DEEPLY) from None
    if not isinstance(row, dict):
        raise SourceError(path, f"line {number}", None, f"expected a JSON object, got {type(row).__name__}")
    return row


def readable_lines(lines: Iterable[tuple[int, bytes]], reject: Reject) -> Iterator[tuple[int, bytes]]:
    """``lines`` until one cannot be read (corrupt gzip): that error goes to ``reject`` (scope: the file)."""
    lines = iter(lines)
    while True:
        try:
            yield next(lines)
        except StopIteration:
            return
        except SourceError as error:
            reject(error, None, "file")
            return


def iter_rows(
    lines: Iterable[tuple[int, bytes]], path: str, reject: Reject = raise_error
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, row) of each JSON object line; a bad line goes to ``reject`` (raising by default),
    and a file that cannot be read on from some line goes there once (its earlier rows stay). A file that
    is one JSON document (an array or object over many lines) is one SourceError naming the file."""
    for number, line in refuse_json_document(readable_lines(lines, reject), path, "MNBVC"):
        try:
            row = load_row(line, path, number)
        except SourceError as error:
            reject(error, line)
            continue
        if row is not None:
            yield number, row


# -- 扩展字段: a JSON string that is not always JSON ----------------------------------------------------


@dataclass(slots=True)
class Extension:
    """A parsed ``扩展字段``: ``value`` is a dict (or ``None`` when unreadable), ``problems`` what was odd."""

    value: dict[str, Any] | None
    problems: tuple[str, ...] = ()

    @property
    def readable(self) -> bool:
        return self.value is not None


class _Unreadable(ValueError):
    pass


_DECODER = json.JSONDecoder()
_WHITESPACE = " \t\r\n"


def parse_extension(raw: Any) -> Extension:
    """Read ``扩展字段`` tolerantly.

    Valid JSON objects are read as JSON. MNBVC's ShareGPT extractor also writes values unquoted
    (``{"会话": yOKd88p, "多轮序号": 1, "解析模型": gpt4}``) and leaves values empty (``"会话": ,``):
    a bare value is read as an integer when it is one and as text otherwise, an empty one as ``None``.
    An empty string is an empty object. Anything else is unreadable (``value`` None); the caller keeps
    the raw string in every case.
    """
    if raw is None:
        return Extension({}, ("absent",))
    if isinstance(raw, dict):
        return Extension(raw, ("an object, not a JSON string",))
    if not isinstance(raw, str):
        return Extension(None, (f"a {type(raw).__name__}, not a JSON string",))
    if not raw.strip():
        return Extension({}, ("empty",))
    try:
        value = loads(raw)
    except json.JSONDecodeError:
        pass
    else:
        if isinstance(value, dict):
            return Extension(value)
        return Extension(None, (f"JSON {type(value).__name__}, not an object",))
    try:
        value, problems = _read_loose_object(raw)
    except _Unreadable as error:
        return Extension(None, (f"unreadable: {error}",))
    return Extension(value, tuple(sorted(problems)))


def _skip(text: str, position: int) -> int:
    while position < len(text) and text[position] in _WHITESPACE:
        position += 1
    return position


def _read_loose_object(text: str) -> tuple[dict[str, Any], set[str]]:
    problems: set[str] = set()
    position = _skip(text, 0)
    if not text.startswith("{", position):
        raise _Unreadable(f"expected '{{' at character {position}")
    position += 1
    value: dict[str, Any] = {}
    while True:
        position = _skip(text, position)
        if text.startswith("}", position):
            position += 1
            break
        key, position = _read_key(text, position, problems)
        position = _skip(text, position)
        if not text.startswith(":", position):
            raise _Unreadable(f"expected ':' after key {key!r} at character {position}")
        item, position = _read_value(text, _skip(text, position + 1), problems)
        value[key] = item
        position = _skip(text, position)
        if text.startswith(",", position):
            position += 1
            if text.startswith("}", _skip(text, position)):
                problems.add("trailing comma")
            continue
        if text.startswith("}", position):
            position += 1
            break
        raise _Unreadable(f"expected ',' or '}}' at character {position}")
    if _skip(text, position) != len(text):
        raise _Unreadable(f"text after the object at character {position}")
    return value, problems


def _read_key(text: str, position: int, problems: set[str]) -> tuple[str, int]:
    if text.startswith('"', position):
        try:
            return json.decoder.scanstring(text, position + 1)
        except json.JSONDecodeError as error:
            raise _Unreadable(f"bad key at character {position}: {error.msg}") from error
    end = text.find(":", position)
    if end < 0 or not text[position:end].strip():
        raise _Unreadable(f"expected a key at character {position}")
    problems.add("unquoted keys")
    return text[position:end].strip(), end


#: The characters ``json``'s scanner can start a value with; at any other, ``raw_decode`` fails.
_JSON_VALUE_STARTS = frozenset('"{[ntfNI-0123456789')


def _read_value(text: str, position: int, problems: set[str]) -> tuple[Any, int]:
    """A JSON value at ``position``, else a bare one (up to ``,`` or ``}``); raising an exception per
    bare value (``gpt4``, ``yOKd88p``) was most of the time spent on ShareGPT's loose 扩展字段."""
    if position < len(text) and text[position] in _JSON_VALUE_STARTS:
        try:
            value, end = _DECODER.raw_decode(text, position)
        except ValueError:  # JSONDecodeError, or an integer past the int-string limit (read below)
            pass
        else:
            after = _skip(text, end)
            if after == len(text) or text[after] in ",}":
                return value, end
    end = position
    while end < len(text) and text[end] not in ",}":
        end += 1
    bare = text[position:end].strip()
    if not bare:
        problems.add("empty values")
        return None, end
    if bare.startswith(('"', "{", "[")):
        raise _Unreadable(f"unterminated value at character {position}")
    if re.fullmatch(r"-?\d+", bare):
        try:
            value = int(bare)
        except ValueError as error:  # past the int-string limit (4300 digits)
            raise _Unreadable(f"integer too long at character {position}") from error
    else:
        value = bare
    problems.add("unquoted values")
    return value, end


# -- dates ---------------------------------------------------------------------------------------------

DATE_TIME = re.compile(r"^(-?\d{4,})-?(\d{2})-?(\d{2})(?:[ T]?(\d{1,2}):(\d{2})(?::(\d{2}))?)?$")


def parse_date(raw: Any, field: str, notes: Notes) -> datetime | None:
    """MNBVC's ``yyyymmdd`` (``-50000101`` for 5000 BC), optionally with `` HH:MM:SS`` as ``create_time``
    (``yyyy-mm-dd`` is read too).

    A date outside Python's datetime range (BC, year 0, after 9999) or not a date at all stays null; the
    caller keeps the raw string. Absent and empty values are null with no note (their absence is counted
    where it matters).
    """
    return parse_date_iso(raw, field, notes)[0]


def parse_date_iso(raw: Any, field: str, notes: Notes) -> tuple[datetime | None, str | None]:
    """``parse_date`` and its ``isoformat()``, both read once per distinct date string."""
    if raw is None or raw == "":
        return None, None
    moment, text, problem = _read_date(raw) if isinstance(raw, str) else (None, None, NOT_A_DATE)
    if problem:
        notes.add(f"{field} {problem}")
    return moment, text


def date_iso(raw: Any, field: str, notes: Notes) -> str | None:
    """``parse_date_iso(...)[1]``: MNBVC's usual ``yyyymmdd HH:MM:SS`` is checked and rewritten as text
    (its day and its time of day each checked once per distinct value), the rest goes through
    ``parse_date_iso``.

    Reply and creation times are nearly all distinct, so ``_read_date``'s cache missed on most of them.
    """
    if type(raw) is str and len(raw) == 17 and raw[8] == " ":
        day, time = raw[:8], raw[9:]
        day_iso = _day_iso(day)
        if day_iso is not None and _is_time_of_day(time):
            return f"{day_iso}T{time}"
    return parse_date_iso(raw, field, notes)[1]


@functools.lru_cache(maxsize=1 << 16)
def _day_iso(day: str) -> str | None:
    """``yyyy-mm-dd`` of an ASCII ``yyyymmdd`` that ``_read_date`` reads as a valid date, else None."""
    if not (day.isascii() and day.isdigit()) or int(day[:4]) < 1:
        return None
    try:
        datetime(int(day[:4]), int(day[4:6]), int(day[6:]))
    except ValueError:
        return None
    return f"{day[:4]}-{day[4:6]}-{day[6:]}"


@functools.lru_cache(maxsize=1 << 17)
def _is_time_of_day(text: str) -> bool:
    """An ASCII ``HH:MM:SS`` that ``datetime`` accepts (hour below 24, minute and second below 60)."""
    return (
        text.isascii()
        and text[2] == ":"
        and text[5] == ":"
        and text[:2].isdigit()
        and text[3:5].isdigit()
        and text[6:].isdigit()
        and text[:2] < "24"
        and text[3:5] < "60"
        and text[6:] < "60"
    )


NOT_A_DATE = "not a yyyymmdd date (timestamp null, raw kept)"


def _is_date_and_time(text: str) -> bool:
    """``yyyymmdd HH:MM:SS`` in ASCII digits, MNBVC's usual ``create_time``."""
    return (
        len(text) == 17
        and text[8] == " "
        and text[11] == ":"
        and text[14] == ":"
        and text.isascii()
        and (text[:8] + text[9:11] + text[12:14] + text[15:]).isdigit()
    )


@functools.lru_cache(maxsize=1 << 16)
def _read_date(raw: str) -> tuple[datetime | None, str | None, str | None]:
    """(datetime, its isoformat, None) or (None, None, what is wrong): dates repeat, so they are cached."""
    text = raw.strip()
    if _is_date_and_time(text):  # what DATE_TIME reads as these six numbers, without the regex
        year, parts = int(text[:4]), [int(text[4:6]), int(text[6:8]), int(text[9:11]), int(text[12:14])]
        parts.append(int(text[15:]))
    else:
        match = DATE_TIME.match(text)
        if not match:
            return None, None, NOT_A_DATE
        year = int(match.group(1))
        parts = [int(part) if part else 0 for part in match.groups()[1:]]
    if not 1 <= year <= 9999:
        return None, None, "before year 1 (BC) or after 9999 (timestamp null, raw kept)"
    try:
        moment = datetime(year, *parts)
    except ValueError:
        return None, None, "not a valid date (timestamp null, raw kept)"
    return moment, moment.isoformat(), None


# -- format detection -------------------------------------------------------------------------------


def row_format(row: dict[str, Any]) -> str | None:
    """The format one row looks like: forum, a Q/A-shaped row (qa), or None."""
    if "回复" in row or "主题" in row:
        return FORUM
    if "问" in row or "答" in row:
        return QA
    return None


def is_multiturn_row(row: dict[str, Any]) -> bool:
    extension = parse_extension(_metadata(row).get("扩展字段"))
    return bool(extension.value) and ("会话" in extension.value or "多轮序号" in extension.value)


def detect_format(
    rows: Iterable[tuple[int, dict[str, Any]]], path: str, tolerant: bool = False
) -> str | None:
    """A shard's format from its first rows: forum, multiturn (Q/A rows with 会话/多轮序号) or qa.

    ``None`` for a shard with no row. A first row of no dialogue format is a SourceError that asks for
    ``--format``; ``tolerant`` (``--on-bad-record skip``) passes over such rows (the format's parser
    rejects them later) and fails only when no row has a format.
    """
    found = None
    formatless = None
    for seen, (number, row) in enumerate(rows):
        kind = row_format(row)
        if kind is None and tolerant:
            formatless = formatless or (number, row)
            continue
        if kind is None:
            raise SourceError(
                path,
                f"line {number}",
                "问",
                "missing: not an MNBVC dialogue row (no 问/答, no 主题/回复); keys "
                f"{list(row)[:8]}; give the format with --format",
            )
        if kind == FORUM:
            return FORUM
        if is_multiturn_row(row):
            return MULTITURN
        found = QA
        if seen + 1 >= DETECT_ROWS:
            break
    if found is None and formatless is not None:
        number, row = formatless
        problem = f"missing: no MNBVC dialogue row (no 问/答, no 主题/回复) in the first {DETECT_ROWS} rows"
        raise SourceError(path, f"line {number}", "问", f"{problem}; keys {list(row)[:8]}; give --format")
    return found


# -- helpers shared by the formats ------------------------------------------------------------------


def _metadata(row: dict[str, Any]) -> dict[str, Any]:
    metadata = row.get("元数据")
    return metadata if isinstance(metadata, dict) else {}


def source_name(row: dict[str, Any]) -> str:
    value = row.get("来源")
    return "" if value is None else str(value)


def subset_wanted(subsets: Iterable[str] | None, kind: str, source: str) -> bool:
    """``--subset`` names a format (``forum``), a 来源 (``ShareGPT``) or both (``forum/北大树洞``)."""
    if not subsets:
        return True
    return any(wanted in (kind, source, f"{kind}/{source}") for wanted in subsets)


class Warnings:
    """Logs each unreadable ``扩展字段`` with its file and line, up to a limit per file."""

    def __init__(self, path: str):
        self.path = path
        self.count = 0

    def unreadable(self, number: int, where: str, extension: Extension) -> None:
        self.unreadable_problem(number, where, extension.problems[0])

    def unreadable_problem(self, number: int, where: str, problem: str) -> None:
        self.count += 1
        if self.count <= MAX_WARNINGS_PER_FILE:
            logger.warning("%s, line %d, %s: %s (raw string kept)", self.path, number, where, problem)
        elif self.count == MAX_WARNINGS_PER_FILE + 1:
            logger.warning("%s: more unreadable 扩展字段 strings; counted in the normalizations", self.path)


def read_extension(raw: Any, where: str, number: int, notes: Notes, warnings: Warnings) -> Extension:
    """Parse a ``扩展字段`` and count what was odd about it; an unreadable one is logged with file and line."""
    return count_extension(parse_extension(raw), where, number, notes, warnings)


def count_extension(extension: Extension, where: str, number: int, notes: Notes, warnings) -> Extension:
    """``read_extension`` of an already parsed ``扩展字段``."""
    for problem in extension.problems:
        if problem.startswith("unreadable") or not extension.readable:
            notes.add(f"{where} unreadable (raw string kept)")
            warnings.unreadable(number, where, extension)
        else:
            notes.add(f"{where}: {problem}")
    return extension


def _text(value: Any, field: str, notes: Notes) -> str:
    """A text field as a string; a non-string stays raw in the row (see ``_row_without``)."""
    if isinstance(value, str):
        return value
    notes.add(f"{field} not a string (text empty, raw value kept)")
    return ""


def _row_without(row: dict[str, Any], text_keys: tuple[str, ...], kinds: tuple[type, ...]) -> dict[str, Any]:
    """The row with its text fields taken out (they are turns); a text field of another type stays."""
    kept = row.copy()
    for index in range(len(text_keys)):
        key = text_keys[index]
        if isinstance(kept.get(key), kinds[index]):  # never NoneType: an absent key stays absent
            del kept[key]
    return kept


CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
KANA = re.compile(r"[\u3040-\u30ff]+")
HANGUL = re.compile(r"[\uac00-\ud7af]+")
LATIN_WORD = re.compile(r"[A-Za-z]+")
LANGUAGE_SAMPLE_CHARS = 2000


_KANA, _HANGUL, _CJK, _LATIN = 1, 2, 3, 4


def _script_table() -> np.ndarray:
    """The class of every BMP code point (0: none of the four); a character beyond the BMP is class 0."""
    table = np.zeros(0x10000, dtype=np.uint8)
    table[0x3040:0x3100] = _KANA
    table[0xAC00:0xD7B0] = _HANGUL
    for low, high in ((0x3400, 0x4DC0), (0x4E00, 0xA000), (0xF900, 0xFB00)):
        table[low:high] = _CJK
    table[0x41:0x5B] = _LATIN
    table[0x61:0x7B] = _LATIN
    return table


_SCRIPT_OF = _script_table()


def _script_classes(sample: str) -> np.ndarray:
    """The class of each UTF-16 code unit of ``sample``: a character past the BMP is two surrogates,
    class 0 like the U+FFFF it was clipped to before, so counts and Latin-word boundaries are the same."""
    units = np.frombuffer(sample.encode("utf-16-le", "surrogatepass"), dtype=np.uint16)
    return _SCRIPT_OF.take(units)


def _latin_words(classes: np.ndarray) -> int:
    """Runs of Latin letters among ``classes``."""
    if not len(classes):
        return 0
    letters = classes == _LATIN
    return int(letters[0]) + int(np.count_nonzero(letters[1:] > letters[:-1]))


def _script_counts(sample: str) -> tuple[int, int, int, int]:
    """Kana, Hangul and CJK characters and Latin words (runs of A-Z/a-z) of ``sample``.

    The same counts as the ``KANA``/``HANGUL``/``CJK``/``LATIN_WORD`` patterns, on code units with numpy:
    one table lookup per character and one count per class; four regex scans per conversation were 8%
    of an MNBVC build.
    """
    classes = _script_classes(sample)
    counts = np.bincount(classes, minlength=5)
    return int(counts[_KANA]), int(counts[_HANGUL]), int(counts[_CJK]), _latin_words(classes)


def detect_language(texts: Iterable[str]) -> str:
    """zh, en, ja or ko from the script of the first characters; zh (MNBVC's language) when unsure.

    A Chinese character carries about as much as a Latin word, so the text is English only when it has
    more Latin words than Chinese characters. Latin words are counted only when that can decide: never
    more than the Latin letters, they matter only when the letters or the Hangul outnumber the CJK.
    """
    sample = ""
    for text in texts:
        sample += text
        if len(sample) >= LANGUAGE_SAMPLE_CHARS:
            break
    classes = _script_classes(sample[:LANGUAGE_SAMPLE_CHARS])
    counts = np.bincount(classes, minlength=5)
    kana, hangul, cjk, letters = (int(counts[kind]) for kind in (_KANA, _HANGUL, _CJK, _LATIN))
    if kana and kana * 5 >= cjk:
        return "ja"
    if hangul > cjk or letters > cjk:
        latin_words = _latin_words(classes)
        if hangul > cjk and hangul >= latin_words:
            return "ko"
        if latin_words > cjk:
            return "en"
    return "zh"


_FORMAT_EXTRA = {kind: schema.to_json({"format": kind}) for kind in FORMATS}


def _record(conversation_id: str, kind: str, source: str, sessions: list, notes: Notes) -> dict:
    texts = (turn["text"] for session in sessions for turn in session["turns"])
    language = detect_language(texts)
    if language != "zh":
        notes.add(f"conversation detected as {language}, not zh")
    speakers: list[str] = []
    for session in sessions:
        for turn in session["turns"]:
            if turn["speaker"] not in speakers:
                speakers.append(turn["speaker"])
    return {
        "conversation_id": conversation_id,
        "source": "mnbvc",
        "subset": f"{kind}/{source}",
        "language": language,
        "speakers": speakers,
        "sessions": sessions,
        "questions": [],
        "extra": _FORMAT_EXTRA[kind],
    }


def _session_date(
    session: dict, row: dict[str, Any], fallback_field: str, fallback: Any, notes: Notes
) -> None:
    """``date_time`` is MNBVC's ``时间`` (raw); when a producer left it out, the row's own creation time."""
    if "时间" in row:
        session["date_time"] = row["时间"] if isinstance(row["时间"], str) else json.dumps(row["时间"])
        session["timestamp"] = parse_date(row["时间"], "时间", notes)
        return
    notes.add(f"时间 absent (session date_time from {fallback_field})")
    if isinstance(fallback, str) and fallback:
        session["date_time"] = fallback
        session["timestamp"] = parse_date(fallback, fallback_field, notes)


# -- Q/A pairs: 问答 and 多轮对话 rows ------------------------------------------------------------------


@dataclass
class Pair:
    """One Q/A row of a shard: where it is, the row, and the parsed ``扩展字段``."""

    file: str
    line: int
    row: dict[str, Any]
    extension: Extension


def read_pair(
    file: str,
    line: int,
    row: dict[str, Any],
    notes: Notes,
    warnings: Warnings,
    extension: Extension | None = None,
) -> Pair:
    """The row as a Pair, its ``扩展字段`` counted (``extension``: already parsed from this row)."""
    if "问" not in row and "答" not in row:
        raise SourceError(file, f"line {line}", "问", "missing (neither 问 nor 答: not a Q/A row)")
    metadata = row.get("元数据")
    if metadata is not None and not isinstance(metadata, dict):
        raise SourceError(
            file, f"line {line}", "元数据", f"expected an object, got {type(metadata).__name__}"
        )
    if extension is None:
        extension = parse_extension(_metadata(row).get("扩展字段"))
    count_extension(extension, "元数据.扩展字段", line, notes, warnings)
    return Pair(file, line, row, extension)


@dataclass(slots=True)
class ConvertedPair:
    """A Q/A row as its turns need it, all but the turn ids (they depend on the row's position in its
    conversation). A multi-turn build converts each row once, in the partition pass (``regroup``)."""

    file: str
    order: tuple[int, int, str]  # sequence_number(扩展字段)
    sequence: Any  # the raw 多轮序号 (None when absent)
    question: str
    extra: str  # the question turn's extra (Json text)
    answer: str | None  # the answer turn's text; None: no answer turn
    dated: dict[str, Any]  # {"时间": the row's 时间} when it has one, else {}
    create_time: Any  # 元数据.create_time


def convert_pair(pair: Pair, notes: Notes, order: tuple[int, int, str] | None = None) -> ConvertedPair:
    """The question as a ``user`` turn and the answer as an ``assistant`` turn (see ``converted_turns``).

    An empty ``答`` (MNBVC keeps a question with no answer) gives no assistant turn, so chat data never
    holds an empty assistant message; ``答`` stays in the question turn's ``row`` when it is not a string
    and is ``""`` otherwise, so an export can write it back. ``order``: its ``sequence_number``, when
    known.
    """
    row = pair.row
    question = _text(row.get("问"), "问", notes)
    if "问" not in row:
        notes.add("问 absent (empty question turn)")
    metadata = _metadata(row)
    extra: dict[str, Any] = {
        "file": pair.file,
        "line": pair.line,
        "keys": list(row),
        "row": _row_without(row, ("问", "答"), (str, str)),
        "扩展字段": pair.extension.value,
    }
    if pair.extension.problems:
        extra["扩展字段_problems"] = list(pair.extension.problems)
    create_time = metadata.get("create_time")
    created_iso = date_iso(create_time, "create_time", notes)
    if created_iso is not None:
        extra["create_timestamp"] = created_iso
    answer = row.get("答")
    answer_text = None
    if isinstance(answer, str) and answer == "":
        notes.add("empty 答 (question with no answer: no assistant turn)")
    elif answer is not None or "答" in row:
        answer_text = _text(answer, "答", notes)
    dated = {"时间": row["时间"]} if "时间" in row else {}
    return ConvertedPair(
        pair.file,
        sequence_number(pair.extension) if order is None else order,
        _raw_sequence(pair),
        question,
        schema.to_json(extra),
        answer_text,
        dated,
        create_time,
    )


def converted_turns(pair: ConvertedPair, turn_prefix: str) -> list[dict[str, Any]]:
    """The turns of a converted pair, their ids ``<prefix>q`` and ``<prefix>a``."""
    question = schema.empty_turn(f"{turn_prefix}q", QUESTION_SPEAKER, "user", pair.question)
    question["extra"] = pair.extra
    if pair.answer is None:
        return [question]
    turn = schema.empty_turn(f"{turn_prefix}a", ANSWER_SPEAKER, "assistant", pair.answer)
    turn["reply_to"] = question["turn_id"]
    return [question, turn]


def pair_turns(pair: Pair, turn_prefix: str, notes: Notes) -> list[dict[str, Any]]:
    """The question as a ``user`` turn and the answer as an ``assistant`` turn (``convert_pair``)."""
    return converted_turns(convert_pair(pair, notes), turn_prefix)


def _id_string(value: Any, notes: Notes, field: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    notes.add(f"{type(value).__name__} {field} → string (raw type kept in the row)")
    return json.dumps(value, ensure_ascii=False)


def qa_records(
    rows: Iterable[tuple[int, dict[str, Any]]],
    file: str,
    notes: Notes,
    subsets=None,
    reject: Reject = raise_error,
) -> Iterator[dict[str, Any]]:
    """问答语料: each row is one conversation of one Q/A pair, identified by file and line."""
    return _one_record_per_row(rows, QA, qa_record, file, notes, subsets, reject)


def _one_record_per_row(rows, kind: str, make_record, file: str, notes: Notes, subsets, reject: Reject):
    """Rows that are conversations by themselves (问答, 论坛): a bad row is rejected alone, and its
    normalization counts are kept only when it converts."""
    warnings = Warnings(file)
    for line, row in rows:
        if not subset_wanted(subsets, kind, source_name(row)):
            continue
        counted = Notes()
        try:
            record = make_record(row, file, line, counted, warnings)
        except SourceError as error:
            reject(error, row)
            continue
        notes.update(counted)
        yield record


def qa_record(row: dict[str, Any], file: str, line: int, notes: Notes, warnings: Warnings) -> dict[str, Any]:
    pair = read_pair(file, line, row, notes, warnings)
    session_id = _id_string(row.get("id"), notes, "id") or f"line {line}"
    session = schema.empty_session(session_id, pair_turns(pair, "", notes))
    _session_date(session, row, "create_time", _metadata(row).get("create_time"), notes)
    return _record(f"{file}:{line}", QA, source_name(row), [session], notes)


# -- 多轮对话: rows of one conversation, keyed by 会话 ---------------------------------------------------


def conversation_key(row: dict[str, Any], extension: Extension, file: str, line: int) -> tuple[str, str]:
    """(how, key) that groups the rows of one conversation.

    ``会话`` when it has a value (an integer and its decimal string are the same conversation); when it
    is empty or missing, the row's ``id`` (MNBVC's md5 of the whole source conversation); when both are
    missing, the row is its own conversation. The 来源 is part of the group (``group_key``), so two
    producers' ``会话`` 1 never merge.
    """
    session = (extension.value or {}).get("会话")
    if session is not None and session != "":
        return "会话", session if isinstance(session, str) else json.dumps(session, ensure_ascii=False)
    if row.get("id") is not None and row.get("id") != "":
        value = row["id"]
        return "id", value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return "line", f"{file}:{line}"


def sequence_number(extension: Extension) -> tuple[int, int, str]:
    """A sort key for ``多轮序号``: integers (or integer strings) first, then other text, then missing."""
    value = (extension.value or {}).get("多轮序号")
    if isinstance(value, bool) or value is None or value == "":
        return (2, 0, "")
    if isinstance(value, int):
        return (0, value, "")
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        try:
            return (0, int(value), "")
        except ValueError:  # past the int-string limit (4300 digits): ordered as other text
            pass
    return (1, 0, json.dumps(value, ensure_ascii=False))


#: What ``group_id`` escapes so that no two (来源, how, key) give one id (a %-escape, as in a URL): 来源 ends
#: at the first ``/``; a 会话 cannot spell the ``id:``/``line:`` prefix; no key holds the ``#N`` piece suffix.
_SOURCE_ESCAPES = str.maketrans({"%": "%25", "/": "%2F"})
_SESSION_ESCAPES = str.maketrans({"%": "%25", "#": "%23", ":": "%3A"})
_FALLBACK_ESCAPES = str.maketrans({"%": "%25", "#": "%23"})


def session_key(how: str, key: str) -> str:
    """The session id of a multi-turn conversation: its 会话, or ``id:``/``line:`` and the fallback key.

    Escaped as ``_SOURCE_ESCAPES`` says; a value without ``%``, ``#`` (and, in a 会话, ``:``) is itself.
    """
    if how == "会话":
        return key.translate(_SESSION_ESCAPES)
    return f"{how}:{key.translate(_FALLBACK_ESCAPES)}"


def group_id(source: str, how: str, key: str) -> str:
    """``来源/session key``: 来源 ``a/b`` with 会话 ``c`` is ``a%2Fb/c``, 来源 ``a`` with 会话 ``b/c`` is ``a/b/c``."""
    return f"{source.translate(_SOURCE_ESCAPES)}/{session_key(how, key)}"


def missing_ranges(numbers: Iterable[int]) -> list[tuple[int, int]]:
    """(first, last) of each run of integers from 1 to ``max(numbers)`` that ``numbers`` lacks.

    Walks the sorted distinct numbers, so its cost follows the number of rows, not the size of the
    numbers (a hostile 多轮序号 of 2**40 must not enumerate a trillion missing values).
    """
    gaps, previous = [], 0
    for number in sorted(set(numbers)):
        if number > previous + 1:
            gaps.append((previous + 1, number - 1))
        previous = max(previous, number)
    return gaps


def multiturn_record(
    pairs: list[ConvertedPair], source: str, how: str, key: str, conversation_id: str, notes: Notes
) -> dict[str, Any]:
    """One conversation of the 来源 ``source`` from its converted pairs, already in (多轮序号, file,
    line) order; each pair's own normalizations were counted when it was converted.

    Gaps and duplicates in ``多轮序号`` are counted and listed in the session's ``extra``; duplicate pairs
    are all kept, in file and line order.
    """
    if how != "会话":
        notes.add(f"multi-turn row with an empty or missing 会话 (grouped by {how})", len(pairs))
    numbers = [value for rank, value, _ in (pair.order for pair in pairs) if rank == 0]
    session_extra: dict[str, Any] = {"grouped_by": how, "多轮序号": [pair.sequence for pair in pairs]}
    duplicates = []
    if len(set(numbers)) < len(numbers):
        duplicates = sorted(number for number, count in Counter(numbers).items() if count > 1)
    gaps = missing_ranges(numbers)
    if duplicates:
        notes.add("multi-turn conversation with a duplicate 多轮序号 (all rows kept)")
        session_extra["duplicate_多轮序号"] = duplicates
    if gaps:
        notes.add("multi-turn conversation with a gap in 多轮序号")
        if sum(last - first + 1 for first, last in gaps) <= MAX_MISSING_LISTED:
            session_extra["missing_多轮序号"] = [n for first, last in gaps for n in range(first, last + 1)]
        else:
            notes.add(
                f"multi-turn conversation missing over {MAX_MISSING_LISTED} 多轮序号 (gaps listed as ranges)"
            )
            session_extra["missing_多轮序号_ranges"] = [[first, last] for first, last in gaps]
    if len(numbers) < len(pairs):
        notes.add("multi-turn row without an integer 多轮序号 (ordered after the numbered rows)")
    files = list(dict.fromkeys(pair.file for pair in pairs))
    if len(files) > 1:
        notes.add("multi-turn conversation spread over several files")
        session_extra["files"] = files
    turns = [turn for index, pair in enumerate(pairs) for turn in converted_turns(pair, f"{index}")]
    first = pairs[0]
    session = schema.empty_session(session_key(how, key), turns)
    _session_date(session, first.dated, "create_time", first.create_time, notes)
    session["extra"] = schema.to_json(session_extra)
    return _record(conversation_id, MULTITURN, source, [session], notes)


def _raw_sequence(pair: Pair) -> Any:
    return (pair.extension.value or {}).get("多轮序号")


def multiturn_runs(
    rows: Iterable[tuple[int, dict[str, Any]]],
    file: str,
    notes: Notes,
    subsets=None,
    reject: Reject = raise_error,
) -> Iterator[dict[str, Any]]:
    """多轮对话 without regrouping: each run of adjacent rows with one key is a conversation.

    Used when streaming, where a shard is read once from its URL. A conversation whose rows are not
    adjacent in the file comes out in pieces (``#2``, ``#3`` appended to the id) and is counted; rows
    spread over several files cannot be joined here: build (not stream) for those.
    """
    warnings = Warnings(file)
    pieces: dict[str, int] = {}
    run: list[Pair] = []
    run_group: tuple[str, str, str] | None = None

    def finish() -> dict[str, Any]:
        source, how, key = run_group
        conversation_id = group_id(source, how, key)
        pieces[conversation_id] = pieces.get(conversation_id, 0) + 1
        if pieces[conversation_id] > 1:
            notes.add("streamed multi-turn conversation whose rows are not adjacent (emitted in pieces)")
            conversation_id += f"#{pieces[conversation_id]}"
        ordered = sorted(run, key=lambda pair: (sequence_number(pair.extension), pair.line))
        converted = [convert_pair(pair, notes) for pair in ordered]
        return multiturn_record(converted, source, how, key, conversation_id, notes)

    for line, row in rows:
        if not subset_wanted(subsets, MULTITURN, source_name(row)):
            continue
        try:
            pair = read_pair(file, line, row, notes, warnings)
        except SourceError as error:
            reject(error, row)
            continue
        group = (source_name(row), *conversation_key(row, pair.extension, file, line))
        if run and group != run_group:
            yield finish()
            run = []
        run.append(pair)
        run_group = group
    if run:
        yield finish()


# -- 论坛语料: a thread is a conversation ------------------------------------------------------------------


def forum_records(
    rows: Iterable[tuple[int, dict[str, Any]]],
    file: str,
    notes: Notes,
    subsets=None,
    reject: Reject = raise_error,
) -> Iterator[dict[str, Any]]:
    return _one_record_per_row(rows, FORUM, forum_record, file, notes, subsets, reject)


def forum_record(
    row: dict[str, Any], file: str, line: int, notes: Notes, warnings: Warnings
) -> dict[str, Any]:
    """The topic post and each reply as turns; ``reply_to`` from 引用ID, speaker from 回复人.

    The topic post's speaker is ``楼主`` (MNBVC rows do not name the author); replies by ``楼主`` or
    ``洞主`` (the thread's author on 树洞 boards) are ``user`` turns like the topic, other replies
    ``assistant`` turns.
    """
    where = f"line {line}"
    replies = row.get("回复", [])
    if not isinstance(replies, list):
        raise SourceError(file, where, "回复", f"expected a list of replies, got {type(replies).__name__}")
    metadata = row.get("元数据")
    if metadata is not None and not isinstance(metadata, dict):
        raise SourceError(file, where, "元数据", f"expected an object, got {type(metadata).__name__}")
    metadata = _metadata(row)
    topic_text = _text(row.get("主题", ""), "主题", notes)
    if "主题" not in row:
        notes.add("forum thread without 主题 (empty topic turn)")
    elif topic_text == "":
        notes.add("forum thread with an empty 主题 (kept as an empty topic turn)")
    extension = read_extension(metadata.get("扩展字段"), "元数据.扩展字段", line, notes, warnings)
    topic = schema.empty_turn(TOPIC_TURN_ID, TOPIC_SPEAKER, "user", topic_text)
    posted_iso = date_iso(metadata.get("发帖时间"), "发帖时间", notes)
    topic_extra: dict[str, Any] = {
        "file": file,
        "line": line,
        "keys": list(row),
        "row": _row_without(row, ("主题", "回复"), (str, list)),
        "扩展字段": extension.value,
        "timestamp": posted_iso,
    }
    if extension.problems:
        topic_extra["扩展字段_problems"] = list(extension.problems)
    topic["extra"] = schema.to_json(topic_extra)
    turns = [topic]
    for index, reply in enumerate(replies):
        turns.append(forum_reply(reply, index, file, line, notes, warnings))
    _check_turn_ids(turns, file, where, notes)
    session_id = _id_string(row.get("ID", row.get("id")), notes, "ID") or f"line {line}"
    session = schema.empty_session(session_id, turns)
    _session_date(session, row, "发帖时间", metadata.get("发帖时间"), notes)
    return _record(f"{file}:{line}", FORUM, source_name(row), [session], notes)


def forum_reply(
    reply: Any, index: int, file: str, line: int, notes: Notes, warnings: Warnings
) -> dict[str, Any]:
    where = f"line {line}"
    if not isinstance(reply, dict):
        raise SourceError(file, where, f"回复[{index}]", f"expected an object, got {type(reply).__name__}")
    floor = reply.get("楼ID")
    if type(floor) is str and floor:  # the usual 楼ID, as _id_string gives it
        turn_id = floor
    elif floor is None or floor == "":
        notes.add("forum reply without 楼ID (turn_id from its position)")
        turn_id = f"#{index + 1}"
    else:
        turn_id = _id_string(floor, notes, "楼ID")
    extension = read_extension(reply.get("扩展字段"), "回复.扩展字段", line, notes, warnings)
    details = extension.value or {}
    speaker = details.get("回复人")
    if speaker is None or speaker == "":
        notes.add("forum reply without 回复人 (speaker empty)")
        speaker = ""
    speaker = speaker if isinstance(speaker, str) else json.dumps(speaker, ensure_ascii=False)
    role = "user" if speaker in THREAD_AUTHOR_NAMES else "assistant"
    turn = schema.empty_turn(turn_id, speaker, role, _text(reply.get("回复", ""), "回复.回复", notes))
    quoted = details.get("引用ID")
    if quoted is not None and quoted != "":
        turn["reply_to"] = quoted if isinstance(quoted, str) else json.dumps(quoted, ensure_ascii=False)
    replied_iso = date_iso(details.get("回复时间"), "回复时间", notes)
    extra: dict[str, Any] = {
        "keys": list(reply),
        "reply": _row_without(reply, ("回复",), (str,)),
        "扩展字段": extension.value,
        "timestamp": replied_iso,
    }
    if extension.problems:
        extra["扩展字段_problems"] = list(extension.problems)
    turn["extra"] = schema.to_json(extra)
    return turn


def _check_turn_ids(turns: list[dict], file: str, where: str, notes: Notes) -> None:
    """楼ID should be unique in a thread; a repeated one is made unique (``~2``) and counted."""
    seen: dict[str, int] = {}
    for turn in turns:
        count = seen.get(turn["turn_id"], 0) + 1
        seen[turn["turn_id"]] = count
        if count > 1:
            notes.add("forum reply with a repeated 楼ID (turn_id suffixed ~n, raw kept)")
            turn["turn_id"] = f"{turn['turn_id']}~{count}"
    ids = {turn["turn_id"] for turn in turns}
    for turn in turns:
        if turn["reply_to"] is not None and turn["reply_to"] not in ids:
            notes.add("forum 引用ID naming no reply of the thread (reply_to kept as written)")
