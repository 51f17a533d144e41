"""Shared by the tests of MNBVC's columnar conversion (no test module imports another): a 多轮对话 file's keyed
batches (``MnbvcBuilder.keyed_batches``) beside the reference (``keyed_columns.python_batch`` of
``keyed_rows``), row by row, with what each path rejected."""

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


def shard_of(paths: list[Path]) -> GroupShard:
    return GroupShard(files=[(path.name, str(path)) for path in paths], sizes=[0] * len(paths), partitions=1)


def paths_taken(paths: list[Path], subsets=None) -> list[str]:
    """The path each keyed row of ``paths`` took (``values``: converted on columns, ``payload``: by Python),
    after asserting that each is the reference's row (with its values, or built without them), in file order,
    and that both rejected the same rows with the same errors."""
    taken = []
    for index in range(len(paths)):
        ours_builder, reference_builder = Recording(subsets=subsets), Recording(subsets=subsets)
        shard = shard_of(paths)
        batches = list(ours_builder.keyed_batches(shard, index))
        assert all(batch.schema == converted.KEYED_SCHEMA for batch in batches)
        ours = pa.Table.from_batches(batches, converted.KEYED_SCHEMA).to_pylist()
        rows = list(reference_builder.keyed_rows(shard, index))
        with_values = keyed_columns.python_batch(
            rows, converted.KEYED_SCHEMA, converted.values_of
        ).to_pylist()
        without = keyed_columns.python_batch(rows, converted.KEYED_SCHEMA).to_pylist()
        assert ours_builder.rejected == reference_builder.rejected
        assert len(ours) == len(with_values)
        for row, value_row, payload_row in zip(ours, with_values, without, strict=True):
            if row["payload"] is None:
                assert row == value_row
                taken.append("values")
            else:
                assert row == payload_row
                taken.append("payload")
    return taken
