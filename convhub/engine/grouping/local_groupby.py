"""The embedded engine's group-by (the contract it keeps: ``grouping.group_by_key``): the rows of one conversation,
wherever they lie in the input, brought together on one machine in two passes: ``write_partitions`` keys every
row and sorts the keys, ``read_partition`` reads a slice of a partition back in order.

Only keys pass through DuckDB: the payloads stay where their writer put them, so the sort's memory follows the
number of rows, not their length (sorting the payloads too, DuckDB ran out of its memory limit:
``benchmarks/engine_bakeoff.py``; the figures, docs/performance.md, "Which engine regroups MNBVC"). The order
within a conversation (MNBVC: a 多轮序号 may be an integer past 64 bits, or a text with a lone surrogate) is
Python's, per conversation, as Spark's is.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import tempfile
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from itertools import pairwise
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from convhub.engine.grouping.group_by_key import KeyedRow, SortKey, keyed_by_partition, partition_count
from convhub.engine.runners.child_processes import run_forked
from convhub.engine.runners.cuts import share_files
from convhub.engine.runners.input_shards import GroupShard, Partition
from convhub.errors import SourceError
from convhub.storage.abandoned import marked_dir, release, sweep_abandoned

#: A partition is read as ``partition_count(its bytes, SLICE_BYTES)`` shards, so that shards are of similar sizes.
SLICE_BYTES = 16 * 2**20
#: Keys a writer holds before writing them to its keys file.
KEY_BATCH_ROWS = 65_536
#: Rows of a row group of the sorted keys: a slice reads the groups its partition overlaps, so small ones (a
#: partition of MNBVC's full-scale benchmark input holds a few of them).
SORTED_ROW_GROUP = 16_384
#: DuckDB's memory for sorting the keys; beyond it, it spills beside the sorted file.
SORT_MEMORY = "256MB"

#: One row's key as the writers store it. ``conversation`` is ``group_bytes(group)``, what DuckDB sorts; ``key``
#: the ``marshal`` of the sort key, which Python reads back; ``writer``, ``offset`` and ``length`` say where the
#: payload is.
KEY_SCHEMA = pa.schema(
    [
        ("partition", pa.int32()),
        ("conversation", pa.binary()),
        ("key", pa.binary()),
        ("writer", pa.int32()),
        ("offset", pa.int64()),
        ("length", pa.int64()),
    ]
)


def group_bytes(group: tuple[str, ...]) -> bytes:
    """The group as bytes that sort as Python sorts the tuples of texts: each text's UTF-8 (a lone surrogate
    passes as its own three bytes, so code point order is byte order), its zero characters written ``00 01``,
    then ``00 00`` to end it. A text that is a prefix of another then sorts first, and no two groups give the
    same bytes (the tuple encoding of ordered key-value stores)."""
    text = "\x00\x00".join([part.replace("\x00", "\x00\x01") for part in group]) + "\x00\x00"
    return text.encode("utf-8", "surrogatepass")


# -- pass 1: the writers -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Partitioned:
    """What ``write_partitions`` wrote: the keys sorted by the engine, each writer's payloads, and the bytes of
    source rows in each partition (so that a partition's slices follow the input's size)."""

    keys: str
    rows: tuple[str, ...]
    source_bytes: tuple[int, ...]


def write_partitions(
    keyed_rows: Callable[[int], Iterable[KeyedRow]],
    sizes: list[int],
    folder: str,
    count: int,
    processes: int = 1,
) -> Partitioned:
    """The rows of every file (``keyed_rows(file index)``; ``sizes`` their bytes) keyed into ``count`` partitions,
    in ``folder``.

    The files are shared out among ``processes`` writer processes (by ``sizes``), each forked (``run_forked``),
    as is DuckDB's sort of their keys, one writer included: what reading, keying and sorting leave in the C heap
    and in Python's goes back with the process, so pass 2 starts from the build's own footprint (docs/performance.md,
    "one conversation of many tiny turns"). A file's first SourceError stops its writer, and nothing is sorted; the
    error raised is the one a single pass over the files in order would raise first, whichever process met it.
    """
    # no file: one writer of nothing, whose keys DuckDB reads
    shares = share_files(sizes, processes) or [[]]
    tasks = [
        partial(_write_keyed, writer, share, folder, count, keyed_rows) for writer, share in enumerate(shares)
    ]
    results = list(run_forked(tasks))
    failures = [result for result in results if isinstance(result, _Failure)]
    if failures:
        # each writer reads its share in file order (``share_files``) and stops at its first error
        raise min(failures, key=lambda failure: failure.file_index).error
    keys = [_writer_path(folder, writer, "keys.parquet") for writer in range(len(tasks))]
    target = os.path.join(folder, "keys.parquet")
    [sorted_keys] = run_forked([partial(sort_keys, keys, target, threads=len(tasks))])
    for path in keys:
        os.remove(path)
    rows = tuple(_writer_path(folder, writer, "rows") for writer in range(len(tasks)))
    return Partitioned(sorted_keys, rows, tuple(map(sum, zip(*results, strict=True))))


def _writer_path(folder: str, writer: int, suffix: str) -> str:
    return os.path.join(folder, f"w{writer:03d}.{suffix}")


@dataclass
class _Failure:
    """A SourceError a writer raised in file ``file_index`` (which one is raised: ``write_partitions``)."""

    error: SourceError
    file_index: int


def _write_keyed(
    writer: int, share: list[int], folder: str, count: int, keyed_rows: Callable[[int], Iterable[KeyedRow]]
) -> _Failure | list[int]:
    """One writer: the payloads of the files in ``share`` into its ``.rows`` file, their keys into its keys file;
    returns the bytes of source rows each partition got."""
    source_bytes = [0] * count
    keys: list[tuple] = []
    offset = 0
    with (
        open(_writer_path(folder, writer, "rows"), "wb", buffering=1 << 20) as rows,
        pq.ParquetWriter(_writer_path(folder, writer, "keys.parquet"), KEY_SCHEMA) as keys_file,
    ):
        for file_index in share:
            try:
                for partition, sort_key, payload, size in keyed_by_partition(keyed_rows(file_index), count):
                    keys.append(
                        (partition, group_bytes(sort_key[0]), marshal.dumps(sort_key), offset, len(payload))
                    )
                    rows.write(payload)
                    offset += len(payload)
                    source_bytes[partition] += size
                    if len(keys) == KEY_BATCH_ROWS:
                        keys_file.write_batch(_key_batch(writer, keys))
                        keys.clear()
            except SourceError as error:
                return _Failure(error, file_index)
        keys_file.write_batch(_key_batch(writer, keys))
    return source_bytes


def _key_batch(writer: int, keys: list[tuple]) -> pa.RecordBatch:
    partition, conversation, key, offset, length = zip(*keys, strict=True) if keys else ((),) * 5
    columns = [partition, conversation, key, [writer] * len(keys), offset, length]
    return pa.RecordBatch.from_arrays(columns, schema=KEY_SCHEMA)  # (each column made of its field's type)


def sort_keys(paths: list[str], target: str, threads: int) -> str:
    """The keys in ``paths`` (Parquet files of ``KEY_SCHEMA``) sorted by (partition, conversation) into
    ``target``, by DuckDB: out of core, in ``SORT_MEMORY``, spilling beside ``target``."""
    import duckdb  # here, not above: every build imports this module, few sources regroup

    config = {"memory_limit": SORT_MEMORY, "threads": threads, "temp_directory": f"{target}.spill"}
    listed = ", ".join(_sql_text(path) for path in paths)
    query = f"SELECT * FROM read_parquet([{listed}]) ORDER BY partition, conversation"
    with duckdb.connect(config=config) as connection:
        connection.execute("SET enable_progress_bar = false")
        connection.execute(
            f"COPY ({query}) TO {_sql_text(target)} (FORMAT parquet, ROW_GROUP_SIZE {SORTED_ROW_GROUP})"
        )
    return target


def _sql_text(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


# -- the shards of a group shard, and pass 2 -------------------------------------------------------------


def partition_shards(
    builder, group: GroupShard, processes: int = 1, slice_bytes: int = SLICE_BYTES
) -> list[Partition]:
    """A ``group_shard`` partitioned (``write_partitions`` of ``builder.keyed_rows``) into a temporary folder that
    goes with ``builder``, as one shard per slice of each partition: what ``read_partition`` reads."""
    marked = partitions_folder()
    weakref.finalize(builder, release, marked)  # (also at exit, where the builder is still alive)
    try:
        partitioned = write_partitions(
            partial(builder.keyed_rows, group), group.sizes, str(marked), group.partitions, processes
        )
    except BaseException:
        release(marked)
        raise
    return [
        Partition(group, partitioned, partition, (number, slices))
        for partition, source_bytes in enumerate(partitioned.source_bytes)
        for slices in [partition_count(source_bytes, slice_bytes)]
        for number in range(slices)
    ]


#: The name of a temporary partitions folder begins so (``partitions_folder``).
PARTITIONS_PREFIX = "convhub-partitions-"


def partitions_folder() -> Path:
    """A new partitions folder in TMPDIR (``CONVHUB_TMPDIR`` where set), marked as this process's
    (``storage.abandoned``), after those that killed builds left there are removed: a build killed with SIGKILL
    runs no cleanup, and its partitions hold a copy of the whole input."""
    parent = Path(os.environ.get("CONVHUB_TMPDIR") or tempfile.gettempdir())
    sweep_abandoned(parent, PARTITIONS_PREFIX)
    return marked_dir(parent, PARTITIONS_PREFIX, mode=0o700)  # as tempfile makes it: it holds user data


def remove_partitions(shards: Iterable[Any]) -> None:
    """Remove the partitions folders of these shards now (``convhub check`` reads the partitions once), not when
    their builder is collected."""
    for partitioned in {shard.partitioned for shard in shards if isinstance(shard, Partition)}:
        release(Path(partitioned.keys).parent)


def read_partition(shard: Partition) -> Iterator[tuple[SortKey, bytes]]:
    """(sort key, payload) of the rows of a partition shard's conversations, sorted (``partition_keys``), each
    payload read where its writer put it."""
    partitioned = shard.partitioned
    with contextlib.ExitStack() as stack:
        descriptors = [stack.enter_context(open(path, "rb")).fileno() for path in partitioned.rows]
        for group, rows in partition_keys(partitioned, shard.partition, shard.part):
            # each row's order let go once read: a long conversation's keys do not all stay beside its rows
            for order, writer, offset, length in _each_let_go(rows):
                yield (group, order), os.pread(descriptors[writer], length, offset)


def _each_let_go(items: list) -> Iterator[Any]:
    """``items`` in order, each dropped from the list as it is given (popped, not iterated), so that what is made
    of the first ones does not stay beside all the others."""
    items.reverse()
    while items:
        yield items.pop()


def partition_keys(
    partitioned: Partitioned, partition: int, part: tuple[int, int] = (0, 1)
) -> Iterator[tuple[tuple[str, ...], list[tuple[tuple, int, int, int]]]]:
    """The j-th of n equal runs (``part``) of a partition's conversations, one at a time: its group, and its rows
    as (order, writer, offset, length), sorted.

    The sorted keys' row groups outside the partition are skipped by their statistics. Keys become Python values a
    run of conversations at a time (``_runs_of_conversations``): Arrow calls made per conversation were a large
    share of a build of short conversations. A conversation's group is read once, not once per row (a long
    conversation would hold a copy of it per row). One thread: Arrow's pool threads keep memory in each worker for
    nothing a slice's few row groups need (the figures: docs/performance.md, "one conversation of many tiny turns"
    and "A partition's keys, a run of conversations at a time")."""
    table = pq.read_table(partitioned.keys, filters=[("partition", "=", partition)], use_threads=False)
    starts = _conversation_starts(table)
    number, parts = part
    first, stop = len(starts) * number // parts, len(starts) * (number + 1) // parts
    bounds = [*starts[first:stop], starts[stop] if stop < len(starts) else table.num_rows]
    for run in _runs_of_conversations(bounds, KEYS_AT_ONCE):
        begin = run[0]
        rows = table.slice(begin, run[-1] - begin)
        keys, *located = (rows.column(name).to_pylist() for name in ("key", "writer", "offset", "length"))
        conversations = [
            (marshal.loads(keys[start - begin])[0], _sorted_rows(keys, located, start - begin, end - begin))
            for start, end in pairwise(run)
        ]
        # let go before the rows are read: a long conversation's keys take more than its rows
        del rows, keys, located
        yield from _each_let_go(conversations)


def _sorted_rows(keys: list[bytes], located: list[list[int]], start: int, end: int) -> list[tuple]:
    """The rows ``start:end`` of a run of keys as (order, writer, offset, length), sorted."""
    orders = [marshal.loads(key)[1] for key in keys[start:end]]
    return sorted(zip(orders, *(column[start:end] for column in located), strict=True))


#: Rows of keys made Python values at once by ``partition_keys``.
KEYS_AT_ONCE = 4096


def _runs_of_conversations(bounds: list[int], rows: int) -> Iterator[list[int]]:
    """The conversations between consecutive ``bounds`` as runs of consecutive ones (each run its bounds) of at
    most ``rows`` rows, or of one conversation where it alone has more."""
    run = bounds[:1]
    for end in bounds[1:]:
        if len(run) > 1 and end - run[0] > rows:
            yield run
            run = run[-1:]
        run.append(end)
    if len(run) > 1:
        yield run


def _conversation_starts(table: pa.Table) -> list[int]:
    """The rows where a new conversation begins, in a table sorted by them (computed by Arrow, so that a slice
    turns only its own keys into Python values)."""
    if table.num_rows == 0:
        return []
    column = table.column("conversation")
    changed = pc.not_equal(column.slice(1), column.slice(0, table.num_rows - 1))
    return [0, *(index + 1 for index in pc.indices_nonzero(changed).to_pylist())]
