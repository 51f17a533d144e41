"""Spark's regroup of a group shard (MNBVC's multi-turn files) over DataFrames, so that the shuffle moves Arrow
columns, not pickled Python rows. The same partitions, in the same order, as the embedded engine
(``convhub.engine.regroup``), so a Spark build writes the local build's rows in the local build's order:

1. ``session.range`` of the file indices, one Spark partition per file; ``mapInArrow`` runs the builder's
   ``keyed_batches`` on each file and adds ``partition`` (``keyed_columns.with_partition``). The rows a source
   rejects under ``--on-bad-record skip`` travel as rows of the reserved partition ``shard.partitions`` (their
   quarantine lines in ``payload``); a SourceError under ``raise`` reaches the driver as itself
   (``spark._reraisable``).
2. ``repartition`` moves partition ``p`` to Spark partition ``p`` exactly (``partition_slots``: a value whose
   Spark hash falls there) and ``sortWithinPartitions`` sorts it by ``keyed_columns.SORT_COLUMNS``: Spark's
   sort, which spills to disk, compares binary as unsigned bytes, as Arrow does.
3. ``mapInArrow`` over the sorted partitions: each task cuts its rows into tables of whole conversations
   (``keyed_columns.whole_conversations``), gives them to the builder as a ``SortedPartition`` and writes its
   records with the local engine's writer (``spark._write_records``). What it wrote comes back as one row
   (its partition, its ``TaskResult`` as JSON); the driver orders the results by partition.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import warnings
from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa

from convhub.engine import keyed_columns
from convhub.engine.builder import fewer_collections
from convhub.engine.input_shards import GroupShard, SortedPartition
from convhub.engine.spark import TaskResult, _collect, _reraisable, _Scratch, _write_records
from convhub.errors import SourceError
from convhub.storage.folders import text_of

#: What a task of step 3 returns: the partition it wrote and its ``TaskResult`` as JSON.
RESULT_SCHEMA = pa.schema(
    [pa.field("partition", pa.int32(), nullable=False), pa.field("result", pa.string())]
)


def spark_schema(schema: pa.Schema):
    """The Spark schema of an Arrow schema (binary columns are BinaryType, int8 ByteType, and so on)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


def regroup(
    session,
    builder,
    split: str,
    shard: GroupShard,
    work,
    max_shard_size: int,
    first: int,
    verbose: bool = False,
):
    """The ``TaskResult`` of each partition of ``shard`` in partition order (files ``split-{first + p}``), then
    one with the quarantine lines of its rejected rows (see the module docstring). Unless ``verbose``,
    PySpark's ``FutureWarning`` s (``mapInArrow`` checks the pandas version) are not printed."""
    with warnings.catch_warnings():
        if not verbose:
            warnings.filterwarnings("ignore", category=FutureWarning, module=r"pyspark\.")
        return _regroup(session, builder, split, shard, work, max_shard_size, first)


def _regroup(session, builder, split: str, shard: GroupShard, work, max_shard_size: int, first: int):
    count = shard.partitions
    keyed = keyed_columns.keyed_schema(builder.KEYED_VALUE_FIELDS)
    partitioned = pa.schema([keyed_columns.PARTITION_FIELD, *keyed])
    files = session.range(0, len(shard.files), 1, len(shard.files))
    rows = files.mapInArrow(_KeyedFiles(builder, shard, partitioned), spark_schema(partitioned))
    # one partition per Spark partition: the sort needs no ``partition`` (its prefix is then ``group``'s bytes)
    moved = rows.repartition(
        count + 1, _slot_column(partition_slots(session, count + 1))
    ).sortWithinPartitions(*keyed_columns.SORT_COLUMNS)
    task = _PartitionTask(builder, split, shard, work, max_shard_size, first, keyed)
    written = _collect(moved.mapInArrow(task, spark_schema(RESULT_SCHEMA)))
    return [TaskResult(**json.loads(row.result)) for row in sorted(written, key=lambda row: row.partition)]


def partition_slots(session, count: int) -> list[int]:
    """For each Spark partition ``p`` of ``count``, an int whose Spark hash puts a row in ``p``: what
    ``DataFrame.repartition(count, column)`` computes (``pmod(hash(column), count)``), asked of Spark itself for
    the ints from 0 on (one task, no shuffle); the first of each ``p`` is taken."""
    from pyspark.sql import functions

    candidates = 16 * count
    while True:
        values = functions.col("id").cast("int")
        slots = (
            session.range(0, candidates, 1, 1)
            .select(functions.pmod(functions.hash(values), functions.lit(count)).alias("slot"))
            .toArrow()
            .column("slot")
            .to_numpy()
        )
        found, first = np.unique(slots, return_index=True)
        if len(found) == count:
            return first.tolist()
        candidates *= 4


