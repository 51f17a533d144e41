"""Regroup 多轮对话 rows into conversations with memory that does not grow with the corpus.

MNBVC writes one row per question/answer pair; the rows of one conversation (same 来源 and ``会话``) may
be anywhere: apart in one file or in several of its ~500 MB shards. Two passes:

1. ``write_partitions`` reads every multi-turn file once and appends each row to one of K partitions
   chosen by a stable hash of the conversation key, so all rows of a conversation land in the same
   partition. K is chosen from the input size so that a partition holds about ``PARTITION_BYTES`` of
   rows. The files are shared out among ``processes`` writers (one process each, balanced by size); a
   writer keeps, per partition, a *piece*: each row already converted (``.rows``: ``marshal`` of what
   its turns need, see ``parse.convert_pair``, or of its error) and one key line per row (``.keys``:
   来源, key, ``多轮序号``, file index, line, and where its converted row is). Each row is read and
   converted once, here, in ``processes`` processes.
2. ``read_partition`` (one worker per partition or slice of one, ``num_proc`` in parallel) reads only
   the key lines of its partition's pieces, sorts them by (来源, key, 多轮序号, file, line), and reads
   the converted rows of one conversation at a time, gives them their turn ids and builds the record
   (``records_from_sorted``). Its memory is about 150 bytes per row of that partition, whatever the rows'
   length. A big partition is read as several slices (``slice_count``): each slice
   sorts the whole index and converts only its share of the conversations, so ``num_proc`` workers,
   which take contiguous runs of shards, get similar amounts of work, and the conversations come out in
   the same order whatever the slicing.

Partitions are plain files in a temporary folder (``CONVHUB_TMPDIR``, else the system's temp folder)
that the builder deletes when it is garbage collected; they take about the uncompressed input's size.

Spark moves the same keyed rows itself (``keyed_rows`` gives each row's partition and sort key, and
``records_from_sorted`` is the step after the sort), so both engines give the conversations in one order:
partition, then key. The keys are sorted by Python's tuple order (a 多轮序号 may be an integer past 64 bits,
a text may hold a lone surrogate), which is why they are not handed to an SQL engine here; see the report of
``benchmarks/engine_bakeoff.py`` in the README for what one would buy on the regrouping step alone.
"""

from __future__ import annotations

import contextlib
import itertools
import json
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

import orjson
from convhub.errors import Notes, Reject, SourceError, raise_error
from convhub.jsonio import refuse_json_document
from convhub.mnbvc import files, multiturn, parse
from convhub.mnbvc.extension import Extension, parse_extension

PARTITION_BYTES = 64 * 2**20
MAX_PARTITIONS = 512  # open files at once while partitioning
#: A partition is read as ceil(its bytes / SLICE_BYTES) shards, so that shards are of similar sizes.
SLICE_BYTES = 16 * 2**20


def partition_count(
    total_bytes: int, partition_bytes: int = PARTITION_BYTES, max_partitions: int | None = MAX_PARTITIONS
) -> int:
    """Partitions of about ``partition_bytes``; at most ``max_partitions`` (None: no cap, for an engine that
    keeps no file open per partition)."""
    count = max(1, math.ceil(total_bytes / partition_bytes))
    return count if max_partitions is None else min(max_partitions, count)


