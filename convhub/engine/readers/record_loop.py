"""The per-record loop every source runs: one raw record in, one canonical record (or a rejection) out.

A source's conversion is a pure function ``convert(raw, notes) -> record`` that raises
:class:`~convhub.errors.FieldError` (or a full :class:`~convhub.errors.SourceError`) for a bad record. This
loop gives each record its own ``Notes``, so the normalizations of a rejected record are never counted, names
the file and the record in the error, and hands a bad record to the build's policy (``reject``: stop, or
quarantine and go on).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from convhub.errors import NESTED_TOO_DEEPLY, FieldError, Notes, Reject, SourceError, raise_error

Converted = TypeVar("Converted")


def convert_records(
    path: str,
    items: Iterable[tuple[str | int, Any]],
    convert: Callable[[Any, Notes], Converted],
    notes: Notes,
    reject: Reject = raise_error,
) -> Iterator[Converted]:
    """``convert`` over ``items`` ((where, raw record): ``where`` is how an error names the record, its index
    or id); the normalizations of each converted record are added to ``notes``."""
    for where, raw in items:
        counted = Notes()
        try:
            record = convert_one(path, where, raw, convert, counted)
        except SourceError as error:
            reject(error, raw)
            continue
        del raw  # the raw record is not held while its record is written
        notes.update(counted)
        yield record


def convert_one(
    path: str, where: str | int, raw: Any, convert: Callable[[Any, Notes], Converted], notes: Notes
) -> Converted:
    """One record through ``convert``; a :class:`FieldError` or a too-deep value becomes a
    :class:`SourceError` naming ``path`` and ``where``."""
    try:
        return convert(raw, notes)
    except FieldError as error:
        raise SourceError(path, where, error.field, error.problem) from None
    except RecursionError:
        raise SourceError(path, where, None, NESTED_TOO_DEEPLY) from None
