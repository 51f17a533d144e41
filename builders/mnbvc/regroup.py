"""Regroup 多轮对话 rows into conversations, with an embedded engine (DuckDB) sorting their keys.

MNBVC writes one row per question/answer pair; the rows of one conversation (same 来源 and ``会话``) may
be anywhere: apart in one file or in several of its ~500 MB shards. Two passes:

1. ``write_partitions`` reads every multi-turn file once and converts each row (``parse.convert_pair``, or
   its error) with Python, the part that is convhub's own. The files are shared out among ``processes``
   writers (one process each, balanced by size). A writer appends each converted row (``marshal``) to its
   own ``.rows`` file, and writes the row's key to a Parquet file: its partition (a stable hash of the
   conversation key, so all rows of a conversation land in one), 来源, how, key, its order within the
   conversation, and where its converted row is. DuckDB then sorts every writer's keys by (partition, 来源,
   how, key) into one Parquet file, out of core under a memory limit.
2. ``read_partition`` (one worker per partition or slice of one, ``num_proc`` in parallel) reads the keys of
   its partition from that file (its row groups are found by their statistics), sorts each conversation's
   few rows by their order, reads their converted rows (``os.pread``) and builds the record
   (``records_from_sorted``). A big partition is read as several slices (``slice_count``), each a run of its
   conversations, so the ``num_proc`` workers get similar amounts of work.

Only keys pass through the engine: the payloads stay where their writer put them, so the sort's memory follows
the number of rows, not their length (``benchmarks/engine_bakeoff.py``: sorting the payloads too, DuckDB ran
out of a 1 GB memory limit on 1,000 MiB of rows). Against the hand-made partition files this replaced, the
full-scale ``sessions`` build took 4-9% longer (78.0-81.8 s against 75.1 s), for the keys' encoding and the
sort (1.3 s for a million keys). 来源, how and key are sorted as UTF-8 bytes, whose order is
Python's order of the texts (a lone surrogate passes as its own three bytes); a conversation's order (a
多轮序号 may be an integer past 64 bits or a text with a lone surrogate) is Python's, per conversation.

Spark moves the same keyed rows itself (``keyed_rows`` gives each row's partition and sort key, and
``records_from_sorted`` is the step after the sort), so both engines give the conversations in one order:
partition, then key.
"""

from __future__ import annotations

import contextlib
import itertools
import marshal
import math
import multiprocessing
import os
import zlib
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import partial
from json.encoder import encode_basestring
from typing import Any, BinaryIO

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from convhub.errors import Notes, Reject, SourceError, raise_error
from convhub.jsonio import refuse_json_document
from convhub.mnbvc import files, multiturn, parse
from convhub.mnbvc.extension import Extension, parse_extension

PARTITION_BYTES = 64 * 2**20
#: A partition is read as ceil(its bytes / SLICE_BYTES) shards, so that shards are of similar sizes.
SLICE_BYTES = 16 * 2**20
#: Keys a writer holds before writing them to its keys file.
KEY_BATCH_ROWS = 65_536
#: Rows of a row group of the sorted keys: a slice reads the groups its partition overlaps, so small ones (a
#: partition of the full-scale input is about 40,000 rows).
SORTED_ROW_GROUP = 16_384
#: DuckDB's memory for sorting the keys; beyond it, it spills to the partition folder.
SORT_MEMORY = "256MB"

#: One row's key. 来源, how and key are UTF-8 (surrogates passed), so that their byte order is Python's order of
#: the texts; ``order`` is the ``marshal`` of (rank, value, text, file index, line), the order within the
#: conversation, which only Python sorts; ``writer``, ``offset`` and ``length`` say where the converted row is.
KEY_SCHEMA = pa.schema(
    [
        ("partition", pa.int32()),
        ("source", pa.binary()),
        ("how", pa.binary()),
        ("key", pa.binary()),
        ("order", pa.binary()),
        ("writer", pa.int32()),
        ("offset", pa.int64()),
        ("length", pa.int64()),
    ]
)
GROUP = ("source", "how", "key")


def partition_count(total_bytes: int, partition_bytes: int = PARTITION_BYTES) -> int:
    """Partitions of about ``partition_bytes`` of input each."""
    return max(1, math.ceil(total_bytes / partition_bytes))


def slice_count(partition_bytes: int, slice_bytes: int = SLICE_BYTES) -> int:
    return max(1, math.ceil(partition_bytes / slice_bytes))