def slice_count(partition_bytes: int, slice_bytes: int = SLICE_BYTES) -> int:
    return max(1, math.ceil(partition_bytes / slice_bytes))


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
) -> list[list[tuple[str, str, int]]]:
    """Hash-partition the rows of ``inputs`` ((name, path) pairs) into ``count`` partitions in ``folder``.

    Returns, per partition, its pieces ((keys path, rows path, bytes of source rows), one per writer; the
    bytes count the rows as they were in the input, so slices follow the input's size). With ``processes`` > 1
    the files are shared out among that many processes (by ``sizes``, default: the files' sizes on
    disk); ``opener`` and ``reject`` must then be picklable (module-level functions or partials of them).
    The pass reads and converts every multi-turn row (about 6 s per 100 MB on one core, so some 19 s of the
    scale-0.2 ``sessions`` build): with ``num_proc=2`` two writers halve it.

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
        partial(_write_pieces, writer, [(index, *inputs[index]) for index in share], folder, count, opener)
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
    return [
        [(*piece_paths(folder, writer, index, count), results[writer][index]) for writer in range(len(tasks))]
        for index in range(count)
    ]


def piece_paths(folder: str, writer: int, index: int, count: int) -> tuple[str, str]:
    stem = os.path.join(folder, f"multiturn-{index:05d}-of-{count:05d}-w{writer:03d}")
    return f"{stem}.keys", f"{stem}.rows"


@dataclass
class _Failure:
    """A SourceError a writer raised in file ``file_index``. A writer stops at its first error and reads
    its files in order, so the failure with the lowest file index is the error a serial pass meets first."""

    error: SourceError
    file_index: int


def _write_pieces(
    writer: int,
    inputs: list[tuple[int, str, str]],
    folder: str,
    count: int,
    opener: Callable[[str], BinaryIO],
    subsets: Iterable[str] | None,
    reject: Reject,
) -> _Failure | list[int]:
    """One writer: the rows of ``inputs`` ((file index, name, path)) into its piece of each partition, a key
    line per row in ``.keys`` and the converted row in ``.rows``; returns the bytes of source rows each piece got."""
    offsets = [0] * count
    source_bytes = [0] * count
    with contextlib.ExitStack() as stack:
        keys, rows = [], []
        for keys_path, rows_path in (piece_paths(folder, writer, index, count) for index in range(count)):
            keys.append(stack.enter_context(open(keys_path, "wb", buffering=1 << 16)))
            rows.append(stack.enter_context(open(rows_path, "wb", buffering=1 << 20)))
        for file_index, name, path in inputs:
            try:
                for target, sort_key, converted, size in _partitioned_rows(
                    file_index, name, path, count, opener, subsets, reject
                ):
                    keys[target].write(_key_line([*sort_key, writer, offsets[target], len(converted)]))
                    rows[target].write(converted)
                    offsets[target] += len(converted)
                    source_bytes[target] += size
            except SourceError as error:
                return _Failure(error, file_index)
    return source_bytes


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
        group = f"[{encode_basestring(source)}, {encode_basestring(how)}, {encode_basestring(key)}]".encode()
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


def _key_line(values: list) -> bytes:
    """One key line: orjson, which reads its own text of strings and 64-bit integers back exactly. What
    orjson cannot write (an integer past 64 bits, a lone surrogate in a 多轮序号 text) ``json`` writes,
    behind a space that tells the reader to read that line with ``json``."""
    try:
        return orjson.dumps(values) + b"\n"
    except (TypeError, orjson.JSONEncodeError):
        return b" " + json.dumps(values, ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n"


def read_partition(
    pieces: list[tuple[str, str, int]],
    names: list[str],
    notes: Notes,
    subsets: Iterable[str] | None = None,
    reject: Reject = raise_error,
    part: tuple[int, int] = (0, 1),
) -> Iterator[dict[str, Any]]:
    """The conversations of one partition (its ``pieces``), sorted by (来源, key); see the module docstring.

    ``part`` = (j, n): only the j-th of n equal runs of the partition's conversations.
    A bad row goes to ``reject`` alone; its conversation is built from its other rows.
    """
    index, starts = _partition_index(pieces)
    number, parts = part
    first, stop = len(starts) * number // parts, len(starts) * (number + 1) // parts
    if first >= stop:
        return
    end = starts[stop] if stop < len(starts) else len(index)
    with contextlib.ExitStack() as stack:
        # one os.pread per converted row (memory-mapping the pieces was a little faster, but counted the pages
        # read in the worker's memory)
        descriptors = [stack.enter_context(open(rows_path, "rb")).fileno() for _, rows_path, _ in pieces]
        rows = (
            (entry[:8], os.pread(descriptors[entry[8]], entry[10], entry[9]))
            for entry in itertools.islice(index, starts[first], end)
        )
        yield from records_from_sorted(rows, names, notes, reject)


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


_last_index: dict[tuple, tuple[list[tuple], list[int]]] = {}


def _partition_index(pieces: list[tuple[str, str, int]]) -> tuple[list[tuple], list[int]]:
    """The sorted index of a partition and where each conversation starts in it.

    The slices of a partition are adjacent shards, so a worker mostly reads them one after the other:
    it keeps the last partition's index (a few MB) instead of reading and sorting it once per slice
    (about 0.2 s per 64 MiB partition and slice: some 3 s of the 93 s scale-0.2 ``sessions`` build).
    """
    key = tuple((keys, rows, _identity(keys)) for keys, rows, *_ in pieces)  # a reused path is another file
    if key not in _last_index:
        index = _sorted_index(pieces)
        starts = [at for at in range(len(index)) if at == 0 or index[at][:3] != index[at - 1][:3]]
        _last_index.clear()
        _last_index[key] = index, starts
    return _last_index[key]


def _identity(path: str) -> tuple[int, int, int, int]:
    stat = os.stat(path)
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns


def _sorted_index(pieces: list[tuple[str, str, int]]) -> list[tuple]:
    """(来源, how, key, rank, number, text, file index, line, piece, byte offset, byte length) of every
    row of a partition, sorted; converted rows stay on disk. Each slice of a partition reads it, so one orjson
    call reads a piece's key lines (unless a line needed ``json``)."""
    index: list[tuple] = []
    for keys_path, *_ in pieces:
        with open(keys_path, "rb") as handle:
            data = handle.read()
        if not data:
            continue
        if data.startswith(b" ") or b"\n " in data:
            lines = data.splitlines()
            values = [json.loads(line) if line.startswith(b" ") else orjson.loads(line) for line in lines]
        else:
            values = orjson.loads(b"[" + data[:-1].replace(b"\n", b",") + b"]")
        index.extend(map(tuple, values))
    index.sort()
    return index
