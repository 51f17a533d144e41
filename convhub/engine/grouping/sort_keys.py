"""The glue between a source's pure row functions and the engine's group-by (``convhub.engine.grouping.local_groupby`` on one
machine, Spark's shuffle on a cluster), for rows of one conversation that may lie anywhere in the input.

In the pass that reads the files, each row is keyed and converted at once (``keyed_file_rows``, ``payload``): its
sort key ``(group, order)``, and its converted value as ``marshal`` bytes, the fastest exact round trip of plain
values. A row the conversion refuses travels as its SourceError and its raw line instead, so that it is rejected
alone, in conversation order, where the records are made. After the sort, ``grouped_rows`` hands the source each
conversation's values in order, having rejected the refused ones. A stream, which cannot sort a whole input,
regroups only adjacent rows (``adjacent_runs``).
"""

from __future__ import annotations

import itertools
import marshal
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from convhub.engine.grouping.local_groupby import KeyedRow, SortKey
from convhub.errors import Reject, SourceError, raise_error

_CONVERTED, _REJECTED = 0, 1

#: What a source's ``key_row(number, row, raw)`` gives for a row it keeps: its group, its order, its payload.
Keyed = tuple[tuple[str, ...], tuple, bytes]


def payload(convert: Callable[..., Any], raw: bytes, *arguments: Any) -> bytes:
    """The row's payload: ``convert(*arguments)`` (plain values ``marshal`` writes), or the SourceError it raised
    with the row's ``raw`` line."""
    try:
        value = convert(*arguments)
    except SourceError as error:
        return marshal.dumps((_REJECTED, (error.path, error.record, error.field, error.problem), raw))
    return marshal.dumps((_CONVERTED, value, None))


def keyed_file_rows(
    objects: Iterable[tuple[int, int, bytes, dict[str, Any]]],
    file_index: int,
    key_row: Callable[[int, dict[str, Any], bytes], Keyed | None],
    reject: Reject = raise_error,
) -> Iterator[KeyedRow]:
    """(sort key, payload, bytes of the source line) of each row of file ``file_index`` (``json_lines.read_objects``'s
    (line number, offset, raw line, row)) that ``key_row`` keeps (None: left out). The order is followed by the file
    index and the line, so that rows of equal order keep their input order; a SourceError ``key_row`` raises rejects
    the row with its line."""
    for number, _, raw, row in objects:
        try:
            keyed = key_row(number, row, raw)
        except SourceError as error:
            reject(error, raw)
            continue
        if keyed is not None:
            group, order, converted = keyed
            yield (group, (*order, file_index, number)), converted, len(raw) + 1


def grouped_rows(
    rows: Iterable[tuple[SortKey, bytes]], reject: Reject = raise_error
) -> Iterator[tuple[tuple[str, ...], Iterator[tuple[tuple, Any]]]]:
    """(group, its rows) of (sort key, payload) pairs sorted by key: each conversation's (order, converted value)
    in order, read one at a time (consume them before the next group, as with ``itertools.groupby``). A refused
    row goes to ``reject`` there, alone."""
    for group, run in itertools.groupby(rows, key=_group_of):
        yield group, _accepted(run, reject)


def adjacent_runs(rows: Iterable[KeyedRow]) -> Iterator[tuple[SortKey, bytes]]:
    """(sort key, payload) of keyed rows with each run of adjacent rows of one group sorted by key: the regrouping
    a stream can do while it reads each file once (a group whose rows lie apart comes as several runs)."""
    for _, run in itertools.groupby(rows, key=_group_of):
        for key, payload, _ in sorted(run):
            yield key, payload


def _group_of(row: tuple) -> tuple[str, ...]:
    return row[0][0]


def _accepted(run: Iterable[tuple[SortKey, bytes]], reject: Reject) -> Iterator[tuple[tuple, Any]]:
    for (_, order), encoded in run:
        kind, value, raw = marshal.loads(encoded)
        if kind == _REJECTED:
            reject(SourceError(*value), raw)
            continue
        yield order, value
