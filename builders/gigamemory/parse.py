"""GigaMemory JSONL → canonical conversation records, in two streaming passes.

Each GigaMemory line is one question *and* the whole dialogue it is asked about (~350k characters), and
several lines can share one dialogue. Loading a file whole, or keeping every dialogue to find the shared
ones, would not scale to files of thousands of such lines, so:

1. :func:`index_file` reads a file once (a plain file mapped, a ``.gz`` line by line), and keeps per
   line only its position, the hash of
   its ``sessions`` (canonical JSON → sha256) and its small question fields. Lines with the same hash are
   one *group*: one conversation carrying all their questions.
2. :func:`plan_shards` cuts each file's groups (in order of first appearance) into shards of a bounded
   size; :func:`parse_shard` re-reads only the first line of each group by byte offset and emits one
   canonical record per group. A shard's offsets only increase, so a ``.jsonl.gz`` is read with forward
   seeks in a single decompression pass.

Every field of every line is reachable in the output, with its raw JSON type: the question's ``extra``
holds the line's file, line number, raw ``id`` and ``ans_session_ids`` (and anything else), the session's
``extra`` its raw ``id``; key order is kept where it differs from the real file's. That is enough to
rebuild each line, in its file and order, from the ``sessions`` config.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import mmap
import os
import re
import secrets
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from convhub import schema
from convhub.errors import NESTED_TOO_DEEPLY, Notes, Reject, SourceError, raise_error
from convhub.jsonio import array_line_problem, holds_float, json_document_problem

#: The four question types of the contest, in the order of its format document.
QUESTION_TYPES = ("fact_equal_session", "info_consolidation", "info_updating", "no_info")
#: Key order of a line, a session and a message in the real file (format_example.jsonl).
RECORD_KEYS = ("id", "question", "ans", "question_type", "sessions", "ans_session_ids")
SESSION_KEYS = ("id", "messages")
MESSAGE_KEYS = ("role", "content")
#: Roles kept as they are; GigaMemory itself only uses user and assistant.
ROLES = ("user", "assistant", "system")
SUFFIXES = (".jsonl.gz", ".jsonl")
#: A dialogue id is the file stem plus this many hex digits of the dialogue's sha256.
DIGEST_DIGITS = 16


# -- reading lines --------------------------------------------------------------------------------


def subset_of(path: str | os.PathLike) -> str:
    """The subset of a file is its name without ``.jsonl`` / ``.jsonl.gz``."""
    name = Path(path).name
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return Path(path).stem


#: Read buffer for a whole-file pass: a GigaMemory line is ~650 KB, which readline gathers 8 KB at a time
#: by default (half of the time of reading a file line by line).
READ_BUFFER_BYTES = 2**20


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


_INEXACT = object()


def _float_free(value: Any) -> bool:
    """True when a decoded JSON value holds no float: what orjson and json agree on exactly (orjson reads
    an integer beyond 64 bits as a float, and prints floats its own way, which the digest would see)."""
    return not holds_float(value)


def _exact_loads(raw) -> Any:
    """``orjson.loads(raw)`` where it equals ``json.loads``, else ``_INEXACT`` (also for bad JSON).

    orjson refuses what json reads differently (NaN, infinities, lone surrogates, a byte-order mark),
    and :func:`_float_free` catches the one silent difference (integers beyond 64 bits).
    """
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _INEXACT
    return value if _float_free(value) else _INEXACT


def decode_line(path: str | os.PathLike, line_number: int, raw: bytes) -> dict[str, Any]:
    """One line → its JSON object; the error names file and line.

    orjson reads the line where it gives json's value; anything else (bad JSON included) is read by json,
    so values and error messages are json's.
    """
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


def dialogue_digest(sessions: Any, float_free: bool | None = None) -> str:
    """sha256 of the sessions' canonical JSON: equal exactly when the dialogues are equal, ids' types too.

    The canonical JSON is ``json.dumps(sessions, ensure_ascii=False, separators=(",", ":"))`` in UTF-8
    (conversation ids derive from it). ``orjson.dumps`` writes the same bytes for a float-free value
    (checked on every code point) and is 20x faster; it refuses what it would write otherwise (integers
    beyond 64 bits, non-string keys, lone surrogates), and those go through json.
    """
    data = None
    if float_free if float_free is not None else _float_free(sessions):
        try:
            data = orjson.dumps(sessions)
        except TypeError:  # orjson.JSONEncodeError
            data = None
    if data is None:
        # surrogatepass: a lone surrogate must not crash the hash; the record is then rejected by name
        # (``ConversationBuilder._storable``), as Parquet cannot hold it
        data = json.dumps(sessions, ensure_ascii=False, separators=(",", ":")).encode(
            "utf-8", "surrogatepass"
        )
    return hashlib.sha256(data).hexdigest()


# -- pass 1 without parsing every dialogue -------------------------------------------------------------
#
# Several lines share one dialogue, byte for byte. Pass 1 cuts a line into its question fields and the raw
# bytes of its ``sessions`` value (the span), parses the fields alone, and parses and hashes a span only
# the first time its bytes are seen. The cut is proved right, never assumed: the fields are parsed with a
# random placeholder in the span's place, which must come out as the value of the object's ``sessions``;
# a span is parsed on first sight, so it is one JSON value. Then the line is the object with that value
# put back, exactly what parsing the whole line gives. Any other line is parsed whole, as before.

_SESSIONS_KEY = re.compile(rb'"sessions"[ \t\r\n]*:[ \t\r\n]*')
_WHITESPACE = b" \t\r\n"
#: Unguessable, so no line can spell it (escaped or not) to pass for the placeholder.
_PLACEHOLDER_TEXT = f"convhub-sessions-{secrets.token_hex(16)}"
_PLACEHOLDER_BYTES = _PLACEHOLDER_TEXT.encode()
_PLACEHOLDER = b'"' + _PLACEHOLDER_BYTES + b'"'


def _end_before(raw, end: int, start: int) -> int:
    """``end`` moved back over whitespace, not before ``start``."""
    while end > start and raw[end - 1] in _WHITESPACE:
        end -= 1
    return end


def _sessions_span(raw, start: int = 0, end: int | None = None) -> tuple[int, int] | None:
    """Where the ``sessions`` value of the line ``raw[start:end]`` probably is (offsets into ``raw``): after
    its key, and before ``, "ans_session_ids"`` or the closing brace. Only a guess: :func:`_split_line`
    proves it. ``raw`` is the line's bytes or the whole mapped file."""
    end = len(raw) if end is None else end
    match = _SESSIONS_KEY.search(raw, start, end)
    if match is None:
        return None
    span_start = match.end()
    follower = raw.rfind(b'"ans_session_ids"', span_start, end)
    span_end = _end_before(raw, follower if follower != -1 else end, span_start)
    if span_end <= span_start or raw[span_end - 1] != (ord(",") if follower != -1 else ord("}")):
        return None
    span_end = _end_before(raw, span_end - 1, span_start)
    return (span_start, span_end) if span_end > span_start else None


