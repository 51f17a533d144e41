"""The per-record loop every source runs (:func:`convert_records`): one raw record and its place in, one canonical
record (or a rejection) out, through the source's pure ``convert(raw, place, notes) -> record``, which raises
:class:`~convhub.errors.FieldError` (or a full :class:`~convhub.errors.SourceError`) for a bad record.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Any, TypeVar

from convhub.engine.readers.contract import Place
from convhub.engine.readers.long_lists import materialized
from convhub.errors import NESTED_TOO_DEEPLY, FieldError, Notes, Reject, SourceError, raise_error

Converted = TypeVar("Converted")
Convert = Callable[[Any, Place, Notes], Converted]


class UniqueIds:
    """The parse-time duplicate-id check: a record whose ``field`` (a key of the raw record) holds an id an
    earlier converted record of the same file holds, or, given ``first_files`` (id → (file, record) of the
    records this process read in other files), of another file, is an error naming the field and where the id
    was first. Reading one file again (as a stream's passes do) repeats nothing.

    This is what one process sees, named while parsing; the build's conversation_id check over the written
    shards (``convhub.engine.checks.duplicate_ids``) stays its last word across processes."""

    def __init__(self, field: str, first_files: dict[Hashable, tuple[str, str | int]] | None = None):
        self.field, self.first_files = field, first_files
        self.here: dict[Hashable, str | int] = {}

    def check(self, raw: Any, place: Place) -> None:
        """Raise the error of a repeated id; else remember this record's."""
        value = raw.get(self.field) if isinstance(raw, dict) else None
        if not isinstance(value, Hashable) or value is None:
            return
        first_file, first_record = place.file, self.here.get(value, place.record)
        if self.first_files is not None:
            first_file, first_record = self.first_files.setdefault(value, (place.file, place.record))
            first_record = self.here.get(value, first_record)
        if value in self.here or first_file != place.file:
            also = f", record {first_record}" if first_record != place.record else ""
            problem = f"duplicate {self.field} {value!r}, also in {first_file}{also}"
            raise SourceError(place.file, place.record, self.field, problem)
        self.here[value] = place.record


def convert_records(
    items: Iterable[tuple[Place, Any]],
    convert: Convert[Converted],
    notes: Notes,
    reject: Reject = raise_error,
    unique: UniqueIds | None = None,
) -> Iterator[Converted]:
    """``convert`` over ``items`` ((place, raw record), as a reader gives them); the normalizations of each
    converted record are added to ``notes``, each record counting in its own ``Notes`` first, so that a rejected
    record's are never counted. A bad record goes to the build's policy (``reject``: stop, or quarantine and go
    on), named by its place's file and record. Given ``unique`` (the source's ``ID_FIELD``), a converted record
    whose id repeats is rejected."""
    for place, raw in items:
        counted = Notes()
        try:
            record = convert_one(place, raw, convert, counted)
            if unique is not None:
                unique.check(raw, place)
        except SourceError as error:
            reject(error, materialized(raw))  # (a large record's lazy lists as the lists they are)
            continue
        del raw  # the raw record is not held while its record is written
        notes.update(counted)
        yield record


def convert_one(place: Place, raw: Any, convert: Convert[Converted], notes: Notes) -> Converted:
    """One record through ``convert``; a :class:`FieldError` or a too-deep value becomes a
    :class:`SourceError` naming the place's file and record."""
    try:
        return convert(raw, place, notes)
    except FieldError as error:
        raise SourceError(place.file, place.record, error.field, error.problem) from None
    except RecursionError:
        raise SourceError(place.file, place.record, None, NESTED_TOO_DEEPLY) from None
