"""The engine interface (``convhub.engine.runners.engine``) and the one way to cut work (``runners.cuts``)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from convhub.engine.runners.cuts import balanced_runs, runs_by_size
from convhub.engine.runners.engine import ENGINE_WORK, Engine, LocalEngine, engine_named


def test_engine_named_makes_the_local_engine_with_its_processes_and_refuses_what_it_does_not_know():
    engine = engine_named("local", num_proc=3)
    assert isinstance(engine, LocalEngine) and engine.num_proc == 3 and engine.name == "local"
    with pytest.raises(ValueError, match="unknown engine 'dask': one of local, spark"):
        engine_named("dask")
    with pytest.raises(ValueError, match="--spark-master needs --engine spark"):
        engine_named("local", spark_master="local[2]")


def test_the_spark_engine_is_made_without_starting_spark_and_writes_in_the_staging_folder(tmp_path):
    pytest.importorskip("pyspark")
    engine = engine_named("spark", spark_master="local[1]")
    assert engine.name == "spark" and engine._session is None  # the session starts with the first job
    assert engine.scratch(tmp_path / "work", tmp_path / "staging") == tmp_path / "staging" / ENGINE_WORK
    engine.stop()


def test_both_engines_keep_the_interface():
    from convhub.engine.runners.spark import SparkEngine

    for engine_class in (LocalEngine, SparkEngine):
        for operation in ("scratch", "write_config", "map", "repeated_rows", "stop"):
            assert callable(getattr(engine_class, operation)), (engine_class, operation)
    engine: Engine = LocalEngine()  # (pyright checks the protocol here)
    assert engine.name == "local"


@pytest.mark.parametrize("num_proc", [1, 2])
def test_the_local_engine_maps_in_the_tasks_order(num_proc, tmp_path):
    engine = LocalEngine(num_proc)
    assert engine.scratch(tmp_path / "work", tmp_path / "staging") == tmp_path / "work"
    assert list(engine.map(abs, [-3, 1, -2, 5, -4])) == [3, 1, 2, 5, 4]
    assert list(engine.map(abs, [])) == []


def test_the_local_engine_finds_every_row_of_a_repeated_value_with_its_file_and_row(tmp_path):
    files = {
        "a.parquet": {"conversation_id": ["x", "y", "z"], "subset": ["s1", "s1", "s1"]},
        "b.parquet": {"conversation_id": ["q", "x"], "subset": ["s2", "s2"]},
        "c.parquet": {"conversation_id": ["y"], "subset": ["s3"]},
    }
    for name, columns in files.items():
        pq.write_table(pa.table({**columns, "text": ["t"] * len(columns["subset"])}), tmp_path / name)
    paths = [str(tmp_path / name) for name in files]
    rows = LocalEngine().repeated_rows(paths, "conversation_id", ["subset"])
    assert sorted(rows, key=lambda row: (row["file"], row["row"])) == [
        {"conversation_id": "x", "subset": "s1", "file": 0, "row": 0},
        {"conversation_id": "y", "subset": "s1", "file": 0, "row": 1},
        {"conversation_id": "x", "subset": "s2", "file": 1, "row": 1},
        {"conversation_id": "y", "subset": "s3", "file": 2, "row": 0},
    ]
    assert LocalEngine().repeated_rows(paths[:1], "conversation_id", ["subset"]) == []
    assert LocalEngine().repeated_rows([], "conversation_id", []) == []


def test_balanced_runs_cut_at_the_nearest_boundary_or_after_the_item_reaching_the_share():
    weights = [3, 1, 1, 1, 1, 1]  # a third of the total (8/3) is reached inside the first item
    assert balanced_runs(weights, 3) == [range(0, 1), range(1, 3), range(3, 6)]
    assert balanced_runs(weights, 3, cut="after") == [range(0, 1), range(1, 4), range(4, 6)]
    assert balanced_runs([3, 5, 1, 1], 2) == [range(0, 1), range(1, 4)]  # half (5) is nearer 3 than 8
    assert balanced_runs([3, 5, 1, 1], 2, cut="after") == [range(0, 2), range(2, 4)]
    assert balanced_runs([2, 2, 2], 9, cut="after") == [range(0, 1), range(1, 2), range(2, 3)]  # never empty


def test_runs_by_size_start_a_run_once_the_last_holds_the_limit():
    assert runs_by_size([4, 4, 4, 1, 1, 9], 5) == [range(0, 2), range(2, 4), range(4, 6)]
    assert runs_by_size([9], 5) == [range(0, 1)]
    assert runs_by_size([1, 1, 1], 0) == [range(0, 1), range(1, 2), range(2, 3)]
    assert runs_by_size([], 5) == []
