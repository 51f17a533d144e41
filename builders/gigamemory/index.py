"""Pass 1: a GigaMemory file's lines grouped by dialogue, and the groups cut into shards.

A GigaMemory line is one question *and* the whole dialogue it is asked about (~350k characters); lines
that share a dialogue are one conversation. So a file is a group-by: :func:`index_file` reads it once, line
by line, and keeps per line only its place, its question fields and the sha256 of its dialogue's canonical
JSON (:func:`dialogue_digest`); lines with one digest are one :class:`Group`. No dialogue stays in memory:
pass 2 (``convhub.gigamemory.parse``) reads each group's first line again by its offset.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import secrets
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from convhub.errors import NESTED_TOO_DEEPLY, Notes, Reject, SourceError, raise_error
from convhub.jsonio import array_line_problem, holds_float, json_document_problem

SUFFIXES = (".jsonl.gz", ".jsonl")
BYTE_ORDER_MARK = b"\xef\xbb\xbf"
#: Read buffer of the whole-file pass: readline's default gathers a ~650 KB line 8 KB at a time, which was
#: half of the time of reading a file line by line.
READ_BUFFER_BYTES = 2**20


def subset_of(path: str | os.PathLike) -> str:
    """The subset of a file is its name without ``.jsonl`` / ``.jsonl.gz``."""
    name = Path(path).name
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return Path(path).stem


def open_binary(path: str | os.PathLike, buffering: int = -1):
    """The file's bytes; a ``.gz`` is decompressed on the fly, so offsets are uncompressed offsets."""
    return gzip.open(path, "rb") if str(path).endswith(".gz") else open(path, "rb", buffering=buffering)


def where(line_number: int, record_id: Any = None) -> str:
    """How a SourceError names a line: ``record 5 at line 3`` or ``record at line 3``."""
    return f"at line {line_number}" if record_id is None else f"{record_id!r} at line {line_number}"


def iter_lines(path: str | os.PathLike) -> Iterator[tuple[int, int, bytes]]:
    """(1-based line number, byte offset, raw line without its end) for every line of the file.

    A corrupt or truncated ``.gz`` raises a SourceError naming the line where decompression failed.
    """
    line_number = 0
    with open_binary(path, READ_BUFFER_BYTES) as handle:
        while True:
            offset = handle.tell()
            try:
                raw = handle.readline()
            except (OSError, EOFError, zlib.error) as error:
                kind = "corrupt or truncated gzip" if str(path).endswith(".gz") else "unreadable file"
                raise SourceError(
                    path, where(line_number + 1), None, f"cannot read the file ({kind}): {error}"
                ) from error
            if not raw:
                return
            line_number += 1
            yield line_number, offset, raw.rstrip(b"\r\n")


# -- JSON exactly as ``json`` reads and writes it, at orjson's speed ------------------------------------

_INEXACT = object()


def _float_free(value: Any) -> bool:
    """True when a decoded JSON value holds no float: there orjson reads and prints exactly as json does
    (it reads an integer beyond 64 bits as a float, and prints floats its own way)."""
    return not holds_float(value)


def _exact_loads(raw) -> Any:
    """``orjson.loads(raw)`` where it equals ``json.loads`` (3x faster), else ``_INEXACT`` (bad JSON too).

    orjson refuses what json reads differently (NaN, infinities, lone surrogates, a byte-order mark), and
    :func:`_float_free` catches the one silent difference (integers beyond 64 bits).
    """
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _INEXACT
    return value if _float_free(value) else _INEXACT


def decode_line(path: str | os.PathLike, line_number: int, raw: bytes) -> dict[str, Any]:
    """One line → its JSON object, json's value and json's error message; the error names file and line."""
    record = _exact_loads(raw)
    if record is _INEXACT:
        try:
            record = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as error:
            raise SourceError(path, where(line_number), None, f"not valid UTF-8: {error}") from error
        except json.JSONDecodeError as error:
            raise SourceError(path, where(line_number), None, f"not valid JSON: {error}") from error
        except RecursionError:
            raise SourceError(path, where(line_number), None, NESTED_TOO_DEEPLY) from None
    if not isinstance(record, dict):
        raise SourceError(
            path, where(line_number), None, f"expected a JSON object, got {type(record).__name__}"
        )
    return record