def _split_line(raw, start: int = 0, end: int | None = None) -> tuple[dict[str, Any], int, int] | None:
    """(the object of the line ``raw[start:end]`` with a placeholder for ``sessions``, span start, span
    end), the span relative to ``start``; or None. Only the bytes around the span are copied."""
    end = len(raw) if end is None else end
    span = _sessions_span(raw, start, end)
    if span is None:
        return None
    span_start, span_end = span
    before, after = raw[start:span_start], raw[span_end:end]
    if _PLACEHOLDER_BYTES in before or _PLACEHOLDER_BYTES in after:
        return None
    record = _exact_loads(before + _PLACEHOLDER + after)
    if type(record) is not dict or record.get("sessions") != _PLACEHOLDER_TEXT:
        return None
    return record, span_start - start, span_end - start


def _line_check(raw, span: tuple[int, int] | None, span_sha256: str | None = None) -> str:
    """What pass 2 compares to know it re-read the very line pass 1 indexed (``raw``: bytes or a view).

    A whole line's sha256; for a cut line, its span's and the rest's.
    """
    if span is None:
        return hashlib.sha256(raw).hexdigest()
    start, end = span
    if span_sha256 is None:
        span_sha256 = hashlib.sha256(memoryview(raw)[start:end]).hexdigest()
    rest = hashlib.sha256(bytes(raw[:start]) + bytes(raw[end:])).hexdigest()
    return f"{span_sha256}:{rest}"


# -- pass 1: the index -----------------------------------------------------------------------------


@dataclass
class Line:
    """What the index keeps of one line: where it is and its question fields (everything but sessions)."""

    number: int
    fields: dict[str, Any]
    keys: list[str]


@dataclass
class Group:
    """Lines sharing one dialogue; the dialogue is read again from the first of them."""

    digest: str
    offset: int
    length: int
    line_check: str  # of the first line's bytes (_line_check): pass 2 checks it re-read that very line
    lines: list[Line] = field(default_factory=list)
    #: Where the first line's ``sessions`` value is, when pass 1 cut the line: pass 2 parses only that.
    span: tuple[int, int] | None = None


@dataclass
class FileIndex:
    path: str
    groups: list[Group]
    notes: Notes
    #: Lines (or unreadable file tails) handed to ``reject`` under ``--on-bad-record skip``.
    rejected: int = 0


