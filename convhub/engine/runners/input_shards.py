"""What one worker reads (``Shard``), and the engine's kinds of shards made of a source's :class:`GroupShard`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from convhub.engine.grouping.local_groupby import Partitioned


@dataclass
class GroupShard:
    """Rows of ``files`` ((name, path)) whose conversations may lie anywhere in them, to be regrouped into
    ``partitions`` partitions (``sizes``: each file's bytes, uncompressed, how the work is shared out)."""

    files: list[tuple[str, str]]
    sizes: list[int]
    partitions: int


@dataclass
class Partition:
    """The embedded engine's shard: slice ``part`` ((number, of how many)) of partition ``partition`` of a group,
    whose rows ``partitioned`` holds on disk (``local_groupby.read_partition`` reads it)."""

    group: GroupShard
    partitioned: Partitioned
    partition: int
    part: tuple[int, int]


@dataclass
class SortedPartition:
    """A partition's (sort key, payload) rows in order: what a source's ``grouped_records`` reads."""

    group: GroupShard
    rows: Iterator[tuple[tuple, bytes]]


#: A source's own shard (a path, or a dict only the source reads) or one of the engine's kinds.
Shard = str | dict[str, Any] | GroupShard | Partition | SortedPartition


#: What a byte of a partition's rows costs to read back and make records of, against a byte of rows read from a
#: file: its rows were read, keyed and converted in the regrouping's first pass (measured on MNBVC's benchmark
#: input: docs/performance.md, "Jobs of similar work").
PARTITION_BYTE_WORK = 0.5


def shard_work(shard: Shard) -> float | None:
    """About how much work a shard is, in bytes of rows read from a file, where it says (None where not): a
    source's dict its ``bytes`` or the length of its byte ``range``; a slice of a partition its share of the
    partition's bytes, weighed by ``PARTITION_BYTE_WORK``."""
    if isinstance(shard, Partition):
        return shard.partitioned.source_bytes[shard.partition] / shard.part[1] * PARTITION_BYTE_WORK
    if isinstance(shard, dict):
        if "bytes" in shard:
            return shard["bytes"]
        if "range" in shard:  # (start, end, first line)
            start, end, *_ = shard["range"]
            return end - start
    return None


def shard_name(shard: Shard) -> str:
    """The file a shard reads, for error messages: of a group's partition, the file its rows were regrouped from,
    where there is one."""
    if isinstance(shard, (Partition, SortedPartition)):
        names = [name for name, _ in shard.group.files]
        return names[0] if len(names) == 1 else f"the {len(names)} regrouped files ({names[0]}, ...)"
    if isinstance(shard, dict):
        named = shard.get("path") or shard.get("file") or shard.get("name") or shard.get("input")
        return str(getattr(named, "path", named) or shard)
    return str(shard)


def own_shard(shard: Shard) -> dict[str, Any]:
    """``shard`` as the dict a source's ``shards`` made it: what the engine hands back to that source's
    ``parse_shard`` and ``table_rows`` (an engine's kind reaching them is a bug of the engine, named here)."""
    if not isinstance(shard, dict):
        raise TypeError(f"a source's own shard (a dict) expected, not {type(shard).__name__}")
    return shard


def group_of(shard: Shard) -> GroupShard:
    """``shard`` as the group shard a source's ``keyed_rows`` and ``grouped_records`` are given (an engine passes
    the ``group_shard`` the source listed, or a partition's ``group``)."""
    if not isinstance(shard, GroupShard):
        raise TypeError(f"a group shard expected, not {type(shard).__name__}")
    return shard
