"""Rows of a grouped format as Arrow columns: what a source's pass over its files gives the engine's group-by,
and what the engine gives back, sorted, for the source to turn into ``sessions`` rows.

A batch of keyed rows has the engine's ``KEY_FIELDS`` and the source's own value columns. The key columns say
which conversation a row belongs to (``group``: ``group_bytes`` of its texts, which sort as Python sorts
them) and its place in it (``rank``, ``number``, ``text``, then ``file_index`` and ``line``, so that rows of
equal order keep their input order). A row the source converts on columns has its values in the value columns
and no ``payload``. A row only Python converts exactly (a 多轮序号 past 64 bits, a lone surrogate, a field only a
tolerant reader understands, a refused row) travels as today's ``keyed.payload`` bytes with the ``marshal`` of its
exact sort key (``key``), its value columns null: the source turns a conversation holding one in Python.

The engine adds ``partition`` (``with_partition``, the same partition on every engine and in every run), moves
each row to its partition, and sorts each partition by ``SORT_COLUMNS`` (``sort_rows``).
"""

from __future__ import annotations

import itertools
import marshal
import zlib
from collections.abc import Callable, Iterable, Iterator
from json.encoder import encode_basestring
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: A row's sort key: (group, order). ``group`` is the texts naming its conversation; ``order`` is (rank, number,
#: text, file index, line): its place in the conversation, then in the input.
SortKey = tuple[tuple[str, ...], tuple]
#: A row as Python keys it (``keyed.keyed_file_rows``): its sort key, its payload, its source line's bytes.
KeyedRow = tuple[SortKey, bytes, int]


def partition_of(group: tuple[str, ...], count: int) -> int:
    """The partition of a conversation: crc32 of its group written as a JSON list, the same in every process,
    run and engine (Python's ``hash`` of a text changes from one process to the next)."""
    text = "[" + ", ".join(map(encode_basestring, group)) + "]"
    return zlib.crc32(text.encode("utf-8", "surrogatepass")) % count


def group_bytes(group: tuple[str, ...]) -> bytes:
    """The group as bytes that sort as Python sorts the tuples of texts: each text's UTF-8 (a lone surrogate
    passes as its own three bytes, so code point order is byte order), its zero characters written ``00 01``,
    then ``00 00`` to end it. A text that is a prefix of another then sorts first, and no two groups give the
    same bytes (the tuple encoding of ordered key-value stores)."""
    text = "\x00\x00".join([part.replace("\x00", "\x00\x01") for part in group]) + "\x00\x00"
    return text.encode("utf-8", "surrogatepass")


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

KEY_FIELDS: tuple[pa.Field, ...] = (
    pa.field("group", pa.binary(), nullable=False),
    pa.field("rank", pa.int8(), nullable=False),
    pa.field("number", pa.int64(), nullable=False),
    pa.field("text", pa.binary(), nullable=False),
    pa.field("file_index", pa.int32(), nullable=False),
    pa.field("line", pa.int64(), nullable=False),
    #: bytes of the source line and its end: how big a partition is
    pa.field("size", pa.int64(), nullable=False),
    #: ``marshal`` of the exact sort key of a row converted by Python; null for a row converted on columns
    pa.field("key", pa.binary()),
    #: ``keyed.payload`` of a row converted by Python; null for a row converted on columns
    pa.field("payload", pa.binary()),
)
KEY_NAMES = tuple(field.name for field in KEY_FIELDS)
#: The order of a partition's rows: by conversation, then by place in it.
SORT_COLUMNS = ("group", "rank", "number", "text", "file_index", "line")
PARTITION_FIELD = pa.field("partition", pa.int32(), nullable=False)


def keyed_schema(value_fields: Iterable[pa.Field]) -> pa.Schema:
    """The schema of a source's keyed batches: the engine's key columns, then the source's value columns."""
    return pa.schema([*KEY_FIELDS, *value_fields])


def order_columns(order: tuple) -> tuple[int, int, bytes]:
    """(rank, number, text) of an order ``(rank, integer, text)``: an integer past 64 bits is clipped (its
    conversation is sorted again in Python by ``key``), a text kept as UTF-8 with surrogates passed through."""
    rank, number, text = order
    return rank, min(max(number, INT64_MIN), INT64_MAX), text.encode("utf-8", "surrogatepass")


def python_batch(
    rows: Iterable[KeyedRow],
    schema: pa.Schema,
    values_of: Callable[[tuple[str, ...], Any], dict[str, Any] | None] = lambda group, value: None,
) -> pa.RecordBatch:
    """Keyed rows (``KeyedRow``: ((group, order + (file_index, line)), payload, size)) as a batch of
    ``schema``, made by Python: the reference of a source's columnar pass, and the way of the rows it leaves to
    Python. ``values_of(group, converted value)`` gives a row's value columns when they say it exactly; a row
    without (None, or a refused row) keeps its payload and its exact key."""
    columns: dict[str, list] = {name: [] for name in schema.names}
    value_names = [name for name in schema.names if name not in KEY_NAMES]
    for (group, order), payload, size in rows:
        *row_order, file_index, line = order
        kind, value, _ = marshal.loads(payload)
        values = values_of(group, value) if kind == 0 else None
        rank, number, text = order_columns(tuple(row_order))
        key_values = {
            "group": group_bytes(group),
            "rank": rank,
            "number": number,
            "text": text,
            "file_index": file_index,
            "line": line,
            "size": size,
            "key": None if values is not None else marshal.dumps((group, order)),
            "payload": None if values is not None else payload,
        }
        for name, cell in key_values.items():
            columns[name].append(cell)
        for name in value_names:
            columns[name].append(None if values is None else values[name])
    return pa.RecordBatch.from_pydict(columns, schema=schema)