@dataclass(frozen=True)
class Partitioned:
    """What ``write_partitions`` wrote: the keys sorted by the engine, each writer's converted rows, and the bytes
    of source rows in each partition (so that a partition's slices follow the input's size)."""

    keys: str
    rows: tuple[str, ...]
    source_bytes: tuple[int, ...]

    def paths(self) -> list[str]:
        return [self.keys, *self.rows]


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
    inputs: list[tuple[str, str]],
    folder: str,
    count: int,
    opener: Callable[[str], BinaryIO] | None = None,
    subsets: Iterable[str] | None = None,
    reject: Reject = raise_error,
    processes: int = 1,
    sizes: list[int] | None = None,
) -> Partitioned:
    """The rows of ``inputs`` ((name, path) pairs) converted and keyed into ``count`` partitions, in ``folder``.

    With ``processes`` > 1 the files are shared out among that many processes (by ``sizes``, default: the files'
    sizes on disk); ``opener`` and ``reject`` must then be picklable (module-level functions or partials of
    them). The pass reads and converts every multi-turn row (about 6 s per 100 MB on one core, so some 19 s of
    the scale-0.2 ``sessions`` build): with ``num_proc=2`` two writers halve it. DuckDB then sorts the keys.

    A row that is not JSON, not an object or not a Q/A row goes to ``reject`` here, before any output
    (a SourceError by default). When it raises, the error is the one a single pass over the files in
    order would raise first, whichever process met it.
    """
    opener = opener or files.open_local
    sizes = sizes if sizes is not None else [os.path.getsize(path) for _, path in inputs]
    shares = (
        share_files(sizes, processes) if len(inputs) > 1 and processes > 1 else [list(range(len(inputs)))]
    )
    tasks = [
        partial(_write_keyed, writer, [(index, *inputs[index]) for index in share], folder, count, opener)
        for writer, share in enumerate(shares)
    ]
    if len(tasks) == 1:
        results = [tasks[0](subsets, reject)]
    else:
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(len(tasks), mp_context=context) as pool:
            futures = [pool.submit(task, subsets, reject) for task in tasks]
            results = [future.result() for future in futures]
    failures = [result for result in results if isinstance(result, _Failure)]
    if failures:
        raise min(failures, key=lambda failure: failure.file_index).error
    keys = [_writer_path(folder, writer, "keys.parquet") for writer in range(len(tasks))]
    sorted_keys = sort_keys(keys, os.path.join(folder, "keys.parquet"), threads=len(tasks))
    for path in keys:
        os.remove(path)
    rows = tuple(_writer_path(folder, writer, "rows") for writer in range(len(tasks)))
    return Partitioned(sorted_keys, rows, tuple(map(sum, zip(*results, strict=True))))


def _writer_path(folder: str, writer: int, suffix: str) -> str:
    return os.path.join(folder, f"multiturn-w{writer:03d}.{suffix}")


def sort_keys(paths: list[str], target: str, threads: int = 1) -> str:
    """The keys in ``paths`` (Parquet files of ``KEY_SCHEMA``) sorted by (partition, 来源, how, key) into
    ``target``, by DuckDB: out of core, in ``SORT_MEMORY``, spilling beside ``target``."""
    config = {
        "memory_limit": SORT_MEMORY,
        "threads": max(1, threads),
        "temp_directory": f"{target}.spill",
    }
    listed = ", ".join(_sql_text(path) for path in paths)
    query = f"SELECT * FROM read_parquet([{listed}]) ORDER BY partition, source, how, key"
    with duckdb.connect(config=config) as connection:
        connection.execute("SET enable_progress_bar = false")
        connection.execute(
            f"COPY ({query}) TO {_sql_text(target)} (FORMAT parquet, ROW_GROUP_SIZE {SORTED_ROW_GROUP})"
        )
    return target