def _slot_column(slots: list[int]):
    """The slot of each row's ``partition`` (``partition_slots``), as a Spark column."""
    from pyspark.sql import functions

    table = functions.array(*[functions.lit(slot) for slot in slots])
    return functions.element_at(table, functions.col("partition") + 1)


class _KeyedFiles:
    """Step 1: each file of the batches' ``id`` s as keyed batches with their ``partition``; then its rejected
    rows' quarantine lines, as rows of the reserved partition ``shard.partitions``."""

    def __init__(self, builder, shard: GroupShard, schema: pa.Schema):
        self.builder, self.shard, self.schema = builder, shard, schema

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for file_index in batch.column("id").to_pylist():
                yield from self._file(file_index)

    def _file(self, file_index: int) -> Iterator[pa.RecordBatch]:
        rejected = TaskResult()
        with _Scratch(self.builder) as scratch, fewer_collections():
            try:
                for batch in self.builder.keyed_batches(self.shard, file_index):
                    if batch.num_rows:
                        yield keyed_columns.with_partition(batch, self.shard.partitions)
            except SourceError as error:
                raise _reraisable(error) from None
            scratch.collect(rejected)
        if rejected.quarantine:
            yield self._rejected(rejected.quarantine, file_index)

    def _rejected(self, lines: list[str], file_index: int) -> pa.RecordBatch:
        """Quarantine lines as rows of the reserved partition: the line in ``payload``, its file and number in
        ``file_index`` and ``line``, the other key columns zero and the value columns null."""
        rows = len(lines)
        columns = {name: [None] * rows for name in self.schema.names}
        columns.update(
            partition=[self.shard.partitions] * rows,
            group=[b""] * rows,
            rank=[0] * rows,
            number=[0] * rows,
            text=[b""] * rows,
            file_index=[file_index] * rows,
            line=list(range(rows)),
            size=[0] * rows,
            payload=[line.encode("utf-8") for line in lines],
        )
        return pa.RecordBatch.from_pydict(columns, schema=self.schema)


class _PartitionTask:
    """Step 3: the Spark partition ``p`` holds partition ``p``'s rows, sorted: records built and written, one
    result row. The last one holds the rejected rows, whose quarantine lines it returns."""

    def __init__(self, builder, split: str, shard: GroupShard, work, max_shard_size: int, first: int, keyed):
        self.builder, self.split, self.shard = builder, split, shard
        self.work, self.max_shard_size, self.first, self.keyed = work, max_shard_size, first, keyed

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        partition = TaskContext.get().partitionId()
        rows = (self._keyed(batch, partition) for batch in batches)
        if partition == self.shard.partitions:
            lines = [line.decode("utf-8") for batch in rows for line in batch.column("payload").to_pylist()]
            result = TaskResult(quarantine=lines)
        else:
            prefix = text_of(self.work / f"{self.split}-{self.first + partition:05d}")
            tables = keyed_columns.whole_conversations(rows)
            with fewer_collections():
                result = _write_records(
                    self.builder, self.split, SortedPartition(self.shard, tables), prefix, self.max_shard_size
                )
        text = json.dumps(dataclasses.asdict(result), ensure_ascii=False)
        yield pa.RecordBatch.from_pydict({"partition": [partition], "result": [text]}, schema=RESULT_SCHEMA)

    def _keyed(self, batch: pa.RecordBatch, partition: int) -> pa.RecordBatch:
        """A batch of Spark's as the keyed schema the local engine sorts (Spark's types may be wider and its
        fields nullable), without ``partition``, which must be this task's."""
        others = np.flatnonzero(batch.column("partition").to_numpy() != partition)
        if len(others):
            other = batch.column("partition")[int(others[0])].as_py()
            raise RuntimeError(f"Spark partition {partition} holds rows of partition {other}")
        columns = [
            column if column.type == field.type else column.cast(field.type)
            for column, field in zip(itertools.islice(batch.columns, 1, None), self.keyed, strict=True)
        ]
        return pa.RecordBatch.from_arrays(columns, schema=self.keyed)
