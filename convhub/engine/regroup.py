"""The embedded engine's group-by: the rows of one conversation, wherever they lie in the input, brought together
on one machine, as Arrow columns. Spark's shuffle does the same on a cluster (``convhub.engine.spark``); both give
the same partitions, sorted the same way, so the two builds write the same rows in the same order.

A source with such rows (MNBVC's 多轮对话) returns a ``group_shard`` and says two things
(``ConversationBuilder.keyed_batches`` and ``grouped_tables``): each file's rows as keyed batches
(``convhub.engine.keyed_columns``: the texts that name a row's conversation, its place in it, and the row converted,
on columns where the source can, else as a payload), and how a table of whole conversations in order becomes
``sessions`` rows. Two passes:

1. ``write_partitions``: the files are shared out among ``processes`` writers (one process each, balanced by
   size). A writer gives each row its partition (``partition_of``, a stable hash of the group, once per distinct
   group of a batch) and appends it to that partition's Arrow IPC file of its own: columns, no Python per row.
2. ``read_partition`` (one shard per partition, ``num_proc`` in parallel) reads a partition's files from every
   writer, sorts the rows by conversation and place (Arrow's sort of the key columns) and gives them as tables of
   whole conversations.

A partition holds about ``PARTITION_BYTES`` of source rows, so a worker holds one partition's columns at a time.
The order of a conversation's rows is Python's: a row whose order columns cannot say it (a 多轮序号 past 64 bits)
carries its exact key, and its conversation is sorted again by the source (``keyed_columns.payload_rows``).
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from convhub.engine import keyed_columns
from convhub.engine.input_shards import GroupShard, Partition
from convhub.errors import SourceError

#: A partition holds about this many bytes of source rows.
PARTITION_BYTES = 64 * 2**20
#: A plain file of a row format bigger than this is read as line-aligned byte ranges, one shard each.
RANGE_BYTES = 16 * 2**20


def partition_count(total_bytes: int, partition_bytes: int = PARTITION_BYTES) -> int:
    """Partitions of about ``partition_bytes`` of input each."""
    return max(1, -(-total_bytes // partition_bytes))


# -- pass 1: the writers -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Partitioned:
    """What ``write_partitions`` wrote: each partition's Arrow IPC files (one per writer that had rows of it),
    and the bytes of source rows in each partition."""

    files: tuple[tuple[str, ...], ...]
    source_bytes: tuple[int, ...]

    def paths(self) -> list[str]:
        return [path for files in self.files for path in files]

    def remove(self) -> None:
        """Delete the files now (``convhub check`` reads the partitions once; a build's folder goes with it)."""
        for path in self.paths():
            if os.path.exists(path):
                os.remove(path)


def share_files(sizes: list[int], processes: int) -> list[list[int]]:
    """Indices of the files each of ``processes`` writers takes: biggest first to the least loaded.

    Each writer's list is in file order; writers without a file are left out.
    """
    loads = [0] * max(1, processes)
    shares: list[list[int]] = [[] for _ in loads]
    for index in sorted(range(len(sizes)), key=lambda index: (-sizes[index], index)):
        writer = loads.index(min(loads))
        loads[writer] += sizes[index]
        shares[writer].append(index)
    return [sorted(share) for share in shares if share]


def write_partitions(
    keyed_batches: Callable[[int], Iterable[pa.RecordBatch]],
    sizes: list[int],
    folder: str,
    count: int,
    processes: int = 1,
) -> Partitioned:
    """The keyed batches of every file (``keyed_batches(file index)``; ``sizes`` their bytes) moved into ``count``
    partitions, in ``folder``.

    The files are shared out among ``processes`` writers (by ``sizes``), each a forked process, one writer
    included: what a writer's reading and converting held (DuckDB keeps the memory its queries used) goes back to
    the system when it ends, before the partitions are read. A file's first SourceError stops its writer; when one
    is raised, it is the one a single pass over the files in order would raise first, whichever process met it.
    """
    shares = share_files(sizes, processes) if len(sizes) > 1 and processes > 1 else [list(range(len(sizes)))]
    tasks = [
        partial(_write_keyed, writer, share, folder, count, keyed_batches)
        for writer, share in enumerate(shares)
    ]
    results = run_forked(tasks)
    failures = [result for result in results if isinstance(result, _Failure)]
    if failures:
        raise min(failures, key=lambda failure: failure.file_index).error
    files = tuple(
        tuple(
            path
            for path in (_partition_path(folder, writer, partition) for writer in range(len(tasks)))
            if os.path.exists(path)
        )
        for partition in range(count)
    )
    return Partitioned(files, tuple(map(sum, zip(*results, strict=True))))


def run_forked(tasks: list[Callable[[], Any]]) -> list[Any]:
    """Each task's result, each task run in a process of its own forked from this one, all at once: nothing is
    pickled on the way in (a task may be a closure), its result is on the way back. An exception a task raised
    is raised here (the first task's first); a process that died without a result is a RuntimeError."""
    context = multiprocessing.get_context("fork")
    started = []
    try:
        for task in tasks:
            receiver, sender = context.Pipe(duplex=False)
            process = context.Process(target=_send_result, args=(task, sender), daemon=True)
            process.start()
            sender.close()
            started.append((process, receiver))
        outcomes = []
        for process, receiver in started:
            try:
                outcomes.append(receiver.recv())
            except EOFError:
                outcomes.append(
                    (False, RuntimeError(f"a writer process ended with exit code {process.exitcode}"))
                )
            process.join()
    finally:
        for process, _ in started:
            if process.is_alive():
                process.terminate()
                process.join()
    for succeeded, value in outcomes:
        if not succeeded:
            raise value
    return [value for _, value in outcomes]


def _send_result(task: Callable[[], Any], sender) -> None:
    """In a forked writer: ``task()`` sent back as (True, result), or (False, the exception it raised)."""
    try:
        outcome = (True, task())
    except BaseException as error:
        outcome = (False, error)
    try:
        sender.send(outcome)
    except Exception as error:  # a result or exception that cannot be pickled
        sender.send((False, RuntimeError(f"a writer's result could not be sent back: {error!r}")))
    finally:
        sender.close()


def _partition_path(folder: str, writer: int, partition: int) -> str:
    return os.path.join(folder, f"w{writer:03d}-p{partition:05d}.arrow")


@dataclass
class _Failure:
    """A SourceError a writer raised in file ``file_index``. A writer stops at its first error and reads its
    files in order, so the failure with the lowest file index is the error a serial pass meets first."""

    error: SourceError
    file_index: int


def _write_keyed(
    writer: int,
    share: list[int],
    folder: str,
    count: int,
    keyed_batches: Callable[[int], Iterable[pa.RecordBatch]],
) -> _Failure | list[int]:
    """One writer: each row of the files in ``share`` appended to its partition's file; returns the bytes of
    source rows each partition got."""
    source_bytes = [0] * count
    streams: dict[int, pa.ipc.RecordBatchStreamWriter] = {}
    try:
        for file_index in share:
            try:
                for batch in keyed_batches(file_index):
                    _append(keyed_columns.with_partition(batch, count), streams, source_bytes, folder, writer)
            except SourceError as error:
                return _Failure(error, file_index)
    finally:
        for stream in streams.values():
            stream.close()
    return source_bytes


def _append(batch: pa.RecordBatch, streams: dict, source_bytes: list[int], folder: str, writer: int) -> None:
    """The rows of ``batch`` (its ``partition`` column first) appended to their partitions' files, a run of rows
    of one partition at a time."""
    if batch.num_rows == 0:
        return
    partitions = batch.column(0).to_numpy()
    order = np.argsort(partitions, kind="stable")
    ordered = batch.take(pa.array(order)).drop_columns(["partition"])
    sorted_partitions = partitions[order]
    bounds = np.flatnonzero(np.diff(sorted_partitions)) + 1
    sizes = ordered.column("size")
    for begin, end in zip([0, *bounds.tolist()], [*bounds.tolist(), batch.num_rows], strict=True):
        partition = int(sorted_partitions[begin])
        run = ordered.slice(begin, end - begin)
        stream = streams.get(partition)
        if stream is None:
            stream = pa.ipc.new_stream(_partition_path(folder, writer, partition), run.schema)
            streams[partition] = stream
        stream.write_batch(run)
        source_bytes[partition] += pc.sum(sizes.slice(begin, end - begin)).as_py() or 0


# -- the shards of a group shard, and pass 2 -------------------------------------------------------------


def partition_shards(builder, group: GroupShard, processes: int = 1) -> list[Partition]:
    """A ``group_shard`` partitioned (``builder.keyed_batches``, in ``processes`` writers, shared out by the
    group's ``sizes``) into a temporary folder that goes with ``builder``, as one shard per partition: what
    ``read_partition`` reads."""
    folder = tempfile.mkdtemp(prefix="convhub-partitions-", dir=os.environ.get("CONVHUB_TMPDIR"))
    weakref.finalize(builder, shutil.rmtree, folder, True)
    try:
        partitioned = write_partitions(
            partial(builder.keyed_batches, group), group.sizes, folder, group.partitions, processes
        )
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return [Partition(group, partitioned, partition) for partition in range(len(partitioned.source_bytes))]


def remove_partitions(shards: Iterable[Any]) -> None:
    """Delete the partition files of these shards (each ``Partitioned`` once)."""
    for partitioned in {shard.partitioned for shard in shards if isinstance(shard, Partition)}:
        partitioned.remove()


def read_partition(shard: Partition, rows: int = keyed_columns.TABLE_ROWS) -> Iterator[pa.Table]:
    """The rows of a partition sorted by conversation and place (``keyed_columns.sort_rows``), as tables of whole
    conversations of about ``rows`` rows (``keyed_columns.whole_conversations``)."""
    tables = [pa.ipc.open_stream(path).read_all() for path in shard.partitioned.files[shard.partition]]
    if not tables:
        return
    table = keyed_columns.sort_rows(pa.concat_tables(tables))
    del tables
    yield from keyed_columns.whole_conversations(table.to_batches(max_chunksize=rows), rows)