def _sql_text(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _write_keyed(
    writer: int,
    inputs: list[tuple[int, str, str]],
    folder: str,
    count: int,
    opener: Callable[[str], BinaryIO],
    subsets: Iterable[str] | None,
    reject: Reject,
) -> _Failure | list[int]:
    """One writer: the rows of ``inputs`` ((file index, name, path)) converted into its ``.rows`` file and
    keyed into its keys file; returns the bytes of source rows each partition got."""
    source_bytes = [0] * count
    keys: list[tuple] = []
    offset = 0
    with (
        open(_writer_path(folder, writer, "rows"), "wb", buffering=1 << 20) as rows,
        pq.ParquetWriter(_writer_path(folder, writer, "keys.parquet"), KEY_SCHEMA) as keys_file,
    ):
        for file_index, name, path in inputs:
            try:
                for target, sort_key, converted, size in _partitioned_rows(
                    file_index, name, path, count, opener, subsets, reject
                ):
                    keys.append(_key(target, sort_key, offset, len(converted)))
                    rows.write(converted)
                    offset += len(converted)
                    source_bytes[target] += size
                    if len(keys) == KEY_BATCH_ROWS:
                        keys_file.write_batch(_key_batch(writer, keys))
                        keys.clear()
            except SourceError as error:
                return _Failure(error, file_index)
        keys_file.write_batch(_key_batch(writer, keys))
    return source_bytes


def _key(partition: int, sort_key: tuple, offset: int, length: int) -> tuple:
    """A row's key as ``KEY_SCHEMA`` holds it, but its writer."""
    source, how, key, *order = sort_key
    return partition, _utf8(source), _utf8(how), _utf8(key), marshal.dumps(tuple(order)), offset, length


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _key_batch(writer: int, keys: list[tuple]) -> pa.RecordBatch:
    partition, source, how, key, order, offset, length = zip(*keys, strict=True) if keys else ((),) * 7
    columns = [partition, source, how, key, order, [writer] * len(keys), offset, length]
    arrays = [pa.array(values, field.type) for values, field in zip(columns, KEY_SCHEMA, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=KEY_SCHEMA)


@dataclass
class _Failure:
    """A SourceError a writer raised in file ``file_index``. A writer stops at its first error and reads
    its files in order, so the failure with the lowest file index is the error a serial pass meets first."""

    error: SourceError
    file_index: int


def keyed_rows(
    file_index: int,
    name: str,
    path: str,
    count: int,
    opener: Callable[[str], BinaryIO] | None = None,
    subsets: Iterable[str] | None = None,
    reject: Reject = raise_error,
) -> Iterator[tuple[int, tuple, bytes]]:
    """(partition, sort key, converted row) of each wanted Q/A row of one multi-turn file, for an engine
    that moves the rows itself (``convhub.spark``): the partition is the one ``write_partitions`` picks,
    the sort key the one ``read_partition`` sorts by, the converted row what ``records_from_sorted`` reads."""
    for target, sort_key, converted, _ in _partitioned_rows(
        file_index, name, path, count, opener or files.open_local, subsets, reject
    ):
        yield target, sort_key, converted


def _partitioned_rows(file_index: int, name: str, path: str, count: int, opener, subsets, reject: Reject):
    """(partition, sort key, converted row, bytes of the source line) of each wanted Q/A row of one file.

    The partition is a stable hash (crc32) of the conversation's (来源, how, key); the sort key is (来源, how,
    key, rank, number, text, file index, line): ``parse.sequence_number`` orders a conversation's rows."""
    lines = files.open_lines(partial(opener, path), name)
    notes, warnings = Notes(), _WarningLog()  # emptied for each row
    for line, raw in refuse_json_document(files.readable_lines(lines, reject), name, "MNBVC"):
        try:
            row = files.load_row(raw, name, line)
            if row is not None and "问" not in row and "答" not in row:
                problem = "missing (neither 问 nor 答: not a Q/A row)"
                raise SourceError(name, f"line {line}", "问", problem)
        except SourceError as error:
            reject(error, raw)
            continue
        if row is None:
            continue
        source = parse.source_name(row)
        if not parse.subset_wanted(subsets, parse.MULTITURN, source):
            continue
        extension = parse_extension(parse.row_metadata(row).get("扩展字段"))
        how, key = multiturn.conversation_key(row, extension, name, line)
        order = parse.sequence_number(extension)
        converted = _converted_row(name, line, raw, row, extension, order, notes, warnings)
        group = f"[{encode_basestring(source)}, {encode_basestring(how)}, {encode_basestring(key)}]".encode(
            "utf-8", "surrogatepass"
        )
        yield zlib.crc32(group) % count, (source, how, key, *order, file_index, line), converted, len(raw) + 1


class _WarningLog:
    """Stands for ``parse.Warnings`` in the partition pass: keeps a row's unreadable-扩展字段 problems,
    which ``records_from_sorted`` logs in its own order, under its own per-file limit."""

    def __init__(self):
        self.problems: list[str] = []

    def unreadable(self, number: int, where: str, extension: Extension) -> None:
        self.problems.append(extension.problems[0])


_CONVERTED, _REJECTED = 0, 1


def _converted_row(
    name: str,
    line: int,
    raw: bytes,
    row: dict,
    extension: Extension,
    order: tuple,
    notes: Notes,
    warnings: _WarningLog,
) -> bytes:
    """``marshal`` of the row converted (``parse.convert_pair``) with the normalizations it counted and
    the warnings it would log; or of the SourceError that rejects it and its raw line, for
    ``records_from_sorted`` to hand to ``reject`` where a row is rejected alone. Each row is converted once,
    in the partition pass's processes; marshal is the fastest exact round trip of these plain values."""
    notes.clear()
    warnings.problems.clear()
    try:
        pair = parse.read_pair(name, line, row, notes, warnings, extension)
    except SourceError as error:
        return marshal.dumps((_REJECTED, (error.path, error.record, error.field, error.problem), raw))
    converted = parse.convert_pair(pair, notes, order)
    fields = (converted.sequence, converted.question, converted.extra, converted.answer, converted.dated)
    return marshal.dumps(
        (_CONVERTED, *fields, converted.create_time, tuple(notes.items()), tuple(warnings.problems))
    )


def read_partition(
    partitioned: Partitioned,
    partition: int,
    names: list[str],
    notes: Notes,
    subsets: Iterable[str] | None = None,
    reject: Reject = raise_error,
    part: tuple[int, int] = (0, 1),
) -> Iterator[dict[str, Any]]:
    """The conversations of one partition, sorted by (来源, how, key); see the module docstring.

    ``part`` = (j, n): only the j-th of n equal runs of the partition's conversations.
    A bad row goes to ``reject`` alone; its conversation is built from its other rows.
    """
    conversations = partition_keys(partitioned, partition, part)
    with contextlib.ExitStack() as stack:
        descriptors = [stack.enter_context(open(path, "rb")).fileno() for path in partitioned.rows]
        rows = (
            (entry[:8], os.pread(descriptors[entry[8]], entry[10], entry[9]))
            for conversation in conversations
            for entry in conversation
        )
        yield from records_from_sorted(rows, names, notes, reject)


def partition_keys(
    partitioned: Partitioned, partition: int, part: tuple[int, int] = (0, 1)
) -> list[list[tuple]]:
    """The keys of the j-th of n equal runs (``part``) of a partition's conversations: per conversation, its rows
    as (来源, how, key, rank, value, text, file index, line, writer, offset, length), sorted.

    The sorted keys' row groups outside the partition are skipped by their statistics; only the run's keys
    become Python values. One thread: Arrow's pool threads kept some 25 MB more in each worker, for nothing a
    slice's few row groups need."""
    table = pq.read_table(partitioned.keys, filters=[("partition", "=", partition)], use_threads=False)
    starts = _conversation_starts(table)
    number, parts = part
    first, stop = len(starts) * number // parts, len(starts) * (number + 1) // parts
    if first >= stop:
        return []
    end = starts[stop] if stop < len(starts) else table.num_rows
    run = table.slice(starts[first], end - starts[first])
    columns = [run.column(name).to_pylist() for name in (*GROUP, "order", "writer", "offset", "length")]
    conversations: list[list[tuple]] = []
    group = None
    for source, how, key, order, writer, offset, length in zip(*columns, strict=True):
        if (source, how, key) != group:
            group = source, how, key
            texts = tuple(value.decode("utf-8", "surrogatepass") for value in group)
            conversations.append([])
        conversations[-1].append((*texts, *marshal.loads(order), writer, offset, length))
    for conversation in conversations:
        conversation.sort()
    return conversations


def _conversation_starts(table: pa.Table) -> list[int]:
    """The rows where a new (来源, how, key) begins, in a table sorted by them (computed by Arrow, so that a slice
    turns only its own keys into Python values)."""
    if table.num_rows == 0:
        return []
    changed = None
    for name in GROUP:
        column = table.column(name)
        step = pc.not_equal(column.slice(1), column.slice(0, table.num_rows - 1))
        changed = step if changed is None else pc.or_(changed, step)
    return [0, *(index + 1 for index in pc.indices_nonzero(changed).to_pylist())]


def records_from_sorted(
    rows: Iterable[tuple[tuple, bytes]], names: list[str], notes: Notes, reject: Reject = raise_error
) -> Iterator[dict[str, Any]]:
    """Canonical records from (sort key, converted row) pairs sorted by key: one conversation per run of
    equal (来源, how, key). The pure step that turns a conversation's rows into its record, whichever engine
    brought them together."""
    warnings = {name: parse.Warnings(name) for name in names}
    counted = Notes()  # one conversation's normalizations, emptied for each
    for (source, how, key), run in itertools.groupby(rows, key=lambda row: row[0][:3]):
        pairs = []
        counted.clear()
        for (*_, rank, value, text, file_index, line), payload in run:
            row = marshal.loads(payload)
            if row[0] == _REJECTED:
                reject(SourceError(*row[1]), row[2])
                continue
            _, sequence, question, extra, answer, dated, create_time, row_notes, problems = row
            name = names[file_index]
            for kind, count in row_notes:
                counted[kind] += count
            for problem in problems:
                warnings[name].unreadable_problem(line, "元数据.扩展字段", problem)
            order = (rank, value, text)
            pairs.append(
                parse.ConvertedPair(name, order, sequence, question, extra, answer, dated, create_time)
            )
        if pairs:
            conversation_id = multiturn.group_id(source, how, key)
            record = multiturn.multiturn_record(pairs, source, how, key, conversation_id, counted)
            notes.update(counted)
            yield record
