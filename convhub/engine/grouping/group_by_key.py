"""The group-by-key contract, which the embedded engine's group-by (``grouping.local_groupby``) and Spark's shuffle
(``runners.spark``) both keep, so that the two builds write the same rows in the same order; and the glue between
a source's pure row functions and it (``keyed_file_rows``, ``grouped_rows``).

A source whose rows of one conversation may lie anywhere in its files (MNBVC's 多轮对话) returns a ``group_shard``
and keys its rows (``ConversationBuilder.keyed_rows``, a ``KeyedRow`` each). Then:

- the map half is one function, ``keyed_by_partition``: each row with its partition (``partition_of`` its group);
- each partition's rows are sorted by their whole sort key as Python orders it;
- a partition's sorted rows reach the source as a ``SortedPartition`` (its ``grouped_records``), partitions in
  order.
"""

from __future__ import annotations

import itertools
import marshal
import math
import zlib
from collections.abc import Callable, Iterable, Iterator
from json.encoder import encode_basestring
from typing import Any

from convhub.errors import Reject, SourceError, raise_error

#: A partition holds about this many bytes of source rows.
PARTITION_BYTES = 64 * 2**20
#: A row's sort key: (group, order). ``group`` is the texts naming its conversation; ``order`` orders the rows of
#: one conversation and may hold any value ``marshal`` writes (Python compares them).
SortKey = tuple[tuple[str, ...], tuple]
#: What a source gives for each row of a group shard's file: its sort key, its payload, its source line's bytes.
KeyedRow = tuple[SortKey, bytes, int]


def partition_count(total_bytes: int, part_bytes: int = PARTITION_BYTES) -> int:
    """Parts of about ``part_bytes`` each (at least one): the input's partitions, a partition's slices."""
    return max(1, math.ceil(total_bytes / part_bytes))


def partition_of(group: tuple[str, ...], count: int) -> int:
    """The partition of a conversation: crc32 of its group written as a JSON list, the same in every process,
    run and engine (Python's ``hash`` of a text changes from one process to the next)."""
    text = "[" + ", ".join(map(encode_basestring, group)) + "]"
    return zlib.crc32(text.encode("utf-8", "surrogatepass")) % count


def keyed_by_partition(
    keyed_rows: Iterable[KeyedRow], count: int
) -> Iterator[tuple[int, SortKey, bytes, int]]:
    """The map half, which both engines run: each keyed row of a file with its partition among ``count``."""
    for sort_key, payload, size in keyed_rows:
        yield partition_of(sort_key[0], count), sort_key, payload, size


_CONVERTED, _REJECTED = 0, 1

#: What a source's ``key_row(number, row, raw)`` gives for a row it keeps: its group, its order, its payload.
Keyed = tuple[tuple[str, ...], tuple, bytes]


def payload(convert: Callable[..., Any], raw: bytes, *arguments: Any) -> bytes:
    """The row's payload: ``convert(*arguments)`` as ``marshal`` bytes (plain values: the fastest exact round trip
    of them), or the SourceError it raised with the row's ``raw`` line, so that the row is rejected alone, in
    conversation order, where the records are made (``grouped_rows``)."""
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
    """The ``KeyedRow`` of each row of file ``file_index`` (``json_lines.read_objects``' (line number, offset, raw
    line, row)) that ``key_row`` keeps (None: left out). The order is followed by the file index and the line, so
    that rows of equal order keep their input order; a SourceError ``key_row`` raises rejects the row with its line."""
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