def dialogue_digest(sessions: Any) -> str:
    """sha256 of the sessions' canonical JSON: equal exactly when the dialogues are equal, ids' types too.

    The canonical JSON is ``json.dumps(sessions, ensure_ascii=False, separators=(",", ":"))`` in UTF-8
    (conversation ids derive from it). ``orjson.dumps`` writes the same bytes for a float-free value and is
    20x faster; it refuses what it would write otherwise (integers beyond 64 bits, non-string keys, lone
    surrogates), and those go through json.
    """
    if _float_free(sessions):
        try:
            return hashlib.sha256(orjson.dumps(sessions)).hexdigest()
        except TypeError:  # orjson.JSONEncodeError
            pass
    # surrogatepass: a lone surrogate must not crash the hash; the record is then rejected by name
    # (``ConversationBuilder._storable``), as Parquet cannot hold it
    text = json.dumps(sessions, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


# -- a line cut into its question fields and its dialogue's bytes ---------------------------------------
#
# Lines that share a dialogue share its bytes. Pass 1 cuts a line into its question fields and the raw bytes
# of its ``sessions`` value (the span), parses the fields alone, and parses and digests a span only the first
# time its bytes are seen: pass 1 of the scale-0.2 benchmark input (203 MB) takes 0.7 s instead of 2.5 s
# parsing every line whole. The cut is proved, never trusted: the fields are parsed with an unguessable
# placeholder in the span's place, which must come out as the object's ``sessions``; a span is parsed on
# first sight, so it is one JSON value. Any other line is parsed whole. test_cut_lines_index_and_parse_as_
# whole_lines checks that both ways give the same index and records on lines made to fool the cut.

_WHITESPACE = b" \t\r\n"  # JSON's, not bytes.strip's
_SESSIONS_KEY = re.compile(rb'"sessions"[ \t\r\n]*:[ \t\r\n]*')
_PLACEHOLDER_TEXT = f"convhub-sessions-{secrets.token_hex(16)}"
_PLACEHOLDER = b'"' + _PLACEHOLDER_TEXT.encode() + b'"'


def _sessions_span(raw: bytes) -> tuple[int, int] | None:
    """Where the ``sessions`` value probably is: after its key, before ``, "ans_session_ids"`` (the real
    file's next key) or the closing brace. Only a guess: :func:`_split_line` proves it."""
    match = _SESSIONS_KEY.search(raw)
    if match is None:
        return None
    start = match.end()
    follower = raw.rfind(b'"ans_session_ids"', start)
    before = raw[start : follower if follower != -1 else len(raw)].rstrip(_WHITESPACE)
    if not before.endswith(b"," if follower != -1 else b"}"):
        return None
    end = start + len(before[:-1].rstrip(_WHITESPACE))
    return (start, end) if end > start else None


def _split_line(raw: bytes) -> tuple[dict[str, Any], int, int] | None:
    """(the line's object with a placeholder for ``sessions``, span start, span end), or None."""
    span = _sessions_span(raw)
    if span is None:
        return None
    start, end = span
    before, after = raw[:start], raw[end:]
    if _PLACEHOLDER[1:-1] in before or _PLACEHOLDER[1:-1] in after:
        return None
    record = _exact_loads(before + _PLACEHOLDER + after)
    if type(record) is not dict or record.get("sessions") != _PLACEHOLDER_TEXT:
        return None
    return record, start, end


def _span_digest(span) -> str | None:
    """The dialogue digest of a span's bytes, or None when they are not one float-free JSON value."""
    sessions = _exact_loads(span)
    return None if sessions is _INEXACT else dialogue_digest(sessions)


# -- pass 1: the index ----------------------------------------------------------------------------------


@dataclass
class Line:
    """What the index keeps of one line: its number and its question fields (everything but sessions)."""

    number: int
    fields: dict[str, Any]
    keys: list[str]


@dataclass
class Group:
    """Lines sharing one dialogue; pass 2 reads the dialogue again from the first of them."""

    digest: str
    offset: int
    length: int
    #: Of the first line's bytes: pass 2 refuses a file changed between the passes.
    line_sha256: str
    lines: list[Line] = field(default_factory=list)
    #: Where the first line's ``sessions`` value is, when pass 1 cut the line: pass 2 parses only that.
    span: tuple[int, int] | None = None


@dataclass
class FileIndex:
    path: str
    groups: list[Group]
    notes: Notes
    #: Lines (or an unreadable file tail) handed to ``reject`` under ``--on-bad-record skip``.
    rejected: int = 0


def id_text(value: Any, path, location: str, field_name: str) -> str:
    """Integer and string ids are both accepted and become strings (the raw value is kept elsewhere)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise SourceError(
            path, location, field_name, f"expected an integer or a string, got {type(value).__name__}"
        )
    return str(value)


def _read_line(path, number: int, raw: bytes, digest_of_span: dict[str, str]) -> tuple[Line, str | None, Any]:
    """(one non-blank line's question fields, its dialogue's digest (None: no ``sessions``), its span).

    The line is cut where it can be (``digest_of_span``: the sha256 of each span already parsed → its
    dialogue's digest), else parsed whole, whose errors are the ones a user sees.
    """
    cut = _split_line(raw)
    if cut is not None and type(cut[0].get("id")) in (int, str):
        record, start, end = cut
        span_sha256 = hashlib.sha256(memoryview(raw)[start:end]).hexdigest()
        digest = digest_of_span.get(span_sha256) or _span_digest(memoryview(raw)[start:end])
        if digest is not None:
            digest_of_span[span_sha256] = digest
            return _line(number, record), digest, (start, end)
    record = decode_line(path, number, raw)
    if "id" not in record:
        raise SourceError(path, where(number), "id", "missing")
    id_text(record["id"], path, where(number), "id")
    digest = dialogue_digest(record["sessions"]) if "sessions" in record else None
    return _line(number, record), digest, None


def _line(number: int, record: dict[str, Any]) -> Line:
    return Line(number, {key: value for key, value in record.items() if key != "sessions"}, list(record))


def index_file(path: str | os.PathLike, reject: Reject = raise_error) -> FileIndex:
    """Pass 1: read the file once and group its lines by dialogue, keeping no dialogue in memory.

    A bad line goes to ``reject`` with its bytes (raising by default); a file that cannot be read on from
    some line (corrupt gzip) goes there once, and the lines before that point are kept.
    """
    notes = Notes()
    groups: dict[str, Group] = {}
    first_line_of_id: dict[str, int] = {}
    digest_of_span: dict[str, str] = {}
    rejected = 0
    lines = iter_lines(path)
    while True:
        try:
            number, offset, raw = next(lines)
        except StopIteration:
            break
        except SourceError as error:
            rejected += 1
            reject(error, None, "file")
            break
        if number == 1 and raw.startswith(BYTE_ORDER_MARK):
            raw, offset = raw[len(BYTE_ORDER_MARK) :], offset + len(BYTE_ORDER_MARK)
            notes.add("UTF-8 byte-order mark at the start of a file (skipped)")
        if not raw.strip():
            notes.add("blank line (skipped)")
            continue
        try:
            line, digest, span = _read_line(path, number, raw, digest_of_span)
            _check_line(path, line, digest, first_line_of_id)
        except SourceError as error:
            if not groups and not rejected:  # the first line with content
                _refuse_json_document(path, number, raw, error)  # raises for the whole file
            rejected += 1
            reject(error, raw)
            continue
        first_line_of_id[str(line.fields["id"])] = number
        group = groups.get(digest)
        if group is None:
            group = groups[digest] = Group(
                digest, offset, len(raw), hashlib.sha256(raw).hexdigest(), span=span
            )
        else:
            notes.add("line sharing its dialogue with an earlier line (one conversation, several questions)")
        group.lines.append(line)
    if not groups and not rejected:
        raise SourceError(
            path, None, None, "no records: the file is empty (a GigaMemory file has one JSON object per line)"
        )
    return FileIndex(str(path), list(groups.values()), notes, rejected)


def _refuse_json_document(path, number: int, raw: bytes, error: SourceError) -> None:
    """Raise one SourceError naming the file when its first line is not JSON because the file is one JSON
    document (an array or object over many lines, or an array on one line), not one error for each line."""
    if error.problem == "expected a JSON object, got list":
        raise SourceError(path, None, None, array_line_problem(number, "GigaMemory")) from None
    if not error.problem.startswith("not valid JSON"):
        return
    following = (line for later, _, line in iter_lines(path) if later > number)
    problem = json_document_problem(raw, following, "GigaMemory")
    if problem is not None:
        raise SourceError(path, None, None, problem) from None


def _check_line(path, line: Line, digest: str | None, first_line_of_id: dict[str, int]) -> None:
    """What no single line shows: an id used before; and a line without ``sessions`` (no digest)."""
    record_id = line.fields["id"]
    if str(record_id) in first_line_of_id:
        problem = f"duplicate id {str(record_id)!r} (first at line {first_line_of_id[str(record_id)]})"
        raise SourceError(path, where(line.number, record_id), "id", problem)
    if digest is None:
        raise SourceError(path, where(line.number, record_id), "sessions", "missing")


def first_line_sessions(path, group: Group, raw: bytes) -> Any:
    """The dialogue of a group's first line (``raw``), parsed from its span alone where pass 1 cut it."""
    sessions = _INEXACT if group.span is None else _exact_loads(memoryview(raw)[slice(*group.span)])
    if sessions is _INEXACT:
        sessions = decode_line(path, group.lines[0].number, raw)["sessions"]
    return sessions


def plan_shards(index: FileIndex, shard_bytes: int, file_name: str | None = None) -> list[dict[str, Any]]:
    """Consecutive groups of one file, about ``shard_bytes`` of dialogue each, in order of first appearance.

    ``file_name`` is the name the source gives the file (a download is cached under a hash); the subset is
    derived from it. The first shard of a file carries the file's pass-1 notes so they are counted once.
    """
    file_name = file_name or Path(index.path).name
    shards: list[dict[str, Any]] = []
    current: list[Group] = []
    size = 0
    for group in index.groups:
        current.append(group)
        size += group.length
        if size >= shard_bytes or group is index.groups[-1]:
            shard = {"path": index.path, "file_name": file_name, "subset": subset_of(file_name)}
            shards.append({**shard, "groups": current, "notes": {}})
            current, size = [], 0
    if shards:  # none when every line was rejected (--on-bad-record skip)
        shards[0]["notes"] = dict(index.notes)
    return shards
