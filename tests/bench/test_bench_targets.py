"""``benchmarks/bench_targets.py``: the summary's target lines, each measured figure against its goal, judged
on rows made here (nothing is run or timed)."""

from __future__ import annotations

import bench
import bench_cases
import bench_targets


def test_mnbvc_targets_its_native_floor_and_half_the_generic_speed():
    rows = [
        {"source": "mnbvc", "case": bench_cases.GENERIC_CASE, "s": 10.0, "rss": 900.0},
        {"source": "mnbvc", "case": bench_cases.PARALLEL_CASE, "s": 25.0, "rss": 500.0},
        {"source": "mnbvc", "case": bench_cases.SHARED_PARALLEL_CASE, "s": 40.0, "rss": 600.0},
        {"source": "mnbvc", "case": bench_cases.NATIVE_FLOOR_CASE, "s": 4.0, "rss": 800.0},
        {"source": "mnbvc", "case": bench_cases.FLOORED_BUILD_CASE, "s": 8.0, "rss": 500.0},
    ]
    lines = bench.targets(rows)
    assert (
        "- mnbvc: sessions speed vs load_dataset('json'), num_proc=2 0.40x (target >= 0.5x): MISSED" in lines
    )
    assert (
        "- mnbvc: sessions time, num_proc=2 / the native floor's (multi-turn files) 2.00x (target <= 1.5x): MISSED"
        in lines
    )
    assert "- mnbvc: all configs time / sessions alone, num_proc=2 1.60x (target <= 2.0x): met" in lines
    assert (
        "- mnbvc: peak memory of the builds' Python processes 600.00 MiB (target <= 1024 MiB): met" in lines
    )


def test_spark_memory_is_judged_on_its_python_processes_and_their_growth():
    """A Spark build's tree holds its JVM: the 1 GiB target and the growth with the input are its Python
    processes', measured on the full input and on a quarter of it."""
    rows = [
        {
            "source": "mnbvc",
            "case": bench_cases.SPARK_SESSIONS_CASE,
            "s": 9.0,
            "rss": 1400.0,
            "python_rss": 600.0,
        },
        {
            "source": "mnbvc",
            "case": bench_cases.SPARK_MEMORY_CASE,
            "s": 3.0,
            "rss": 1000.0,
            "python_rss": 400.0,
        },
    ]
    lines = bench.targets(rows)
    assert (
        "- mnbvc: peak memory of the builds' Python processes 600.00 MiB (target <= 1024 MiB): met" in lines
    )
    growth = (
        "peak memory of Spark local[1]'s Python processes, input x4 vs input 1.50x (target <= 1.25x): MISSED"
    )
    assert f"- mnbvc: {growth}" in lines
    assert bench_cases.engine_of(bench_cases.SPARK_MEMORY_CASE) == "spark local[1]"
    assert bench_targets.peak_cell(rows[0]) == "1400 (Python 600)"


def test_spark_sizing_leaves_the_fixed_price_out():
    """Spark's throughput per core for the cluster sizing is the full input's extra megabytes over the quarter's,
    by the extra seconds: a fixed price paid by both runs (the JVM's start) drops out."""
    rows = [
        {"source": "mnbvc", "case": name, "MB": mb, "s": seconds, "rss": 1400.0, "python_rss": python}
        for name, mb, seconds, python in [
            (bench_cases.SPARK_PARALLEL_CASE, 2048.0, 80.0, 860.0),
            (bench_cases.SPARK_PARALLEL_MEMORY_CASE, 512.0, 32.0, 800.0),
        ]
    ]
    lines = bench.targets(rows)
    # (2048 - 512) MB / (80 - 32) s / 2 cores = 16 MB/s per core; 60e6 MB / 16 / 3600 = 1,041.7 core-hours
    assert "- mnbvc: Spark local[2] 16.0 MB/s per core, its fixed price left out" in lines
    assert "- mnbvc: 60 TB on Spark, core-hours at that rate 1041.67 (target <= 1000): MISSED" in lines
    growth = (
        "peak memory of Spark local[2]'s Python processes, input x4 vs input 1.07x (target <= 1.25x): met"
    )
    assert f"- mnbvc: {growth}" in lines
    rows[0]["s"] = 30.0  # the larger input faster: no figure, rather than a negative one
    assert not any("per core" in line for line in bench.targets(rows))
