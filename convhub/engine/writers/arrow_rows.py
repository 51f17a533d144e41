"""Rows held partly as Arrow arrays (a very long conversation's turns): made, read back and written."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from convhub import schema
from convhub.engine.runners.memory import give_back_pages

#: The Arrow type of one turn, as the ``sessions`` table holds it.
SESSION_TURN_TYPE: pa.StructType = (
    schema.SESSIONS_FEATURES.arrow_schema.field("sessions").type.value_type.field("turns").type.value_type
)


#: A row as a parser made it (a dict, a schema TypedDict such as ``schema.Turn``).
RowT = TypeVar("RowT")


class ArrowList(Sequence):
    """A list of a record held as one Arrow array (a very long conversation's turns), for a parser that would
    otherwise make a Python dict of each element, several times the element's own size.

    Read as a sequence of plain values (``as_py``, a slice at a time), so whatever walks a record (statistics,
    language detection, ``datasets``' encoding, ``pa.Table.from_pylist``) sees what a list would hold; the writer
    (``rows_table``) puts the array into the table as it is (as does ``pa.array``: ``__arrow_array__``).
    """

    #: Elements made Python values at a time while iterating.
    CHUNK = 1024
    #: Turns made an Arrow array at a time by ``session_turns``, and the fewest it makes one of.
    ROWS_CHUNK = 4096

    def __init__(self, array: pa.Array):
        self.array = array

    @classmethod
    def joined(cls, chunks: list[pa.Array]) -> ArrowList:
        """One list of the arrays ``chunks``, copied into one array. The memory the process let go of is given
        back first (``give_back_pages``): the chunks were made from Python values a chunk at a time, and the
        copy, as large as the chunks, would otherwise grow the process by as much as they hold."""
        if len(chunks) == 1:
            return cls(chunks[0])
        give_back_pages()
        return cls(pa.concat_arrays(chunks))

    def __arrow_array__(self, type=None):
        return self.array if type is None else self.array.cast(type)

    def __len__(self) -> int:
        return len(self.array)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[position] for position in range(*index.indices(len(self)))]
        return self.array[index].as_py()

    def __iter__(self) -> Iterator[Any]:
        for start in range(0, len(self.array), self.CHUNK):
            yield from self.array.slice(start, self.CHUNK).to_pylist()

    def __repr__(self) -> str:
        return f"ArrowList({len(self)} {self.array.type})"


def session_turns(turns: Iterable[RowT]) -> ArrowList | list[RowT]:
    """A parser's turns of one session (dicts of the ``sessions`` table's turn type, made as they are read) as one
    ``ArrowList``, converted ``ArrowList.ROWS_CHUNK`` at a time, so that only a chunk of dicts (each several times
    its JSON) lives at once. Fewer than ``ROWS_CHUNK`` turns stay the list of dicts (a few arrays would cost more
    than a short list); so do all of them when one holds a string UTF-8 cannot encode, so that the record's check
    (``readers.storable.unencodable_field``) names it."""
    chunks: list[pa.Array] = []
    turns = iter(turns)
    while chunk := list(itertools.islice(turns, ArrowList.ROWS_CHUNK)):
        if not chunks and len(chunk) < ArrowList.ROWS_CHUNK:
            return chunk
        try:
            chunks.append(pa.array(chunk, SESSION_TURN_TYPE))
        except UnicodeEncodeError:
            return [turn for made in chunks for turn in made.to_pylist()] + chunk + list(turns)
    return ArrowList.joined(chunks) if chunks else []


def records_of_batch(batch: pa.RecordBatch) -> list[dict]:
    """``batch.to_pylist()`` of a ``sessions`` batch, but a session of ``ArrowList.ROWS_CHUNK`` turns or more
    keeps them as an ``ArrowList`` over the batch's own array (no copy), as its parser made them: read back as
    dicts, a long session would cost several times its JSON (LoCoMo's ``observations`` view)."""
    sessions = batch.column("sessions")
    flat = sessions.flatten()  # every row's sessions, in order
    turns = flat.field("turns")
    lengths = turns.value_lengths()
    if not len(turns) or pc.max(lengths).as_py() < ArrowList.ROWS_CHUNK:
        return batch.to_pylist()
    records = batch.drop_columns(["sessions"]).to_pylist()
    names = [field.name for field in flat.type]
    others = [name for name in names if name != "turns"]
    shells = pa.StructArray.from_arrays([flat.field(name) for name in others], others).to_pylist()
    made = []
    for shell, length, session_turns in zip(shells, lengths.to_pylist(), turns, strict=True):
        long = length is not None and length >= ArrowList.ROWS_CHUNK
        held = ArrowList(session_turns.values) if long else session_turns.as_py()
        made.append({name: held if name == "turns" else shell[name] for name in names})
    each_made = iter(made)
    for record, count in zip(records, sessions.value_lengths().to_pylist(), strict=True):
        record["sessions"] = None if count is None else list(itertools.islice(each_made, count))
    return [{name: record[name] for name in batch.schema.names} for record in records]


def has_arrow_turns(row: dict) -> bool:
    """Whether some session of ``row`` (a ``sessions`` row) holds its turns as an ``ArrowList``."""
    sessions = row.get("sessions")
    return isinstance(sessions, list) and any(
        isinstance(session, dict) and isinstance(session.get("turns"), ArrowList) for session in sessions
    )


def rows_table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    """``pa.Table.from_pylist(rows, schema=schema)``, but a row whose turns are an ``ArrowList`` becomes a table
    of its own around that array (``_arrow_turns_table``), not Python dicts: the same values, rows and types."""
    if not any(has_arrow_turns(row) for row in rows):
        return pa.Table.from_pylist(rows, schema=schema)
    tables = []
    for arrow, run in itertools.groupby(rows, key=has_arrow_turns):
        if arrow:
            tables += [_arrow_turns_table(row, schema) for row in run]
        else:
            tables.append(pa.Table.from_pylist(list(run), schema=schema))
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables)


def _arrow_turns_table(row: dict, schema: pa.Schema) -> pa.Table:
    """One ``sessions`` row as a table: everything but the turns by ``from_pylist``, then each session's turns
    (an ``ArrowList``'s array, or a list converted here) put in as one list array."""
    sessions = row["sessions"]
    shell = {**row, "sessions": [{**session, "turns": []} for session in sessions]}
    table = pa.Table.from_pylist([shell], schema=schema)
    index = schema.get_field_index("sessions")
    column = table.column(index).combine_chunks()
    session_type = column.type.value_type
    turns_type = session_type.field("turns").type
    # an ArrowList gives its own array (``__arrow_array__``, no copy)
    values = [pa.array(session["turns"], turns_type.value_type) for session in sessions]
    offsets = pa.array([0, *itertools.accumulate(map(len, values))], pa.int32())
    joined = values[0] if len(values) == 1 else pa.concat_arrays(values)  # one session: no copy
    turns = pa.ListArray.from_arrays(offsets, joined, type=turns_type)
    structs = column.values  # one row, one list: its values are the row's sessions
    fields = [turns if field.name == "turns" else structs.field(i) for i, field in enumerate(session_type)]
    rebuilt = pa.StructArray.from_arrays(fields, fields=list(session_type))
    return table.set_column(
        index, schema.field(index), pa.ListArray.from_arrays(column.offsets, rebuilt, type=column.type)
    )
