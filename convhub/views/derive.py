"""Derive views from built ``sessions`` Parquet, without re-parsing the source.

``turns``, ``qa`` and ``messages`` are defined here, once, as Arrow functions of a batch of canonical records:
a build flattens its ``sessions`` Parquet with them, and ``convhub.views.definitions`` runs the same functions on one record
for a stream or a plain ``datasets`` build of a view. Parsing the source again for each view would cost a full
parse per view; flattening the nested columns with Arrow kernels costs a fraction of that. A source's
own views of the record (LoCoMo's ``observations`` and ``events``, ConvLab's ``dialogues``) run their Python
function on the records read back (``record_view_table``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from convhub import schema
from convhub.engine.runners.memory import LARGE_TABLE_BYTES, give_back_pages
from convhub.engine.writers.arrow_rows import records_of_batch
from convhub.engine.writers.parquet_writer import ParquetWriter
from convhub.storage.folders import parquet_file, text_of
from convhub.views.messages import messages_table
from convhub.views.nested import flattened, list_positions, sessions_of, struct_fields

IDS = list(schema.CONVERSATION_IDS)
BATCH_ROWS = 64  # conversations per batch: bounds memory on very long conversations


def turns_table(batch: pa.RecordBatch) -> pa.Table:
    """The ``turns`` rows of a batch."""
    return _turns_rows(batch, _unnested_turns(batch), 0, None)


def _unnested_turns(batch: pa.RecordBatch) -> tuple:
    """What every ``turns`` row of ``batch`` is made of, unnested once: the turns, each turn's session and its
    index there, each session's conversation, its index, and its fields."""
    session_parent, session_index, session_fields = sessions_of(batch)
    turns = session_fields["turns"]
    return (flattened(turns), *list_positions(turns), session_parent, session_index, session_fields)


def _turns_rows(batch: pa.RecordBatch, unnested: tuple, start: int, stop: int | None) -> pa.Table:
    """The ``turns`` rows of the batch's turns ``start`` to ``stop`` (None: to the last)."""
    turn_rows, turn_session, turn_index, session_parent, session_index, session_fields = unnested
    if start or stop is not None:
        length = (len(turn_rows) if stop is None else stop) - start
        turn_rows, turn_session, turn_index = (
            array.slice(start, length) for array in (turn_rows, turn_session, turn_index)
        )
    turn_conversation = session_parent.take(turn_session)
    columns = {name: batch.column(name).take(turn_conversation) for name in IDS}
    columns["session_id"] = session_fields["session_id"].take(turn_session)
    columns["session_index"] = session_index.take(turn_session)
    columns["turn_index"] = turn_index
    columns["date_time"] = session_fields["date_time"].take(turn_session)
    columns["timestamp"] = session_fields["timestamp"].take(turn_session)
    columns.update(struct_fields(turn_rows))
    return pa.table(columns)


#: A batch of more turns than this makes its ``turns`` rows about this many at a time (each a multiple of the
#: row group's 1,000 rows, counted from the writer's pending rows, so that the row groups are the ones the whole
#: table made): one conversation of 300,000 tiny turns made a table of 3.8 times its JSON (every turn repeats its
#: conversation's and session's ids), the peak of a LongMemEval build (issue 54).
TURN_SLICE = 64_000


def turns_tables(batch: pa.RecordBatch, pending: int) -> Iterator[pa.Table]:
    """``turns_table(batch)``, as tables of ``TURN_SLICE`` turns or so for a batch of many more, to a writer that
    holds ``pending`` rows (fewer than ``FLUSH_ROWS``): the first slice tops them up to ``TURN_SLICE``, and a
    last one of fewer than ``FLUSH_ROWS`` rows joins the one before, so that each slice is written as it comes
    (and its memory given back before the next is made)."""
    unnested = _unnested_turns(batch)  # (once for every slice)
    count = len(unnested[0])
    if count <= TURN_SLICE:
        yield _turns_rows(batch, unnested, 0, None)
        return
    bounds = [0, *range(TURN_SLICE - pending, count, TURN_SLICE)]
    if count - bounds[-1] < FLUSH_ROWS and len(bounds) > 1:
        bounds.pop()
    for start, stop in zip(bounds, [*bounds[1:], count], strict=True):
        yield _turns_rows(batch, unnested, start, stop)
        give_back_pages()  # (the slice written: its pages, under LARGE_TABLE_BYTES, would stay the pool's)


def qa_table(batch: pa.RecordBatch) -> pa.Table:
    questions = batch.column("questions")
    parents, _ = list_positions(questions)
    columns = {name: batch.column(name).take(parents) for name in IDS}
    columns.update(struct_fields(flattened(questions)))
    return pa.table(columns)


