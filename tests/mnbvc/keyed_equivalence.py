"""Shared by the tests of MNBVC's columnar conversion (no test module imports another): a 多轮对话 file's keyed
batches (``MnbvcBuilder.keyed_batches``) beside the reference (``keyed_columns.python_batch`` of
``keyed_rows``), row by row, with what each path rejected or raised."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from builders.mnbvc import converted
from builders.mnbvc.builder import MnbvcBuilder
from convhub.engine import keyed_columns
from convhub.engine.input_shards import GroupShard
from convhub.errors import SourceError


class Recording(MnbvcBuilder):
    """An MNBVC builder whose rejections are listed (file, place, field, problem, raw, scope), not quarantined."""

    def __init__(self, **config):
        super().__init__(**config)
        self.rejected = []

    def reject(self, error: SourceError, raw=None, scope="record", records=None):
        self.rejected.append((error.path, error.record, error.field, error.problem, raw, scope))


def shard_of(paths: list[Path], names: list[str] | None = None) -> GroupShard:
    names = names or [path.name for path in paths]
    return GroupShard(
        files=list(zip(names, map(str, paths), strict=True)), sizes=[0] * len(paths), partitions=1
    )


def _error(error: SourceError | None):
    return None if error is None else (error.path, error.record, error.field, error.problem)


def _collect(make):
    """(what ``make()`` gave, the SourceError it raised or None)."""
    items = []
    try:
        for item in make():
            items.append(item)
    except SourceError as error:
        return items, error
    return items, None


def compare_file(shard: GroupShard, index: int, subsets=None, builder=Recording):
    """(path of each keyed row: (line, ``values`` or ``payload``), what was rejected, the error raised) of file
    ``index``, after asserting that each row is the reference's (with its values when converted on columns,
    else built without them), in file order, and that both rejected and raised the same."""
    ours_builder, reference_builder = builder(subsets=subsets), builder(subsets=subsets)
    batches, our_error = _collect(lambda: ours_builder.keyed_batches(shard, index))
    rows, reference_error = _collect(lambda: reference_builder.keyed_rows(shard, index))
    assert _error(our_error) == _error(reference_error)
    assert getattr(ours_builder, "rejected", None) == getattr(reference_builder, "rejected", None)
    assert all(batch.schema == converted.KEYED_SCHEMA for batch in batches)
    ours = pa.Table.from_batches(batches, converted.KEYED_SCHEMA).to_pylist()
    with_values = keyed_columns.python_batch(rows, converted.KEYED_SCHEMA, converted.values_of).to_pylist()
    without = keyed_columns.python_batch(rows, converted.KEYED_SCHEMA).to_pylist()
    assert len(ours) == len(with_values)
    taken = []
    for row, value_row, payload_row in zip(ours, with_values, without, strict=True):
        if row["payload"] is None:
            assert row == value_row
            taken.append((row["line"], "values"))
        else:
            assert row == payload_row
            taken.append((row["line"], "payload"))
    return taken, getattr(ours_builder, "rejected", None), our_error


def paths_taken(paths: list[Path], subsets=None) -> list[str]:
    """The path each keyed row of the files took, every file compared with the reference (``compare_file``)."""
    shard = shard_of(paths)
    return [path for index in range(len(paths)) for _, path in compare_file(shard, index, subsets)[0]]
