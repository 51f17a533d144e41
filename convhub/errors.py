"""Errors and normalization notes shared by every parser.

A parser never guesses silently: bad input raises :class:`SourceError` naming the file, the record (or
line) and the field; every value it rewrites is counted in a :class:`Notes` so that ``convhub check`` and
the dataset card can say what was normalized and how often.
"""

from __future__ import annotations

import os
import socket
from collections import Counter
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

#: An exception class :func:`kind_in_chain` looks for.
ErrorKind = TypeVar("ErrorKind", bound=BaseException)


class SourceError(ValueError):
    """A source record that cannot be converted; the message names file, record and field."""

    def __init__(
        self, path: str | os.PathLike[str], record: str | int | None, field: str | None, problem: str
    ):
        self.path = str(path)
        self.record = record
        self.field = field
        self.problem = problem
        where = self.path
        if record is not None:
            where += f", record {record}"
        if field is not None:
            where += f", field {field!r}"
        super().__init__(f"{where}: {problem}")

    def __reduce__(self):
        """Survive pickling, so an error raised in a ``num_proc`` worker reaches the parent intact."""
        return (SourceError, (self.path, self.record, self.field, self.problem))


class FieldError(ValueError):
    """What a source's pure conversion raises: the field (a dotted path such as ``sessions[2].date``) and the
    problem. The engine's per-record loop (``convhub.engine.readers.record_loop``) knows the file and the record, and turns
    it into a :class:`SourceError` naming all three."""

    def __init__(self, field: str | None, problem: str):
        self.field = field
        self.problem = problem
        super().__init__(f"field {field!r}: {problem}" if field else problem)

    def __reduce__(self):
        return (FieldError, (self.field, self.problem))


class UsageError(Exception):
    """A command line that cannot run as given, found after parsing: one line and exit status 2 (``cli.errors``).
    Here, below every command's package, so that a command (``publish.command``) raises it without importing
    the CLI that imports the command."""


class EngineError(RuntimeError):
    """An engine that cannot run a build (PySpark not installed, a Spark master that does not answer): the
    message says what to do."""


#: Python's JSON reader, and any recursive walk, stops at about a thousand levels of nesting.
NESTED_TOO_DEEPLY = "a value is nested too deeply to read (thousands of levels of arrays or objects)"


def require(mapping: dict, key: str, kind: type, path, record, field: str | None = None) -> Any:
    """``mapping[key]`` when present and of ``kind`` (a bool never counts as an int); else a SourceError
    naming ``field`` (default: ``key``)."""
    field = field or key
    if key not in mapping:
        raise SourceError(path, record, field, "missing")
    value = mapping[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise SourceError(path, record, field, f"expected {kind.__name__}, got {type(value).__name__}")
    return value


def require_field(mapping: dict, key: str, kind: type, parent: str = "", optional: bool = False) -> Any:
    """:func:`require` for a pure conversion: ``mapping[key]`` when present and of ``kind`` (a bool is no int),
    else a :class:`FieldError` naming ``parent.key``; an absent ``optional`` key is None."""
    field = f"{parent}.{key}" if parent else key
    if key not in mapping:
        if optional:
            return None
        raise FieldError(field, "missing")
    value = mapping[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise FieldError(field, f"expected {kind.__name__}, got {type(value).__name__}")
    return value


class Notes(Counter):
    """Counts of normalizations and oddities by kind, e.g. ``notes.add("integer answer → string")``."""

    def add(self, kind: str, count: int = 1) -> None:
        self[kind] += count

    def as_sorted_list(self) -> list[tuple[str, int]]:
        return sorted(self.items(), key=lambda item: (-item[1], item[0]))


#: What a parser calls with a bad record (the error, and the record's raw text or value when it has it):
#: :func:`raise_error` by default; ``--on-bad-record skip`` passes one that quarantines it and goes on.
#: A third argument, ``scope="file"``, says the rest of a file from that point could not be read;
#: ``scope="span"`` with ``records=N`` says these bytes, which held N records, could not be read and the
#: reading went on after them.
Reject = Callable[..., None]
#: The most of a bad record's raw text a rejection keeps (bytes, or characters of a value's JSON): the quarantine
#: cuts an entry's ``raw`` there, and a reader hands on no more of a long skipped stretch (``SkippedBytes``).
RAW_LIMIT = 64 << 10


class SkippedBytes(NamedTuple):
    """A ``raw`` too long to hold (a stretch a reader skipped, a file left out whole): its first bytes, up to
    ``RAW_LIMIT``, and its whole size in bytes."""

    head: bytes
    size: int


def raise_error(
    error: SourceError, raw: Any = None, scope: str = "record", records: int | None = None
) -> None:
    """The default bad-record policy: stop at the first bad record."""
    raise error


def kind_in_chain(error: BaseException, kind: type[ErrorKind]) -> ErrorKind | None:
    """The first exception of ``kind`` along ``error``'s chain (:func:`in_chain`), typed as such."""
    found = in_chain(error, lambda each: isinstance(each, kind))
    return found if isinstance(found, kind) else None


def in_chain(error: BaseException, wanted) -> BaseException | None:
    """The first exception along ``error``'s chain (itself, its causes and contexts) that ``wanted`` accepts."""
    seen: set[int] = set()
    pending = [error]
    while pending:
        current = pending.pop(0)
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if wanted(current):
            return current
        pending += [current.__cause__, current.__context__]
    return None


def unconnectable(error: BaseException) -> str | None:
    """Why no connection could be made, in words, when ``error`` (a client's own connect error, say) stands for a
    cause that waiting does not mend: nothing listens there ("connection refused"), or the host's name does not
    resolve (``socket.gaierror``); else None."""
    if in_chain(error, lambda each: isinstance(each, ConnectionRefusedError)) is not None:
        return "connection refused"
    if in_chain(error, lambda each: isinstance(each, socket.gaierror)) is not None:
        return "its host name does not resolve"
    return None
