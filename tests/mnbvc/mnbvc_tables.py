"""Shared by the tests of MNBVC's columnar pass 2 (``builders.mnbvc.multiturn_tables``): a folder's 多轮对话 rows
keyed by the reference pass 1 (``keyed_columns.python_batch``), sorted, cut into small tables of whole
conversations, then made into ``sessions`` rows both ways: by ``MnbvcBuilder.grouped_tables`` and by the
reference (``multiturn.records_from_sorted`` of ``keyed_columns.payload_rows``), with what each counted, logged
and rejected."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import datasets
import pyarrow as pa

from builders.mnbvc import converted, multiturn
from builders.mnbvc.builder import MnbvcBuilder
from builders.mnbvc.multiturn_tables import SESSIONS_SCHEMA
from convhub.engine import keyed_columns
from convhub.engine.arrow_rows import ArrowList, rows_table
from convhub.engine.input_shards import GroupShard
from convhub.engine.stats import Statistics
from convhub.errors import Notes


@dataclass
class Made:
    """What one way of pass 2 gave: its items (tables and records, in order), notes, warnings and rejections."""

    items: list = field(default_factory=list)
    notes: Notes = field(default_factory=Notes)
    warnings: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)

    def tables(self) -> int:
        return sum(isinstance(item, pa.Table) for item in self.items)

    def records(self) -> int:
        return sum(isinstance(item, dict) for item in self.items)


class _Messages(logging.Handler):
    def __init__(self, messages: list[str]):
        super().__init__(logging.WARNING)
        self.messages = messages

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def builder_of(folder: Path, quarantine: Path) -> MnbvcBuilder:
    quarantine.mkdir(parents=True, exist_ok=True)
    return MnbvcBuilder(data_dir=str(folder), on_bad_record="skip", quarantine_dir=str(quarantine))


def group_shard(builder: MnbvcBuilder, folder: Path) -> GroupShard:
    shards = builder.shards(datasets.DownloadManager(data_dir=str(folder)))["train"]
    [shard] = [shard for shard in shards if isinstance(shard, GroupShard)]
    return shard


def pass_one(builder: MnbvcBuilder, shard: GroupShard) -> pa.Table:
    """Every file's keyed rows by the reference pass 1, sorted as the engine sorts a partition."""
    batches = [
        keyed_columns.python_batch(
            builder.keyed_rows(shard, index), converted.KEYED_SCHEMA, converted.values_of
        )
        for index in range(len(shard.files))
    ]
    return keyed_columns.sort_rows(pa.Table.from_batches(batches, schema=converted.KEYED_SCHEMA))


def _rejected(quarantine: Path) -> list[str]:
    return [
        line
        for path in sorted(quarantine.glob("quarantine-*.jsonl"))
        for line in path.read_text().splitlines()
    ]


def _run(builder: MnbvcBuilder, quarantine: Path, made: Made, make) -> Made:
    logger = logging.getLogger("builders.mnbvc.parse")
    handler = _Messages(made.warnings)
    logger.addHandler(handler)
    try:
        made.items = list(make())
    finally:
        logger.removeHandler(handler)
    made.rejected = _rejected(quarantine)
    return made


def both_ways(folder: Path, work: Path, rows: int = 7, batch_rows: int = 3) -> tuple[Made, Made]:
    """(reference, columns) of pass 2 over ``folder``'s 多轮对话 files, from pass 1's sorted rows as batches of
    ``batch_rows`` regrouped into tables of whole conversations of about ``rows`` rows."""
    first = builder_of(folder, work / "pass-1")
    shard = group_shard(first, folder)
    keyed = pass_one(first, shard)
    names = [name for name, _ in shard.files]

    def tables():
        return keyed_columns.whole_conversations(keyed.to_batches(max_chunksize=batch_rows), rows=rows)

    reference, columns = Made(), Made()
    old = builder_of(folder, work / "reference")
    pairs = (pair for table in tables() for pair in keyed_columns.payload_rows(table, converted.converted_of))
    _run(
        old,
        work / "reference",
        reference,
        lambda: multiturn.records_from_sorted(pairs, names, reference.notes, old.reject),
    )
    new = builder_of(folder, work / "columns")
    _run(new, work / "columns", columns, lambda: new.grouped_tables(tables(), shard, columns.notes))
    return reference, columns


def plain(record: dict) -> dict:
    """A record with its Arrow turns as a list of dicts, to compare with ``==``."""
    sessions = [
        {**session, "turns": list(session["turns"])} if isinstance(session["turns"], ArrowList) else session
        for session in record["sessions"]
    ]
    return {**record, "sessions": sessions}


def assert_same(reference: Made, columns: Made, encodable: bool = True) -> None:
    """The columns' items are the reference's records, row for row in order: a table equal (schema too) to
    ``rows_table`` of the records it stands for, a record equal to its own; all of them as one table (a writer's
    batch) of the same bytes; and the same notes, warnings and rejections. ``encodable``: every record can be a
    table (no lone surrogate). The bytes of a table alone are not compared: a slice of a table made at once keeps
    a validity bitmap where its own rows have no null."""
    records = reference.items
    position = 0
    for item in columns.items:
        if isinstance(item, pa.Table):
            expected = rows_table(records[position : position + item.num_rows], SESSIONS_SCHEMA)
            assert item.schema.equals(SESSIONS_SCHEMA, check_metadata=True)
            assert item.equals(expected)
            position += item.num_rows
        else:
            assert plain(item) == plain(records[position])
            position += 1
    assert position == len(records)
    if encodable:
        parts = [
            item if isinstance(item, pa.Table) else rows_table([item], SESSIONS_SCHEMA)
            for item in columns.items
        ]
        whole = rows_table(records, SESSIONS_SCHEMA)
        joined = pa.concat_tables([*parts, whole.slice(0, 0)]).combine_chunks()  # copied: a writer's batch
        assert joined.equals(whole)
        assert joined.nbytes == whole.combine_chunks().nbytes  # the card's num_bytes
    by_rows, by_tables = Statistics(), Statistics()
    for row in records:
        by_rows.add("train", row)
    for item in columns.items:
        if isinstance(item, pa.Table):
            by_tables.add_table("train", item)
        else:
            by_tables.add("train", item)
    assert by_tables.table() == by_rows.table()
    assert columns.notes == reference.notes
    assert columns.warnings == reference.warnings
    assert columns.rejected == reference.rejected
