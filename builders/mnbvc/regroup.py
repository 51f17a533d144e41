"""Regroup 多轮对话 rows into conversations with memory that does not grow with the corpus.

MNBVC writes one row per question/answer pair; the rows of one conversation (same 来源 and ``会话``) may
be anywhere: apart in one file or in several of its ~500 MB shards. Two passes:

1. ``write_partitions`` reads every multi-turn file once and appends each row, behind a small header
   (来源, key, ``多轮序号``, file index, line), to one of K partition files chosen by a stable hash of the
   conversation key, so all rows of a conversation land in the same partition. K is chosen from the
   input size so that a partition holds about ``PARTITION_BYTES`` of rows.
2. ``read_partition`` (one worker per partition, ``num_proc`` in parallel) reads only the headers and
   byte offsets of its partition, sorts them by (来源, key, 多轮序号, file, line), and re-reads the rows of
   one conversation at a time. Its memory is about 150 bytes per row of that partition, whatever the
   rows' length; the rows themselves are read back one conversation at a time.

Partitions are plain files in a temporary folder (``CONVHUB_TMPDIR``, else the system's temp folder)
that the builder deletes when it is garbage collected; they take about the uncompressed input's size.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import zlib
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any, BinaryIO

from builders.errors import Notes, Reject, SourceError, raise_error
from builders.mnbvc import parse

PARTITION_BYTES = 64 * 2**20
MAX_PARTITIONS = 512  # open files at once while partitioning


def uncompressed_size(path: str) -> int:
    """A local file's size; for gzip, the size its trailer records (modulo 4 GiB, so at least that)."""
    size = os.path.getsize(path)
    with open(path, "rb") as handle:
        if handle.read(2) != b"\x1f\x8b" or size < 18:
            return size
        handle.seek(-4, os.SEEK_END)
        return max(size, int.from_bytes(handle.read(4), "little"))


def partition_count(total_bytes: int, partition_bytes: int = PARTITION_BYTES) -> int:
    return max(1, min(MAX_PARTITIONS, math.ceil(total_bytes / partition_bytes)))


def write_partitions(
    files: list[tuple[str, str]],
    folder: str,
    count: int,
    opener: Callable[[str], BinaryIO] | None = None,
    subsets: Iterable[str] | None = None,
    reject: Reject = raise_error,
) -> list[str]:
    """Hash-partition the rows of ``files`` ((name, path) pairs) into ``count`` files in ``folder``.

    A row that is not JSON, not an object or not a Q/A row goes to ``reject`` here, before any output
    (a SourceError by default).
    """
    opener = opener or parse.open_local
    paths = [os.path.join(folder, f"multiturn-{index:05d}-of-{count:05d}.part") for index in range(count)]
    writers = [open(path, "wb", buffering=1 << 20) for path in paths]  # noqa: SIM115 - closed below
    try:
        for file_index, (name, path) in enumerate(files):
            lines = parse.open_lines(partial(opener, path), name)
            for line, raw in parse.readable_lines(lines, reject):
                try:
                    row = parse.load_row(raw, name, line)
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
                extension = parse.parse_extension(parse._metadata(row).get("扩展字段"))
                how, key = parse.conversation_key(row, extension, name, line)
                group = json.dumps([source, how, key], ensure_ascii=False).encode()
                rank, number, text = parse.sequence_number(extension)
                order = json.dumps([rank, number, text, file_index, line], ensure_ascii=False).encode()
                target = writers[zlib.crc32(group) % count]
                target.write(b"%s\t%s\t%s\n" % (group, order, raw))
    finally:
        for writer in writers:
            writer.close()
    return paths


def read_partition(
    path: str,
    files: list[str],
    notes: Notes,
    subsets: Iterable[str] | None = None,
    reject: Reject = raise_error,
) -> Iterator[dict[str, Any]]:
    """The conversations of one partition, sorted by (来源, key); see the module docstring.

    A bad row goes to ``reject`` alone; its conversation is built from its other rows.
    """
    index = _sorted_index(path)
    warnings = {name: parse.Warnings(name) for name in files}
    with open(path, "rb") as handle:
        for (source, how, key), entries in itertools.groupby(index, key=lambda entry: entry[0]):
            pairs = []
            counted = Notes()
            for _, (_, _, _, file_index, line), offset in entries:
                handle.seek(offset)
                raw = handle.readline().rstrip(b"\n").split(b"\t", 2)[2]
                name = files[file_index]
                try:
                    row = parse.load_row(raw, name, line)
                    pairs.append(parse.read_pair(name, line, row, counted, warnings[name]))
                except SourceError as error:
                    reject(error, raw)
            if pairs:
                record = parse.multiturn_record(pairs, how, key, parse.group_id(source, how, key), counted)
                notes.update(counted)
                yield record


def _sorted_index(path: str) -> list[tuple[tuple, tuple, int]]:
    """(group, order, byte offset) of every row of a partition, sorted; rows stay on disk."""
    index = []
    offset = 0
    with open(path, "rb") as handle:
        for raw in handle:
            group, order, _ = raw.split(b"\t", 2)
            index.append((tuple(json.loads(group)), tuple(json.loads(order)), offset))
            offset += len(raw)
    index.sort(key=lambda entry: (entry[0], entry[1]))
    return index