def _id_text(value: Any, path, location: str, field_name: str) -> str:
    """Integer and string ids are both accepted and become strings (the raw value is kept elsewhere)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise SourceError(
            path, location, field_name, f"expected an integer or a string, got {type(value).__name__}"
        )
    return str(value)


def index_file(path: str | os.PathLike, reject: Reject = raise_error, processes: int = 1) -> FileIndex:
    """Pass 1: read the file once and group its lines by dialogue, keeping no dialogue in memory.

    A bad line goes to ``reject`` with its bytes (raising by default); a file that cannot be read on from
    some line (corrupt gzip) goes there once, and the lines before that point are kept. With
    ``processes`` > 1, a large plain file's distinct dialogues are parsed and hashed in that many
    processes (most of pass 1); grouping stays here, in file order, so the index is the same.
    """
    notes = Notes()
    groups: dict[str, Group] = {}
    seen_ids: dict[str, int] = {}
    rejected = 0
    lines = _prepared_lines(path, processes)
    while True:
        try:
            prepared = next(lines)
        except StopIteration:
            break
        except SourceError as error:
            rejected += 1
            reject(error, None, "file")
            break
        try:
            _add_line(path, prepared, notes, groups, seen_ids)
        except SourceError as error:
            if not groups and not rejected and prepared.error is error:  # the first line with content
                _refuse_json_document(path, prepared, error)
            rejected += 1
            reject(error, prepared.raw if prepared.raw is not None else _read_back(path, prepared))
            continue
    if not groups and not rejected:
        raise SourceError(
            path, None, None, "no records: the file is empty (a GigaMemory file has one JSON object per line)"
        )
    return FileIndex(str(path), list(groups.values()), notes, rejected)


def _refuse_json_document(path, prepared: _Prepared, error: SourceError) -> None:
    """Raise one SourceError naming the file when its first line is not JSON because the file is one JSON
    document (an array or object over many lines, or an array on one line), not one error for each line."""
    if error.problem == "expected a JSON object, got list":
        raise SourceError(path, None, None, array_line_problem(prepared.number, "GigaMemory")) from None
    if not error.problem.startswith("not valid JSON"):
        return
    raw = prepared.raw if prepared.raw is not None else _read_back(path, prepared)
    following = (line for number, _, line in iter_lines(path) if number > prepared.number)
    problem = json_document_problem(raw, following, "GigaMemory")
    if problem is not None:
        raise SourceError(path, None, None, problem) from None


@dataclass
class _Prepared:
    """What indexing one line needs that depends on no other line (so it can be made in a worker)."""

    number: int
    offset: int
    length: int
    raw: bytes | None  # kept in-process, and for a bad line (``reject`` gets its bytes)
    #: Made for a mapped line parsed whole (which drops ``raw``); else for a group's first line only.
    line_check: str | None
    bom: bool = False
    blank: bool = False
    error: SourceError | None = None  # not JSON, no or bad id: raised in file order by _add_line
    id_text: str | None = None
    record_id: Any = None
    has_sessions: bool = False
    digest: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    keys: list[str] = field(default_factory=list)
    span: tuple[int, int] | None = None
    span_sha256: str | None = None
    span_first: int | None = None  # a mapped line's place in the list of distinct spans, until its digest


def _prepare_line(path, number: int, offset: int, raw: bytes, digests: dict) -> _Prepared:
    """Everything pass 1 needs of one line read whole (a ``.gz``'s).

    ``digests`` (span sha256 → dialogue digest) remembers the dialogues this process already parsed.
    """
    bom = number == 1 and raw.startswith(b"\xef\xbb\xbf")
    if bom:
        raw, offset = raw[3:], offset + 3
    prepared = _Prepared(number, offset, len(raw), raw, None, bom=bom)
    if not raw.strip():
        prepared.blank = True
        return prepared
    if not _prepare_cut_line(prepared, raw, digests):
        _prepare_whole_line(path, prepared, raw, drop_raw=False)
    return prepared


def _prepare_whole_line(path, prepared: _Prepared, raw: bytes, drop_raw: bool) -> None:
    """The line parsed whole (one that cannot be cut): its errors are the ones a user sees. With
    ``drop_raw`` (a mapped file's line), the bytes are kept only for ``reject`` and the line check made."""
    number = prepared.number
    if drop_raw:
        prepared.line_check = _line_check(raw, None)
    try:
        record = decode_line(path, number, raw)
        if "id" not in record:
            raise SourceError(path, where(number), "id", "missing")
        prepared.id_text = _id_text(record["id"], path, where(number), "id")
    except SourceError as error:
        prepared.error, prepared.raw = error, raw
        return
    prepared.record_id = record["id"]
    prepared.has_sessions = "sessions" in record
    if prepared.has_sessions:
        prepared.digest = dialogue_digest(record["sessions"])
    elif drop_raw:
        prepared.raw = raw  # it will be rejected
    prepared.fields = {key: value for key, value in record.items() if key != "sessions"}
    prepared.keys = list(record)


def _prepare_cut_line(prepared: _Prepared, raw: bytes, digests: dict) -> bool:
    """Prepare a line from its question fields and its span's digest (see above); False if it cannot be cut
    or its id is bad (the whole-line path then reports what is wrong, exactly as before)."""
    cut = _split_line(raw)
    if cut is None or not _usable_id(cut[0]):
        return False
    record, start, end = cut
    span = memoryview(raw)[start:end]
    span_sha256 = hashlib.sha256(span).hexdigest()
    digest = digests.get(span_sha256)
    if digest is None:
        digest = _span_dialogue_digest(span)
        if digest is None:
            return False
        digests[span_sha256] = digest
    _take_cut(prepared, record, start, end)
    prepared.digest, prepared.span_sha256 = digest, span_sha256
    return True


def _usable_id(record: dict[str, Any]) -> bool:
    """Whether a cut line's id is one :func:`_id_text` takes (an int or a str, not a bool); a line with any
    other is parsed whole, which reports it."""
    record_id = record.get("id")
    return "id" in record and not isinstance(record_id, bool) and isinstance(record_id, (int, str))


def _take_cut(prepared: _Prepared, record: dict[str, Any], span_start: int, span_end: int) -> None:
    """Fill ``prepared`` from a cut line's question fields (``record``, its ``sessions`` a placeholder)."""
    prepared.id_text = str(record["id"])
    prepared.record_id = record["id"]
    prepared.has_sessions = True
    prepared.span = (span_start, span_end)
    prepared.fields = {key: value for key, value in record.items() if key != "sessions"}
    prepared.keys = list(record)


def _add_line(path, prepared: _Prepared, notes: Notes, groups: dict, seen_ids: dict) -> Group | None:
    """Index one prepared line into its group (None for a blank line); a SourceError leaves the index as it was."""
    number = prepared.number
    if prepared.bom:
        notes.add("UTF-8 byte-order mark at the start of a file (skipped)")
    if prepared.blank:
        notes.add("blank line (skipped)")
        return None
    if prepared.error is not None:
        raise prepared.error
    id_text = prepared.id_text
    if id_text in seen_ids:
        raise SourceError(
            path,
            where(number, prepared.record_id),
            "id",
            f"duplicate id {id_text!r} (first at line {seen_ids[id_text]})",
        )
    if not prepared.has_sessions:
        raise SourceError(path, where(number, prepared.record_id), "sessions", "missing")
    seen_ids[id_text] = number
    digest = prepared.digest
    group = groups.get(digest)
    if group is None:
        line_check = prepared.line_check or _first_line_check(path, prepared)
        group = groups[digest] = Group(
            digest, prepared.offset, prepared.length, line_check, span=prepared.span
        )
    else:
        notes.add("line sharing its dialogue with an earlier line (one conversation, several questions)")
    group.lines.append(Line(number, prepared.fields, prepared.keys))
    return group


def _first_line_check(path, prepared: _Prepared) -> str:
    """The line check of a line that begins a group, if its preparation did not make it: a mapped cut
    line reads back only the bytes around its span (whose sha256 it has)."""
    if prepared.raw is not None:
        return _line_check(prepared.raw, prepared.span, prepared.span_sha256)
    start, end = prepared.span
    with open(path, "rb") as handle:
        before = os.pread(handle.fileno(), start, prepared.offset)
        after = os.pread(handle.fileno(), prepared.length - end, prepared.offset + end)
    return f"{prepared.span_sha256}:{hashlib.sha256(before + after).hexdigest()}"


def _read_back(path, prepared: _Prepared) -> bytes:
    """The bytes of a line a worker prepared without keeping them (a plain file: offsets are bytes)."""
    with open(path, "rb") as handle:
        handle.seek(prepared.offset)
        return handle.read(prepared.length)


#: A plain file smaller than this has its dialogues digested in-process whatever ``processes`` says.
PARALLEL_INDEX_BYTES = 32 * 2**20
#: Bytes at each end of a span that key it (with its length) before a byte-for-byte comparison.
SPAN_KEY_BYTES = 4096


def _prepared_lines(path, processes: int) -> Iterator[_Prepared]:
    """Every line prepared, in file order.

    A ``.gz`` is read line by line. A plain file is mapped: each line is cut where it lies (no copy of
    its dialogue), and each distinct dialogue span is parsed and hashed once, in-process or, for a large
    file, in ``processes`` workers.
    """
    if str(path).endswith(".gz"):
        digests: dict[str, str] = {}
        for number, offset, raw in iter_lines(path):
            yield _prepare_line(path, number, offset, raw, digests=digests)
        return
    mapped = _map(path)
    if mapped is None:
        return
    prepared: list[_Prepared] = []
    firsts: list[_Prepared] = []  # the first line of each distinct dialogue span, in file order
    jobs = _scan_mapped(path, mapped, prepared, firsts)
    if processes > 1 and len(mapped) >= PARALLEL_INDEX_BYTES:
        import multiprocessing

        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        with multiprocessing.get_context(method).Pool(processes) as pool:
            # the pool takes jobs from the scan (in its task thread) as the scan finds them
            digested = list(pool.imap(_digest_span_at, jobs))
    else:
        digested = []
        with memoryview(mapped) as view:
            for _, start, length in jobs:  # each span just scanned: still in memory
                digested.append(_span_digest(view[start : start + length]))
                _release(mapped, start, start + length)
    for item, (digest, span_sha256) in zip(firsts, digested, strict=True):
        item.digest, item.span_sha256 = digest, span_sha256
    for position, item in enumerate(prepared):
        if item.span_first is not None:
            first = firsts[item.span_first]
            if first.digest is None:  # not one float-free JSON value: the whole line says what it is
                prepared[position] = _prepare_whole_mapped_line(path, mapped, item)
                continue
            item.digest, item.span_sha256 = first.digest, first.span_sha256
            item.span_first = None
    del firsts
    yield from prepared


def _map(path):
    """The plain file's bytes, mapped read-only (None for an empty file). Never closed explicitly: the
    mapping goes with its last reference, so a view still held by a traceback cannot make it fail."""
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            return None
        return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)


def _lines_of(mapped) -> Iterator[tuple[int, int, int]]:
    """(1-based line number, start, end) of every line, its end without ``\\r`` / ``\\n`` (as iter_lines)."""
    size = len(mapped)
    position = number = 0
    while position < size:
        newline = mapped.find(b"\n", position)
        stop = size if newline == -1 else newline
        end = stop
        while end > position and mapped[end - 1] == 13:  # \r
            end -= 1
        number += 1
        yield number, position, end
        position = stop + 1


def _blank(mapped, start: int, end: int) -> bool:
    """``not raw.strip()`` for the line ``mapped[start:end]``, without copying a long line."""
    if mapped[start : min(end, start + 64)].strip():
        return False
    return not mapped[start:end].strip()


def _prepare_mapped_line(path, mapped, number: int, start: int, end: int) -> _Prepared:
    """A line of a mapped file: cut where it lies; its digest comes later (:func:`_distinct_spans`)."""
    bom = number == 1 and mapped[start : start + 3] == b"\xef\xbb\xbf"
    if bom:
        start += 3
    prepared = _Prepared(number, start, end - start, None, None, bom=bom)
    if _blank(mapped, start, end):
        prepared.blank = True
        return prepared
    cut = _split_line(mapped, start, end)
    if cut is not None and _usable_id(cut[0]):
        _take_cut(prepared, *cut)
        return prepared
    _prepare_whole_line(path, prepared, mapped[start:end], drop_raw=True)
    return prepared


def _prepare_whole_mapped_line(path, mapped, cut: _Prepared) -> _Prepared:
    """A cut line prepared again as a whole line (its span was not one float-free JSON value)."""
    again = _Prepared(cut.number, cut.offset, cut.length, None, None, bom=cut.bom)
    _prepare_whole_line(path, again, mapped[cut.offset : cut.offset + cut.length], drop_raw=True)
    return again


def _scan_mapped(path, mapped, prepared: list[_Prepared], firsts: list[_Prepared]) -> Iterator[tuple]:
    """Prepare every line of a mapped file into ``prepared``; yield (path, offset, length) of each span
    not seen before, as it is found (its line appended to ``firsts``)."""
    spans = _SpanPlaces()
    with memoryview(mapped) as view:
        for number, start, end in _lines_of(mapped):
            item = _prepare_mapped_line(path, mapped, number, start, end)
            prepared.append(item)
            if (
                item.span is not None
                and item.digest is None
                and _place_span(mapped, view, item, firsts, spans)
            ):
                yield path, item.offset + item.span[0], item.span[1] - item.span[0]
            _release(mapped, start, end + 1)


@dataclass
class _SpanPlaces:
    """Where pass 1 finds the first line of a span's bytes, in ``firsts``: in time linear in the spans.

    ``by_key`` maps a cheap key (length, crc32 of the first and of the last ``SPAN_KEY_BYTES``) to the
    first span with that key; a span with a taken key is compared with that one span only, and when it
    differs its full sha256 looks it up in ``by_sha256``. So a line costs at most one comparison and one
    hash, however many distinct spans share a key (pairwise comparison made thousands of such lines
    quadratic). The first span of a key is never in ``by_sha256``: the comparison finds its copies.
    """

    by_key: dict[tuple, int] = field(default_factory=dict)
    by_sha256: dict[str, int] = field(default_factory=dict)


def _same_bytes(mapped, view, first_start: int, start: int, length: int) -> bool:
    """Whether ``mapped[start:start + length]`` equals the span at ``first_start`` (a search bounded to
    the span's own length is one comparison, at memcmp speed)."""
    same = mapped.find(view[first_start : first_start + length], start, start + length) == start
    _release(mapped, first_start, first_start + length)
    return same


def _full_sha256(span) -> str:
    """The sha256 of a span's bytes: what tells apart spans of one cheap key."""
    return hashlib.sha256(span).hexdigest()


def _place_span(mapped, view, item: _Prepared, firsts: list[_Prepared], spans: _SpanPlaces) -> bool:
    """Set ``item.span_first`` to the place in ``firsts`` of the first line with the same span bytes;
    append ``item`` (and return True) when its span is new.

    A dialogue seen again costs one comparison with the first span of its key, no hash and no parse; a
    different span with the same key costs one sha256 (see :class:`_SpanPlaces`).
    """
    start, end = item.offset + item.span[0], item.offset + item.span[1]
    key = (
        end - start,
        zlib.crc32(view[start : min(end, start + SPAN_KEY_BYTES)]),
        zlib.crc32(view[max(start, end - SPAN_KEY_BYTES) : end]),
    )
    index = spans.by_key.get(key)
    if index is None:
        spans.by_key[key] = len(firsts)
    else:
        first = firsts[index]
        if _same_bytes(mapped, view, first.offset + first.span[0], start, end - start):
            item.span_first = index
            return False
        sha256 = _full_sha256(view[start:end])
        index = spans.by_sha256.get(sha256)
        if index is not None:
            item.span_first = index
            return False
        spans.by_sha256[sha256] = len(firsts)
    item.span_first = len(firsts)
    firsts.append(item)
    return True


_PAGE = mmap.PAGESIZE
_DONTNEED = getattr(mmap, "MADV_DONTNEED", None)


def _release(mapped, start: int, end: int) -> None:
    """Unmap the pages of ``mapped[start:end]`` from this process (they stay in the page cache and come
    back on the next read): a whole-file pass must not count the file in its resident memory."""
    if _DONTNEED is None:
        return
    start -= start % _PAGE
    end = min(end, len(mapped))
    if end > start:
        mapped.madvise(_DONTNEED, start, end - start)


def _span_dialogue_digest(span) -> str | None:
    """The dialogue digest of a span's bytes, or None when they are not one float-free JSON value."""
    sessions = _exact_loads(span)
    return None if sessions is _INEXACT else dialogue_digest(sessions, float_free=True)


def _span_digest(span) -> tuple[str | None, str]:
    """(:func:`_span_dialogue_digest` of a span's bytes, the sha256 of the bytes)."""
    return _span_dialogue_digest(span), hashlib.sha256(span).hexdigest()


def _digest_span_at(job: tuple) -> tuple[str | None, str]:
    """:func:`_span_digest` of ``length`` bytes at ``offset`` of a plain file (in a worker)."""
    path, offset, length = job
    with open(path, "rb") as handle:
        return _span_digest(os.pread(handle.fileno(), length, offset))


_INDEX_CACHE: dict[tuple, FileIndex] = {}
#: Bytes at each end of a file whose sha256 is part of its version (all of a file twice this size or less).
VERSION_SAMPLE_BYTES = 64 * 2**10


def file_version(path: str | os.PathLike) -> tuple:
    """What tells one version of a file from another, for the index caches.

    Size and modification time alone miss a file rewritten in place with the same size and its mtime set
    back (``os.utime``, ``touch -r``, ``rsync -t``, a restore): the change time (which no call can set back),
    device and inode catch that, and the sha256 of the file's first and last ``VERSION_SAMPLE_BYTES`` (all
    of a small file; a ``.gz``'s last 8 bytes are the CRC of all its content) catches it even where a
    filesystem's clock is too coarse to move between two writes.
    """
    with open(path, "rb") as handle:
        stat = os.fstat(handle.fileno())
        sample = hashlib.sha256()
        if stat.st_size <= 2 * VERSION_SAMPLE_BYTES:
            sample.update(handle.read())
        else:
            sample.update(os.pread(handle.fileno(), VERSION_SAMPLE_BYTES, 0))
            sample.update(
                os.pread(handle.fileno(), VERSION_SAMPLE_BYTES, stat.st_size - VERSION_SAMPLE_BYTES)
            )
    return (
        os.path.abspath(path),
        stat.st_size,
        stat.st_mtime_ns,
        stat.st_ctime_ns,
        stat.st_dev,
        stat.st_ino,
        sample.hexdigest(),
    )


def cached_index(path: str | os.PathLike, reject: Reject = raise_error, processes: int = 1) -> FileIndex:
    """:func:`index_file`, once per file version: a build asks for the shards of every config.

    In memory for this process and, for a large file, on disk (:func:`stored_index`): the next build or
    stream of the same file version starts at once. An index that rejected lines is not kept: each build
    must hand its rejections to its own ``reject``.
    """
    key = file_version(path)
    if key not in _INDEX_CACHE:
        persist = key[1] >= PERSIST_INDEX_BYTES
        index = stored_index(key, path) if persist else None
        if index is None:
            index = index_file(path, reject, processes)
            if index.rejected or file_version(path) != key:  # changed while indexed: keep nothing
                return index
            if persist:
                store_index(key, index)
        if len(_INDEX_CACHE) >= 64:
            _INDEX_CACHE.clear()
        _INDEX_CACHE[key] = index
    return _INDEX_CACHE[key]


#: A file at least this large keeps its index on disk: pass 1 reads all of it, a small one is read at once.
PERSIST_INDEX_BYTES = 32 * 2**20
#: Where indexes are kept; None = ``<datasets cache>/convhub/gigamemory-index``.
INDEX_STORE: str | None = None
_CODE_VERSION: list[str] = []


def _store_file(key: tuple) -> str:
    """One file per :func:`file_version` and version of this module, so a change of either misses."""
    if not _CODE_VERSION:
        _CODE_VERSION.append(hashlib.sha256(Path(__file__).read_bytes()).hexdigest())
    root = INDEX_STORE
    if root is None:
        import datasets

        root = os.path.join(datasets.config.HF_DATASETS_CACHE, "convhub", "gigamemory-index")
    name = hashlib.sha256(json.dumps([*key, _CODE_VERSION[0]]).encode()).hexdigest()
    return os.path.join(root, f"{name}.json")


def store_index(key: tuple, index: FileIndex) -> None:
    """Write the index as JSON (json, not orjson: floats, NaN and big integers of the fields round-trip).

    Atomic; a cache that cannot be written is skipped: it only saves time.
    """
    groups = [
        [g.digest, g.offset, g.length, g.line_check, g.span, [[x.number, x.fields, x.keys] for x in g.lines]]
        for g in index.groups
    ]
    target = _store_file(key)
    temporary = f"{target}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump({"notes": dict(index.notes), "groups": groups}, handle)
        os.replace(temporary, target)
    except OSError:
        with contextlib.suppress(OSError):
            os.remove(temporary)


def stored_index(key: tuple, path: str | os.PathLike) -> FileIndex | None:
    """The index :func:`store_index` wrote for this file version, or None."""
    try:
        with open(_store_file(key), encoding="utf-8") as handle:
            data = json.load(handle)
        groups = [
            Group(
                digest,
                offset,
                length,
                line_check,
                [Line(number, fields, keys) for number, fields, keys in lines],
                None if span is None else tuple(span),
            )
            for digest, offset, length, line_check, span, lines in data["groups"]
        ]
        return FileIndex(str(path), groups, Notes(data["notes"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def plan_shards(index: FileIndex, shard_bytes: int, file_name: str | None = None) -> list[dict[str, Any]]:
    """Consecutive groups of one file, about ``shard_bytes`` of dialogue each, in order of first appearance.

    ``file_name`` is the name the source gives the file (a download is cached under a hash); the subset is
    derived from it. The first shard of a file carries the file's pass-1 notes so they are counted once.
    """
    file_name = file_name or Path(index.path).name
    if not index.groups:  # every line was rejected (--on-bad-record skip)
        return []
    shards: list[dict[str, Any]] = []
    current: list[Group] = []
    size = 0
    for group in index.groups:
        current.append(group)
        size += group.length
        if size >= shard_bytes or group is index.groups[-1]:
            shards.append(
                {
                    "path": index.path,
                    "file_name": file_name,
                    "subset": subset_of(file_name),
                    "groups": current,
                    "notes": {},
                }
            )
            current, size = [], 0
    shards[0]["notes"] = dict(index.notes)
    return shards


# -- pass 2: one canonical record per dialogue ------------------------------------------------------


def parse_shard(
    shard: dict[str, Any], notes: Notes, reject: Reject = raise_error
) -> Iterator[dict[str, Any]]:
    """Re-read the first line of each group of the shard (forward seeks only) and build its conversation."""
    path = shard["path"]
    for kind, count in shard["notes"].items():
        notes.add(kind, count)
    with open_binary(path) as handle:
        for group in shard["groups"]:
            raw = _read_group_line(handle, path, group)
            sessions = _INEXACT
            if group.span is not None:
                sessions = _exact_loads(memoryview(raw)[group.span[0] : group.span[1]])
            if sessions is _INEXACT:
                sessions = decode_line(path, group.lines[0].number, raw)["sessions"]
            record = _convert_group(sessions, group, shard, raw, notes, reject)
            if record is not None:
                yield record


def _read_group_line(handle, path, group: Group) -> bytes:
    """The first line of a group, read again and checked to be the very line pass 1 indexed."""
    first = group.lines[0]
    try:
        handle.seek(group.offset)
        raw = handle.read(group.length)  # the line without its end; checked just below
    except (OSError, EOFError, zlib.error) as error:
        raise SourceError(path, where(first.number), None, f"cannot read the file: {error}") from error
    if len(raw) != group.length or _line_check(raw, group.span) != group.line_check:
        raise SourceError(path, where(first.number), None, "the file changed while it was being converted")
    return raw


def _convert_group(
    sessions: Any, group: Group, shard: dict[str, Any], raw: bytes, notes: Notes, reject: Reject
) -> dict[str, Any] | None:
    """One conversation, or None when ``reject`` took every line of it.

    A bad dialogue rejects every line that shares it (each named by its own line); a bad question field
    rejects only its line. Normalizations are counted only for what is kept.
    """
    counted = Notes()
    path = shard["path"]
    try:
        record = parse_conversation(
            sessions, group, shard["subset"], shard["file_name"], path, counted, reject, raw
        )
    except SourceError as error:
        first = group.lines[0]
        for line in group.lines:
            if line is first:
                reject(error, raw)
                continue
            shared = f"{error.problem} (in the dialogue this line shares with line {first.number})"
            line_error = SourceError(path, where(line.number, line.fields["id"]), error.field, shared)
            reject(line_error, {**line.fields, "sessions": f"<the sessions of line {first.number}>"})
        return None
    if not record["questions"]:
        return None
    notes.update(counted)
    return record


def parse_conversation(
    sessions: Any,
    group: Group,
    subset: str,
    file_name: str,
    path: str,
    notes: Notes,
    reject: Reject = raise_error,
    raw: bytes | None = None,
) -> dict[str, Any]:
    first = group.lines[0]
    location = where(first.number, first.fields["id"])
    if not isinstance(sessions, list):
        raise SourceError(path, location, "sessions", f"expected a list, got {type(sessions).__name__}")
    parsed = [parse_session(session, i, path, location, notes) for i, session in enumerate(sessions)]
    session_ids = [session["session_id"] for session in parsed]
    if len(set(session_ids)) != len(session_ids):
        duplicate = next(sid for sid in session_ids if session_ids.count(sid) > 1)
        raise SourceError(path, location, "sessions", f"two sessions have the id {duplicate!r}")
    speakers = list(dict.fromkeys(turn["role"] for session in parsed for turn in session["turns"]))
    return {
        "conversation_id": f"{subset}:{group.digest[:DIGEST_DIGITS]}",
        "source": "gigamemory",
        "subset": subset,
        "language": "ru",
        "speakers": speakers,
        "sessions": parsed,
        "questions": _questions(group, set(session_ids), file_name, path, notes, reject, raw),
        "extra": schema.to_json({"dialogue_sha256": group.digest}),
    }


def _questions(
    group: Group, session_ids: set[str], file_name: str, path: str, notes: Notes, reject: Reject, raw
) -> list[dict[str, Any]]:
    """The question of each line of the group; a line whose question fields are bad goes to ``reject``."""
    questions = []
    for line in group.lines:
        counted = Notes()
        try:
            questions.append(parse_question(line, session_ids, file_name, path, counted))
        except SourceError as error:
            first = line is group.lines[0] and raw is not None
            reject(error, raw if first else {**line.fields, "sessions": "<not kept: the dialogue is valid>"})
            continue
        notes.update(counted)
    return questions


def _leftovers(item: dict, standard: tuple[str, ...]) -> dict[str, Any]:
    """Key order where it differs from the real file's, and keys the format does not name."""
    extra: dict[str, Any] = {}
    if tuple(item) == standard:  # the common case: nothing to keep
        return extra
    extra["key_order"] = list(item)
    unknown = {key: value for key, value in item.items() if key not in standard}
    if unknown:
        extra["fields"] = unknown
    return extra


def parse_session(session: Any, index: int, path: str, location: str, notes: Notes) -> dict[str, Any]:
    name = f"sessions[{index}]"
    if not isinstance(session, dict):
        raise SourceError(path, location, name, f"expected an object, got {type(session).__name__}")
    for key in SESSION_KEYS:
        if key not in session:
            raise SourceError(path, location, f"{name}.{key}", "missing")
    raw_id = session["id"]
    session_id = _id_text(raw_id, path, location, f"{name}.id")
    messages = session["messages"]
    if not isinstance(messages, list):
        raise SourceError(
            path, location, f"{name}.messages", f"expected a list, got {type(messages).__name__}"
        )
    if not messages:
        notes.add("session with no messages (no row in the messages config)")
    turns = [
        parse_message(message, session_id, i, path, location, name) for i, message in enumerate(messages)
    ]
    if turns and turns[0]["role"] != "user":
        notes.add(f"session starting with the {turns[0]['role']} (kept as is)")
    if turns and turns[-1]["role"] == "user":
        notes.add("session ending on a user message (kept as is)")
    extra = _leftovers(session, SESSION_KEYS)
    if not isinstance(raw_id, str):
        extra["id"] = raw_id
    result = schema.empty_session(session_id, turns)
    result["extra"] = schema.to_json(extra) if extra else None
    return result


def parse_message(
    message: Any, session_id: str, index: int, path: str, location: str, session_name: str
) -> dict[str, Any]:
    """One message → one turn. A message of the real file's shape (``role``, ``content``, both strings, a
    known role) takes the short way; any other is checked key by key and named in the error."""
    if (
        type(message) is dict
        and tuple(message) == MESSAGE_KEYS
        and type(message["content"]) is str
        and message["role"] in ROLES
    ):
        role = message["role"]
        return schema.empty_turn(f"{session_id}:{index}", role, role, message["content"])
    name = f"{session_name}.messages[{index}]"
    if not isinstance(message, dict):
        raise SourceError(path, location, name, f"expected an object, got {type(message).__name__}")
    for key in MESSAGE_KEYS:
        if key not in message:
            raise SourceError(path, location, f"{name}.{key}", "missing")
        if not isinstance(message[key], str):
            raise SourceError(
                path, location, f"{name}.{key}", f"expected a string, got {type(message[key]).__name__}"
            )
    role = message["role"]
    if role not in ROLES:
        raise SourceError(
            path, location, f"{name}.role", f"unknown role {role!r}; expected one of {', '.join(ROLES)}"
        )
    turn = schema.empty_turn(f"{session_id}:{index}", role, role, message["content"])
    extra = _leftovers(message, MESSAGE_KEYS)
    turn["extra"] = schema.to_json(extra) if extra else None
    return turn


def parse_question(
    line: Line, session_ids: set[str], file_name: str, path: str, notes: Notes
) -> dict[str, Any]:
    fields = line.fields
    raw_id = fields["id"]
    location = where(line.number, raw_id)
    text = fields.get("question")
    if not isinstance(text, str):
        problem = "missing" if "question" not in fields else f"expected a string, got {type(text).__name__}"
        raise SourceError(path, location, "question", problem)
    question = schema.empty_question(str(raw_id), text)
    extra: dict[str, Any] = {"file": file_name, "line": line.number, "id": raw_id}
    question["category"] = _question_type(fields, path, location, notes)
    question["answer"] = _answer(fields, extra, path, location, notes)
    evidence = _evidence(fields, extra, session_ids, path, location, notes)
    question["evidence_session_ids"] = [sid for sid in evidence if sid in session_ids]
    question["unresolved_evidence"] = [sid for sid in evidence if sid not in session_ids]
    if question["category"] == "no_info" and evidence:
        notes.add("no_info question that still lists answer sessions (kept)")
    leftovers = _leftovers({key: None for key in line.keys}, RECORD_KEYS)
    if "fields" in leftovers:
        leftovers["fields"] = {key: fields[key] for key in leftovers["fields"]}
    extra.update(leftovers)
    question["extra"] = schema.to_json(extra)
    return question


def _question_type(fields: dict, path: str, location: str, notes: Notes) -> str | None:
    if "question_type" not in fields:
        notes.add("line without question_type (category null)")
        return None
    value = fields["question_type"]
    if value is None:
        notes.add("question_type null (category null)")
        return None
    if not isinstance(value, str):
        raise SourceError(path, location, "question_type", f"expected a string, got {type(value).__name__}")
    if value not in QUESTION_TYPES:
        notes.add(f"question_type outside the four of the contest: {value!r}")
    return value


def _answer(fields: dict, extra: dict, path: str, location: str, notes: Notes) -> str | None:
    if "ans" not in fields:
        notes.add("line without ans (answer null)")
        return None
    value = fields["ans"]
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SourceError(path, location, "ans", f"expected a string, got {type(value).__name__}")
    notes.add(f"{type(value).__name__} ans → string (raw kept in extra.ans)")
    extra["ans"] = value
    return str(value)


def _evidence(
    fields: dict, extra: dict, session_ids: set[str], path: str, location: str, notes: Notes
) -> list[str]:
    """``ans_session_ids`` as strings; the raw list is kept in extra (ids naming no session are counted)."""
    if "ans_session_ids" not in fields:
        notes.add("line without ans_session_ids (no evidence)")
        return []
    raw = fields["ans_session_ids"]
    if not isinstance(raw, list):
        raise SourceError(path, location, "ans_session_ids", f"expected a list, got {type(raw).__name__}")
    extra["ans_session_ids"] = raw
    ids = [_id_text(value, path, location, f"ans_session_ids[{i}]") for i, value in enumerate(raw)]
    missing = sum(sid not in session_ids for sid in ids)
    if missing:
        notes.add(
            "ans_session_ids entry naming no session of the dialogue (kept in unresolved_evidence)", missing
        )
    return ids
