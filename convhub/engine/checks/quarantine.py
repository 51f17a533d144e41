"""``--on-bad-record skip``: rejected source records go to a quarantine file, never silently away
(docs/guarantees.md, "Bad input"). Each process appends its rejections to its own part file (:func:`append_lines`:
``num_proc`` workers never share a file); the build and ``convhub check`` merge the parts (:func:`collect`) into
one file beside the output folder (:func:`path_beside`), and the card counts them per kind (:func:`counts`)."""

from __future__ import annotations

import base64
import codecs
import glob
import json
import logging
import os
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

from convhub.engine.readers.storable import unencodable_field
from convhub.errors import RAW_LIMIT, SkippedBytes, SourceError
from convhub.storage.folders import Folder, PathArg, folder_at, is_url, move
from convhub.storage.staging import OutputError

ON_BAD_RECORD = ("raise", "skip")
PART_PATTERN = "quarantine-*.jsonl"
SUFFIX = ".quarantine.jsonl"
NOTE_PREFIX = "bad record skipped (--on-bad-record skip; listed in the quarantine file)"

logger = logging.getLogger("convhub.engine.checks.quarantine")

_LINE = re.compile(r"\bline (\d+)\b")
_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
_NUMBER = re.compile(r"\d+")


def check_policy(on_bad_record: str) -> str:
    if on_bad_record not in ON_BAD_RECORD:
        raise ValueError(f"on_bad_record must be one of {', '.join(ON_BAD_RECORD)}, not {on_bad_record!r}")
    return on_bad_record


def path_beside(output: PathArg) -> Folder:
    """``<output>.quarantine.jsonl``, in the output's parent folder (outside what push uploads; a URL for a
    folder at a URL)."""
    output = folder_at(output)
    return output.parent / f"{output.name}{SUFFIX}"


def kind_of(error: SourceError) -> str:
    """The reason without the values in it, so that rejections of one kind count together.

    ``sessions[3].messages[0].role: unknown role 'x'`` → ``sessions[N].messages[N].role: unknown role …``.
    """
    problem = error.problem.split(": ", 1)[0] if error.problem.startswith("not valid") else error.problem
    problem = _NUMBER.sub("N", _QUOTED.sub("…", problem))
    problem = problem.split(", also in ", 1)[0].split(" (first at ", 1)[0]
    field = _NUMBER.sub("N", error.field) if error.field else "(the record)"
    return f"{field}: {problem}"[:160]


def _utf8_head(head: bytes, cut: bool) -> str | None:
    """``head`` as text, or None when it is not UTF-8. A character cut at the limit does not count: the
    incremental decoder holds back an unfinished one at the end unless it is told the bytes are all there."""
    try:
        return codecs.getincrementaldecoder("utf-8")().decode(head, final=not cut)
    except UnicodeDecodeError:
        return None


def _raw_fields(raw: Any) -> dict[str, Any]:
    """``raw`` (bytes, a reader's :class:`SkippedBytes`, text or a value, as its JSON) cut to :data:`RAW_LIMIT`
    (``raw_truncated``), its size (``raw_size``), and base64 when it is not UTF-8."""
    if raw is None:
        return {"raw": None}
    if isinstance(raw, (bytes, bytearray, SkippedBytes)):
        head, size = (raw.head, raw.size) if isinstance(raw, SkippedBytes) else (raw, len(raw))
        head = bytes(head[:RAW_LIMIT])
        text = _utf8_head(head, cut=size > RAW_LIMIT)
        entry = {"raw": text, "raw_size": size}
        if text is None:
            entry.update(raw=base64.b64encode(head).decode("ascii"), raw_encoding="base64")
    else:
        text = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False, default=repr)
        size = len(text)
        entry = {"raw": text[:RAW_LIMIT], "raw_size": size}
    if size > RAW_LIMIT:
        entry["raw_truncated"] = True
    return entry


def entry(
    error: SourceError, raw: Any = None, scope: str = "record", records: int | None = None
) -> dict[str, Any]:
    """One rejection: ``file``, ``record`` (as the error names it), ``line`` (when the record names one),
    ``field``, ``reason``, ``kind`` (:func:`kind_of`), ``scope`` (``record``; ``file`` when the rest of a file from
    that point could not be read; ``span`` when a stretch of a file could not be read and reading went on after
    it: then ``records`` says how many source records it held, 0 or more) and the record's source text
    (:func:`_raw_fields`)."""
    line = _LINE.search(str(error.record)) if error.record is not None else None
    counted = {} if records is None else {"records": records}
    return {
        "file": error.path,
        "record": error.record,
        "line": int(line.group(1)) if line else None,
        "field": error.field,
        "reason": error.problem,
        "kind": kind_of(error),
        "scope": scope,
        **counted,
        **_raw_fields(raw),
    }


def write(
    folder: str | None, error: SourceError, raw: Any = None, scope: str = "record", records: int | None = None
) -> None:
    """Append one rejection to this process's part file in ``folder`` (logged when there is no folder)."""
    if folder is None:
        logger.warning("bad record skipped: %s", error)
        return
    append_lines(folder, [_json_text(entry(error, raw, scope, records)) + "\n"])


