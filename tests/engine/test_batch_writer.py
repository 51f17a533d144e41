"""The local engine (``convhub.engine.runners.local``) writes exactly what ``datasets``' own per-example writer writes.

Every config of every source is prepared twice from its sample: once by the local engine, once by ``datasets``'
own ``download_and_prepare`` of the same builder (a plain ``GeneratorBasedBuilder``). Tables and row counts must be
equal.
"""

from __future__ import annotations

import glob
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from convhub import registry
from convhub.engine.runners.cuts import balanced_runs, even_runs
from convhub.engine.runners.local import MAX_SHARD_BYTES, LocalEngine, jobs
from convhub.errors import Notes


def _by_split(paths) -> dict[str, pa.Table]:
    tables: dict[str, list[pa.Table]] = {}
    for split, path in paths:
        tables.setdefault(split, []).append(pq.read_table(path))
    return {split: pa.concat_tables(parts) for split, parts in tables.items()}


def _written(
    builder_cls, config: str, data_dir: str, folder, max_shard_bytes=MAX_SHARD_BYTES, num_proc=None, **options
) -> tuple[dict[str, pa.Table], dict, list[str]]:
    """The local engine's build: tables by split, (rows, bytes) by split, and the files in order."""
    builder = builder_cls(config_name=config, data_dir=data_dir, cache_dir=str(folder / "cache"), **options)
    written = LocalEngine(num_proc, max_shard_bytes).write_config(
        builder, folder / "out", str(folder / "downloads")
    )
    paths = [(split, path) for split, part in written.items() for path in part.files]
    sizes = {split: (part.info.num_examples, part.info.num_bytes) for split, part in written.items()}
    return _by_split(paths), sizes, [path for _, path in paths]


def _prepared(builder_cls, config: str, data_dir: str, cache_dir) -> tuple[dict[str, pa.Table], dict]:
    """``datasets``' own build of the same builder."""
    builder = builder_cls(config_name=config, data_dir=data_dir, cache_dir=str(cache_dir))
    builder.download_and_prepare(file_format="parquet")
    paths = [
        (os.path.basename(path).split("-")[1].split(".")[0], path)
        for path in sorted(glob.glob(os.path.join(builder.cache_dir, "*.parquet")))
    ]
    sizes = {name: (info.num_examples, info.num_bytes) for name, info in builder.info.splits.items()}
    return _by_split(paths), sizes


@pytest.mark.slow
@pytest.mark.parametrize(
    ("source", "config"),
    [(name, view.name) for name in registry.names() for view in registry.get(name).views()],
)
def test_local_engine_equals_datasets_per_example_writer(source, config, tmp_path):
    builder_cls = registry.get(source)
    sample = builder_cls.sample_dir()
    batch, batch_sizes, _ = _written(builder_cls, config, sample, tmp_path / "batch")
    reference, reference_sizes = _prepared(builder_cls, config, sample, tmp_path / "reference")
    assert batch.keys() == reference.keys()
    for split, table in reference.items():
        assert batch[split].schema == table.schema, split
        assert batch[split].schema.metadata == table.schema.metadata, split
        assert batch[split].equals(table), f"{source}/{config}/{split} differs from datasets' own writer"
    # num_bytes is Arrow's in-memory size: the two conversions may allocate a validity bitmap differently
    assert batch_sizes.keys() == reference_sizes.keys()
    for split, (rows, size) in reference_sizes.items():
        assert batch_sizes[split][0] == rows
        assert batch_sizes[split][1] == pytest.approx(size, rel=0.02)


def test_the_local_engine_starts_new_files_past_the_shard_size_with_the_same_rows(tmp_path):
    mnbvc = registry.get("mnbvc")
    tiny = {"max_shard_bytes": 1, "writer_batch_size": 4}  # a new Parquet file after every batch
    batch, sizes, files = _written(mnbvc, "sessions", mnbvc.sample_dir(), tmp_path / "batch", **tiny)
    whole, whole_sizes, whole_files = _written(mnbvc, "sessions", mnbvc.sample_dir(), tmp_path / "whole")
    assert len(files) > len(whole_files) and len(files) > 2
    assert all(pq.read_metadata(path).num_rows <= 4 for path in files)
    assert {split: table.to_pylist() for split, table in batch.items()} == {
        split: table.to_pylist() for split, table in whole.items()
    }
    assert {split: rows for split, (rows, _) in sizes.items()} == {
        split: rows for split, (rows, _) in whole_sizes.items()
    }


