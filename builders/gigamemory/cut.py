"""Pass 1 on one line, without parsing every dialogue.

Several lines share one dialogue, byte for byte. Pass 1 cuts a line into its question fields and the raw
bytes of its ``sessions`` value (the span), parses the fields alone, and parses and hashes a span only
the first time its bytes are seen. The cut is proved right, never assumed: the fields are parsed with a
random placeholder in the span's place, which must come out as the value of the object's ``sessions``;
a span is parsed on first sight, so it is one JSON value. Then the line is the object with that value
put back, exactly what parsing the whole line gives. Any other line is parsed whole, as before.

What is made here depends on its line alone (:class:`PreparedLine`): :mod:`builders.gigamemory.scan` reads a file
into prepared lines, :mod:`builders.gigamemory.index` groups them, and pass 2 checks with :func:`line_fingerprint`
that it re-read the very line pass 1 indexed.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass, field
from typing import Any

from builders.gigamemory.read import decode_line, dialogue_digest, id_as_text, where
from convhub.engine.jsonio import INEXACT, orjson_exact
from convhub.errors import SourceError

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
    its key, and before ``, "ans_session_ids"`` or the closing brace. Only a guess: :func:`split_line`
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


def split_line(raw, start: int = 0, end: int | None = None) -> tuple[dict[str, Any], int, int] | None:
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
    record = orjson_exact(before + _PLACEHOLDER + after)
    if type(record) is not dict or record.get("sessions") != _PLACEHOLDER_TEXT:
        return None
    return record, span_start - start, span_end - start


def line_fingerprint(raw, span: tuple[int, int] | None, span_sha256: str | None = None) -> str:
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


@dataclass
class PreparedLine:
    """What indexing one line needs that depends on no other line (its dialogue's digest may come later, from
    the first line with the same span: :mod:`builders.gigamemory.scan`)."""

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


def prepare_line(path, number: int, offset: int, raw: bytes, digests: dict) -> PreparedLine:
    """Everything pass 1 needs of one line read whole (a ``.gz``'s).

    ``digests`` (span sha256 → dialogue digest) remembers the dialogues this process already parsed.
    """
    bom = number == 1 and raw.startswith(b"\xef\xbb\xbf")
    if bom:
        raw, offset = raw[3:], offset + 3
    prepared = PreparedLine(number, offset, len(raw), raw, None, bom=bom)
    if not raw.strip():
        prepared.blank = True
        return prepared
    if not _prepare_cut_line(prepared, raw, digests):
        prepare_whole_line(path, prepared, raw, drop_raw=False)
    return prepared


def prepare_whole_line(path, prepared: PreparedLine, raw: bytes, drop_raw: bool) -> None:
    """The line parsed whole (one that cannot be cut): its errors are the ones a user sees. With
    ``drop_raw`` (a mapped file's line), the bytes are kept only for ``reject`` and the line check made."""
    number = prepared.number
    if drop_raw:
        prepared.line_check = line_fingerprint(raw, None)
    try:
        record = decode_line(path, number, raw)
        if "id" not in record:
            raise SourceError(path, where(number), "id", "missing")
        prepared.id_text = id_as_text(record["id"], path, where(number), "id")
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


def _prepare_cut_line(prepared: PreparedLine, raw: bytes, digests: dict) -> bool:
    """Prepare a line from its question fields and its span's digest (see above); False if it cannot be cut
    or its id is bad (the whole-line path then reports what is wrong, exactly as before)."""
    cut = split_line(raw)
    if cut is None or not usable_id(cut[0]):
        return False
    record, start, end = cut
    span = memoryview(raw)[start:end]
    span_sha256 = hashlib.sha256(span).hexdigest()
    digest = digests.get(span_sha256)
    if digest is None:
        digest = span_dialogue_digest(span)
        if digest is None:
            return False
        digests[span_sha256] = digest
    take_cut(prepared, record, start, end)
    prepared.digest, prepared.span_sha256 = digest, span_sha256
    return True


def usable_id(record: dict[str, Any]) -> bool:
    """Whether a cut line's id is one :func:`id_as_text` takes (an int or a str, not a bool); a line with any
    other is parsed whole, which reports it."""
    record_id = record.get("id")
    return "id" in record and not isinstance(record_id, bool) and isinstance(record_id, (int, str))


def take_cut(prepared: PreparedLine, record: dict[str, Any], span_start: int, span_end: int) -> None:
    """Fill ``prepared`` from a cut line's question fields (``record``, its ``sessions`` a placeholder)."""
    prepared.id_text = str(record["id"])
    prepared.record_id = record["id"]
    prepared.has_sessions = True
    prepared.span = (span_start, span_end)
    prepared.fields = {key: value for key, value in record.items() if key != "sessions"}
    prepared.keys = list(record)


def span_dialogue_digest(span) -> str | None:
    """The dialogue digest of a span's bytes, or None when they are not one float-free JSON value."""
    sessions = orjson_exact(span)
    return None if sessions is INEXACT else dialogue_digest(sessions, float_free=True)