def group_of(encoded: bytes) -> tuple[str, ...]:
    """The texts of a group from its ``group_bytes``."""
    parts = encoded.decode("utf-8", "surrogatepass").split("\x00\x00")[:-1]
    return tuple(part.replace("\x00\x01", "\x00") for part in parts)


def with_partition(batch: pa.RecordBatch, count: int) -> pa.RecordBatch:
    """``batch`` with its ``partition`` column first: ``partition_of`` of each row's group, computed once
    per distinct group of the batch."""
    groups = batch.column("group")
    distinct = pc.unique(groups)
    partitions = np.fromiter(
        (partition_of(group_of(encoded), count) for encoded in distinct.to_pylist()),
        dtype=np.int32,
        count=len(distinct),
    )
    column = pa.array(partitions, pa.int32()).take(pc.index_in(groups, distinct))
    return pa.RecordBatch.from_arrays(
        [column, *batch.columns], schema=pa.schema([PARTITION_FIELD, *batch.schema])
    )


def sort_rows(table: pa.Table) -> pa.Table:
    """A partition's rows in ``SORT_COLUMNS`` order (every conversation's rows together, in order); the table
    itself when it is in that order already (one conversation read in file order), with no copy of its rows."""
    indices = pc.sort_indices(table, [(name, "ascending") for name in SORT_COLUMNS])
    if np.array_equal(indices.to_numpy(), np.arange(table.num_rows)):
        return table
    return table.take(indices)


def conversation_starts(table: pa.Table | pa.RecordBatch) -> np.ndarray:
    """The rows of a sorted table where a new conversation (``group``) begins."""
    rows = table.num_rows
    if rows == 0:
        return np.zeros(0, dtype=np.int64)
    groups = table.column("group")
    changed = pc.not_equal(groups.slice(1), groups.slice(0, rows - 1))
    return np.concatenate([[0], np.flatnonzero(changed.to_numpy(zero_copy_only=False)) + 1]).astype(np.int64)


def exact_key(row_key: bytes | None, group: bytes, columns: tuple) -> SortKey:
    """A row's exact sort key: its ``key`` when Python converted it, else made from its key columns (rank,
    number, text, file_index, line), which say it exactly."""
    if row_key is not None:
        return marshal.loads(row_key)
    rank, number, text, file_index, line = columns
    return group_of(group), (rank, number, text.decode("utf-8", "surrogatepass"), file_index, line)


def payload_rows(
    table: pa.Table, converted_of: Callable[[dict[str, Any]], Any] | None = None
) -> Iterable[tuple[SortKey, bytes]]:
    """(exact sort key, payload) of each row of a sorted table, for a source's Python conversion
    (``ConversationBuilder.grouped_records``): a row converted on columns gets the payload of
    ``converted_of(its value columns)``; a conversation with a row Python converted is sorted again by the exact
    keys (a 多轮序号 past 64 bits sorts by its value, not clipped)."""
    names = [name for name in table.schema.names if name not in KEY_NAMES and name != "partition"]
    starts = [*conversation_starts(table).tolist(), table.num_rows]
    for begin, end in itertools.pairwise(starts):
        run = table.slice(begin, end - begin).to_pylist()
        rows = []
        for row in run:
            columns = (row["rank"], row["number"], row["text"], row["file_index"], row["line"])
            key = exact_key(row["key"], row["group"], columns)
            payload = row["payload"]
            if payload is None:
                if converted_of is None:
                    raise ValueError("a row converted on columns, and no converted_of to read it")
                payload = marshal.dumps((0, converted_of({name: row[name] for name in names}), None))
            rows.append((key, payload))
        if any(row["key"] is not None for row in run):
            rows.sort(key=lambda pair: pair[0])
        yield from rows


#: Rows of keyed columns a source gets at a time from a sorted partition (whole conversations, so more when one
#: conversation is longer).
TABLE_ROWS = 16_384


def whole_conversations(
    batches: Iterable[pa.RecordBatch | pa.Table], rows: int = TABLE_ROWS
) -> Iterator[pa.Table]:
    """Sorted keyed batches (a partition's, in order) as tables of about ``rows`` rows that each hold whole
    conversations: a conversation cut by a batch's end is carried over to the next table."""
    held: list[pa.Table] = []
    count = 0
    for batch in batches:
        table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
        if table.num_rows == 0:
            continue
        held.append(table)
        count += table.num_rows
        if count < rows:
            continue
        joined = pa.concat_tables(held)
        last = int(conversation_starts(joined)[-1])
        if last > 0:
            yield joined.slice(0, last)
            held, count = [joined.slice(last)], joined.num_rows - last
        else:  # one conversation so far: it goes on
            held, count = [joined], joined.num_rows
    if count:
        yield pa.concat_tables(held)
