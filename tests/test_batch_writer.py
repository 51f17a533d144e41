"""The batch writer of ``convhub.engine.builder`` writes exactly what ``datasets``' per-example writer writes.

Every config of every source is prepared twice from its sample: once by the builder as it is, once by a
subclass that puts back ``datasets``' own ``GeneratorBasedBuilder._prepare_split_single``. Tables and row
counts must be equal.
"""

from __future__ import annotations

import glob
import os

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from convhub import registry
from convhub.errors import Notes


def _prepared(
    builder_cls, config: str, data_dir: str, cache_dir, max_shard_size=None, **options
) -> tuple[dict[str, pa.Table], dict]:
    builder = builder_cls(config_name=config, data_dir=data_dir, cache_dir=str(cache_dir), **options)
    builder.download_and_prepare(file_format="parquet", max_shard_size=max_shard_size)
    tables: dict[str, list[pa.Table]] = {}
    for path in sorted(glob.glob(os.path.join(builder.cache_dir, "*.parquet"))):
        split = os.path.basename(path).split("-")[1].split(".")[0]
        tables.setdefault(split, []).append(pq.read_table(path))
    sizes = {name: (info.num_examples, info.num_bytes) for name, info in builder.info.splits.items()}
    return {split: pa.concat_tables(parts) for split, parts in tables.items()}, sizes


def _with_datasets_writer(builder_cls):
    return type(
        f"{builder_cls.__name__}PerExample",
        (builder_cls,),
        {"_prepare_split_single": datasets.GeneratorBasedBuilder._prepare_split_single},
    )


@pytest.mark.parametrize(
    ("source", "config"),
    [(name, view.name) for name in registry.names() for view in registry.get(name).views()],
)
def test_batch_writer_equals_datasets_per_example_writer(source, config, tmp_path):
    builder_cls = registry.get(source)
    sample = builder_cls.sample_dir()
    batch, batch_sizes = _prepared(builder_cls, config, sample, tmp_path / "batch")
    per_example = _with_datasets_writer(builder_cls)
    reference, reference_sizes = _prepared(per_example, config, sample, tmp_path / "reference")
    assert batch.keys() == reference.keys()
    for split, table in reference.items():
        assert batch[split].schema == table.schema, split
        assert batch[split].equals(table), f"{source}/{config}/{split} differs from datasets' own writer"
    # num_bytes is Arrow's in-memory size: the two conversions may allocate a validity bitmap differently
    assert batch_sizes.keys() == reference_sizes.keys()
    for split, (rows, size) in reference_sizes.items():
        assert batch_sizes[split][0] == rows
        assert batch_sizes[split][1] == pytest.approx(size, rel=0.02)


def test_batch_writer_starts_new_shards_past_max_shard_size_with_the_same_rows(tmp_path):
    mnbvc = registry.get("mnbvc")
    tiny = {"max_shard_size": 1, "writer_batch_size": 4}  # a new Parquet file after every batch
    batch, sizes = _prepared(mnbvc, "sessions", mnbvc.sample_dir(), tmp_path / "batch", **tiny)
    whole, whole_sizes = _prepared(mnbvc, "sessions", mnbvc.sample_dir(), tmp_path / "whole")
    files = glob.glob(os.path.join(tmp_path / "batch", "**", "*.parquet"), recursive=True)
    assert len(files) > 2
    assert {split: table.to_pylist() for split, table in batch.items()} == {
        split: table.to_pylist() for split, table in whole.items()
    }
    assert {split: rows for split, (rows, _) in sizes.items()} == {
        split: rows for split, (rows, _) in whole_sizes.items()
    }


def test_no_column_of_any_view_is_an_extension_type():
    """Older clients cannot read ``arrow.json`` (see ``convhub.schema``): free-form values are plain text."""
    for name in registry.names():
        for view in registry.get(name).views():
            assert "extension" not in str(view.features.arrow_schema), (name, view.name)
            assert "json" not in str(view.features.to_dict()), (name, view.name)


def _threshold_probe(source: str):
    """``source``'s builder noting the collector's young threshold each time it parses a shard, and the list."""
    import gc

    seen = []

    class Probe(registry.get(source)):
        def parse_shard(self, shard, notes):
            seen.append(gc.get_threshold()[0])
            yield from super().parse_shard(shard, notes)

    return Probe, seen


def test_the_cycle_collector_runs_less_often_while_parsing_and_is_restored(tmp_path):
    import gc

    from convhub.engine.builder import GC_YOUNG_THRESHOLD

    Probe, seen = _threshold_probe("locomo")
    before = gc.get_threshold()
    builder = Probe(
        config_name="sessions", data_dir=registry.get("locomo").sample_dir(), cache_dir=str(tmp_path)
    )
    builder.download_and_prepare(file_format="parquet")
    assert seen and all(threshold >= GC_YOUNG_THRESHOLD for threshold in seen)
    assert gc.get_threshold() == before


def test_convhub_check_parses_with_the_collector_relaxed_and_restores_it():
    import gc

    from convhub.engine.builder import GC_YOUNG_THRESHOLD

    Probe, seen = _threshold_probe("locomo")
    before = gc.get_threshold()
    records = list(Probe(data_dir=registry.get("locomo").sample_dir()).iter_records(Notes()))
    assert records and seen and all(threshold >= GC_YOUNG_THRESHOLD for threshold in seen)
    assert gc.get_threshold() == before


def test_a_stream_parses_with_the_collector_relaxed_and_hands_each_row_back_without():
    import gc

    from convhub.engine.builder import GC_YOUNG_THRESHOLD

    Probe, seen = _threshold_probe("locomo")
    before = gc.get_threshold()
    streams = Probe(config_name="turns", data_dir=registry.get("locomo").sample_dir()).as_streaming_dataset()
    between_rows = [gc.get_threshold() for stream in streams.values() for _ in stream]
    assert seen and all(threshold >= GC_YOUNG_THRESHOLD for threshold in seen)  # while the parser runs
    # the reader's own code, between rows, runs with the collector as the reader set it
    assert between_rows and set(between_rows) == {before}


def test_a_stream_scans_its_shards_with_the_collector_relaxed_too():
    import gc

    from convhub.engine.builder import GC_YOUNG_THRESHOLD

    convlab = registry.get("convlab")
    seen = []

    class Probe(convlab):
        def shards(self, dl_manager):
            seen.append(gc.get_threshold()[0])
            return super().shards(dl_manager)

    before = gc.get_threshold()
    streams = Probe(config_name="turns", data_dir=convlab.sample_dir()).as_streaming_dataset()
    first = next(iter(streams["train"]))
    assert first["conversation_id"]
    assert seen and seen[0] >= GC_YOUNG_THRESHOLD
    assert gc.get_threshold() == before