def test_worker_processes_write_the_rows_one_process_writes_in_the_same_order(tmp_path):
    """``num_proc=2``: jobs of consecutive shards in worker processes, their files in job order."""
    mnbvc = registry.get("mnbvc")
    one, one_sizes, one_files = _written(mnbvc, "sessions", mnbvc.sample_dir(), tmp_path / "one")
    two, two_sizes, two_files = _written(mnbvc, "sessions", mnbvc.sample_dir(), tmp_path / "two", num_proc=2)
    assert len(one_files) == 1 and len(two_files) == 2
    assert {split: table.to_pylist() for split, table in two.items()} == {
        split: table.to_pylist() for split, table in one.items()
    }
    assert {split: rows for split, (rows, _) in two_sizes.items()} == {
        split: rows for split, (rows, _) in one_sizes.items()
    }


def test_jobs_are_runs_of_consecutive_shards_the_first_ones_longer():
    kwargs = {"shards": list("abcde"), "split": "train"}
    assert [job["shards"] for job in jobs(kwargs, 2)] == [list("abc"), list("de")]
    assert [job["shards"] for job in jobs(kwargs, 9)] == [[shard] for shard in "abcde"]
    assert jobs(kwargs, 1) == [kwargs] and jobs({"shards": ["a"], "split": "x"}, 4) == [
        {"shards": ["a"], "split": "x"}
    ]
    assert all(job["split"] == "train" for job in jobs(kwargs, 3))


def test_jobs_of_shards_that_say_their_bytes_hold_similar_bytes():
    """A slow first shard (a whole file) and quick ones (a partition's slices): by count, one job would get the
    big file and two slices while the other got three slices."""
    sized = [
        {"path": "big", "bytes": 90},
        *({"path": f"s{n}", "range": [20 * n, 20 * n + 20, n + 1]} for n in range(5)),
    ]
    assert [[shard["path"] for shard in job["shards"]] for job in jobs({"shards": sized}, 2)] == [
        ["big"],
        ["s0", "s1", "s2", "s3", "s4"],
    ]
    unsized = [*sized, "a-path"]  # a shard that does not say its bytes: cut by count, as datasets cuts
    assert [len(job["shards"]) for job in jobs({"shards": unsized}, 2)] == [4, 3]
    assert balanced_runs([1, 1, 1, 1, 10], 2) == [range(0, 4), range(4, 5)]
    assert balanced_runs([3, 1, 1, 1, 1, 1], 3) == [range(0, 1), range(1, 3), range(3, 6)]
    assert balanced_runs([0, 0, 0], 2) == [range(0, 2), range(2, 3)]  # no bytes at all: by count
    assert balanced_runs([100, 1, 1], 3) == [range(0, 1), range(1, 2), range(2, 3)]  # never an empty job


def test_even_runs_keep_the_order_and_the_first_runs_are_longer():
    """What cuts a split's shards into jobs here and into tasks on Spark (past its file limit)."""
    assert even_runs(7, 3) == [range(0, 3), range(3, 5), range(5, 7)]
    assert even_runs(2, 5) == [range(0, 1), range(1, 2)]
    assert even_runs(5, 2) == [range(0, 3), range(3, 5)]


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

    from convhub.engine.runners.memory import GC_YOUNG_THRESHOLD

    Probe, seen = _threshold_probe("locomo")
    before = gc.get_threshold()
    builder = Probe(
        config_name="sessions", data_dir=registry.get("locomo").sample_dir(), cache_dir=str(tmp_path)
    )
    LocalEngine().write_config(builder, tmp_path / "out", str(tmp_path / "downloads"))
    assert seen and all(threshold >= GC_YOUNG_THRESHOLD for threshold in seen)
    assert gc.get_threshold() == before


def test_convhub_check_parses_with_the_collector_relaxed_and_restores_it():
    import gc

    from convhub.engine.runners.memory import GC_YOUNG_THRESHOLD

    Probe, seen = _threshold_probe("locomo")
    before = gc.get_threshold()
    records = list(Probe(data_dir=registry.get("locomo").sample_dir()).iter_records(Notes()))
    assert records and seen and all(threshold >= GC_YOUNG_THRESHOLD for threshold in seen)
    assert gc.get_threshold() == before


@pytest.mark.slow
def test_a_stream_parses_with_the_collector_relaxed_and_hands_each_row_back_without():
    import gc

    from convhub.engine.runners.memory import GC_YOUNG_THRESHOLD

    Probe, seen = _threshold_probe("locomo")
    before = gc.get_threshold()
    streams = Probe(config_name="turns", data_dir=registry.get("locomo").sample_dir()).as_streaming_dataset()
    between_rows = [gc.get_threshold() for stream in streams.values() for _ in stream]
    assert seen and all(threshold >= GC_YOUNG_THRESHOLD for threshold in seen)  # while the parser runs
    # the reader's own code, between rows, runs with the collector as the reader set it
    assert between_rows and set(between_rows) == {before}


def test_a_stream_scans_its_shards_with_the_collector_relaxed_too():
    import gc

    from convhub.engine.runners.memory import GC_YOUNG_THRESHOLD

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