def append_lines(folder: str, lines: list[str], part: object = None) -> None:
    """Append rejections (JSON lines) to the part file ``part`` (this process's by default) in ``folder``."""
    name = f"quarantine-{os.getpid() if part is None else part}.jsonl"
    with open(os.path.join(folder, name), "a", encoding="utf-8") as handle:
        handle.writelines(lines)


def part_lines(folder: str | os.PathLike) -> Iterator[str]:
    """The lines of every part file in ``folder``, file by file."""
    for path in sorted(glob.glob(os.path.join(folder, PART_PATTERN))):
        with open(path, encoding="utf-8") as part:
            yield from part


def _natural(value: Any) -> tuple:
    text = "" if value is None else str(value)
    return tuple(
        (0, int(piece), "") if piece.isdigit() else (1, 0, piece) for piece in re.split(r"(\d+)", text)
    )


def collect(folder: str | os.PathLike) -> list[dict[str, Any]]:
    """Every worker's rejections, each once (the builder runs of one build, one per config, may each reject the
    same record), sorted by file and record."""
    unique: dict[tuple, dict[str, Any]] = {}
    for line in part_lines(folder):
        item = json.loads(line)
        key = (item["file"], item["record"], item["field"], item["reason"], item["scope"], item["raw"])
        unique.setdefault(key, item)
    return sorted(unique.values(), key=lambda item: (item["file"], _natural(item["record"])))


def records_lost(entries: list[dict[str, Any]]) -> int:
    """How many source records the rejections stand for (an entry is one, unless it says ``records``)."""
    return sum(item.get("records", 1) for item in entries)


def unread_files(entries: list[dict[str, Any]]) -> list[str]:
    """The files whose rest, from some point, could not be read (scope ``file``): how many records they held
    there is unknown, so a count of skipped records alone would understate the loss."""
    return sorted({item["file"] for item in entries if item["scope"] == "file"})


def unread_text(unread: list[str] | tuple[str, ...]) -> str:
    """What the build's warning and ``convhub check`` add after the count of skipped records when some files
    could not be read to their end ("" when every file was): which, and that their lost records are not
    counted."""
    if not unread:
        return ""
    shown = ", ".join(os.path.basename(name) for name in unread[:3])
    more = f" and {len(unread) - 3} more" if len(unread) > 3 else ""
    return f", and the rest of {len(unread)} file(s) could not be read ({shown}{more}; the records there are not counted)"


def counts(entries: list[dict[str, Any]]) -> Counter:
    """Rejections per kind, as the build's notes (and so the card) list them."""
    return Counter(f"{NOTE_PREFIX}: {item['kind']}" for item in entries)


def _json_text(value: Any) -> str:
    """JSON text that a UTF-8 file can hold: readable characters, escapes only where a lone surrogate (which
    UTF-8 cannot encode) is in ``value``; ``json.loads`` gives back the same value either way."""
    text = json.dumps(value, ensure_ascii=False)
    return text if unencodable_field(text) is None else json.dumps(value)


#: The most characters of a quarantine file's first line :func:`check_replaceable` reads. A line convhub writes
#: holds at most ``RAW_LIMIT`` characters of ``raw`` (under 1 MB even escaped) beside a few short fields, so a first
#: line longer than this is no rejection convhub wrote; reading it whole would have no limit.
FIRST_LINE_LIMIT = 4 * 2**20


def check_replaceable(target: PathArg) -> None:
    """Refuse a quarantine path that holds a file convhub did not write (its first line is no rejection). A device
    (``/dev/zero``), a FIFO or a link is refused unread; of a regular file, only :data:`FIRST_LINE_LIMIT`
    characters of its first line are read."""
    target = folder_at(target)
    if not target.exists() and not target.is_symlink():
        return
    refused = OutputError(f"{target} is not a quarantine file convhub wrote: refusing to replace it")
    # (``is_file`` asks the file's status without opening it: a FIFO's open would wait for a writer)
    if target.is_symlink() or not target.is_file():
        raise refused
    try:
        with target.open(encoding="utf-8") as handle:
            line = handle.readline(FIRST_LINE_LIMIT + 1)
        first = json.loads(line) if len(line) <= FIRST_LINE_LIMIT else None
        ours = isinstance(first, dict) and {"file", "reason", "kind", "scope"} <= first.keys()
    except (OSError, ValueError):
        ours = False
    if not ours:
        raise refused


def save(entries: list[dict[str, Any]], target: PathArg) -> None:
    """Write the quarantine file whole (through a temporary name, so a reader never sees half of it)."""
    target = folder_at(target)
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    with partial.open("w", encoding="utf-8") as handle:
        for item in entries:
            handle.write(_json_text(item) + "\n")
    if is_url(target):
        target.unlink(missing_ok=True)  # (fsspec's move does not replace a file everywhere)
        move(partial, target)
    else:
        partial.replace(target)