DERIVERS = {"turns": turns_table, "qa": qa_table, "messages": messages_table}
#: The derivers that count what they leave out or rewrite (into the build's normalizations).
COUNTING = frozenset({"messages"})

#: Derived rows are written in row groups of at least this many rows (or ``FLUSH_BYTES``): one row group
#: per 64-conversation batch made hundreds of tiny groups, and writing them cost a quarter of the derive.
FLUSH_ROWS = 1000
FLUSH_BYTES = 64 * 2**20


class _BufferedWriter:
    """A ``ParquetWriter`` (``convhub.engine.writers.parquet_writer``) fed derived tables, written once enough rows are
    buffered."""

    def __init__(self, features, path: Path):
        self.schema = features.arrow_schema
        self.writer = ParquetWriter(features=features, path=text_of(path))
        self.pending: list[pa.Table] = []
        self.rows = self.bytes = 0

    def add(self, table: pa.Table) -> None:
        self.pending.append(table.select(self.schema.names).cast(self.schema))
        self.rows += table.num_rows
        self.bytes += table.nbytes
        if self.rows >= FLUSH_ROWS or self.bytes >= FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            self.writer.write_table(pa.concat_tables(self.pending))
        written, self.pending, self.rows, self.bytes = self.bytes, [], 0, 0
        if written >= LARGE_TABLE_BYTES:
            give_back_pages()

    def finalize(self) -> tuple[int, int]:
        self.flush()
        return self.writer.finalize()


def record_view_table(records: list[dict], rows_from_record, schema: pa.Schema) -> pa.Table:
    """A source's own view of the record (LoCoMo's ``observations``, ConvLab's ``dialogues``) from the
    records of a sessions batch: its Python function on each record as the ``sessions`` row holds it, which
    is the canonical record the parser made (the ``sessions`` config writes it as it is)."""
    return pa.Table.from_pylist(
        [row for record in records for row in rows_from_record(record)], schema=schema
    )


def _sessions_batches(sessions_path: Path) -> Iterator[pa.RecordBatch]:
    """A sessions shard's rows, ``BATCH_ROWS`` at a time, one row group read at a time.

    pre_buffer=False: a pre-buffering reader keeps every column chunk it read until it is closed, so memory grew
    with the file (the whole compressed sessions shard). A row group read whole, not by ``iter_batches``: its
    reader kept the decompressed pages of the rows it had read beside them (one conversation of 166,667 turns:
    84 MiB beside its 58 MiB row), and decoding took some 2.5 times the row, given back at once."""
    parquet = parquet_file(sessions_path, pre_buffer=False)
    for group in range(parquet.num_row_groups):
        table = parquet.read_row_group(group)
        if table.nbytes >= LARGE_TABLE_BYTES:
            give_back_pages()
        yield from table.to_batches(BATCH_ROWS)
        table = None  # let go before the next row group is read, not beside it


def _add_views(
    batch: pa.RecordBatch, views: dict[str, tuple[object, Path, object]], writers: dict, notes: Counter
) -> None:
    """Every view of a batch of sessions rows, added to its writer."""
    records = None  # the batch as Python records, made once for the views that need them
    for name, writer in writers.items():
        rows_from_record = views[name][2]
        if rows_from_record is not None:
            records = records_of_batch(batch) if records is None else records  # (long sessions' turns: Arrow)
            writer.add(record_view_table(records, rows_from_record, writer.schema))
        elif name in COUNTING:
            writer.add(DERIVERS[name](batch, notes))
        elif name == "turns":
            for table in turns_tables(batch, writer.rows):
                writer.add(table)
        else:
            writer.add(DERIVERS[name](batch))


def derive_views(
    views: dict[str, tuple[object, Path, object]], sessions_path: Path
) -> tuple[dict[str, tuple[int, int]], Counter]:
    """Write every view of ``views`` from one read of a sessions shard. ``views``: name → (features, output
    path, the view's function of a record, or None for a shared view that Arrow flattens: ``DERIVERS``).

    Returns name → (rows, bytes) as ``datasets`` counts them, and the counts of what the views left out or merged.
    """
    notes: Counter = Counter()
    writers = {name: _BufferedWriter(features, path) for name, (features, path, _) in views.items()}
    try:
        for batch in _sessions_batches(sessions_path):
            _add_views(batch, views, writers, notes)
            batch = None  # let go before the pages are given back (a very long conversation's row: 58 MiB)
        return {name: writer.finalize() for name, writer in writers.items()}, notes
    finally:
        for writer in writers.values():
            writer.writer.close()
        give_back_pages()
