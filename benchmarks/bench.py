"""Benchmark every builder against the generic JSON loader, on scaled inputs in each source's format.

    python benchmarks/bench.py --scale 0.05          # about a minute
    python benchmarks/bench.py --scale 1             # the full run (README's table)

For each source it generates an input (``benchmarks/scaled_inputs.py``), then measures, each in a fresh
process so that peak memory is that case's own (``TreeMemory``): a bare ``json.loads`` pass over the files (the parse floor),
``datasets.load_dataset("json", ...)`` (the generic loader, the baseline users have today), the builder's
default ``sessions`` config and all shared configs together, each with ``num_proc=1`` and ``num_proc=2``
(``convhub build``'s default on a 2-core machine), every config (where a source has its own), each shared
config streamed through ``as_streaming_dataset()`` (seconds to the first row, then rows/s over at most
``--stream-seconds``), and the ``sessions`` build once more on an input a quarter the size, whose peak memory
shows whether memory grows with the input (on Spark too, ``local[1]`` and ``local[2]``: the full input's extra
megabytes by its extra seconds on ``local[2]`` are Spark's throughput per core once its fixed price is paid,
what the 60 TB sizing of ``docs/scale-out.md`` is checked against). For MNBVC, the native floor
(``native_floor.py``'s DuckDB regrouping of the multi-turn files, no Python per row) and the ``sessions`` build
of the same files. Ratios are against the baselines measured in the same run on the same input; a summary checks
the targets: peak memory under 1 GiB and flat as the input grows, MNBVC within 1.5x of its native floor and at
0.5x the generic loader's speed, the 60 TB sizing, and with ``--baseline-code``, every build at most 2x the time
of the code before a change:

    git worktree add ../base HEAD~3 && python benchmarks/bench.py --scale 0.2 --baseline-code ../base

    python benchmarks/bench.py --scale 1 --source mnbvc --engine local --repeat 3

``--repeat N`` runs the whole list of cases N times, one round after another (never one case N times in a row):
a machine whose speed drifts over the hour (this one's varies about 1.5x) then slows every case of a round
alike, and each ratio is taken within its round. A second table gives each case's median and range over the
rounds, and the targets are checked on the medians.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_cases
import scaled_inputs
from bench_cases import (
    BASELINE_SUFFIX,
    FLOOR_CASE,
    GENERIC_CASE,
    MEMORY_CASE,
    MEMORY_INPUT_RATIO,
    SPARK_MEMORY_CASE,
    SPARK_PARALLEL_MEMORY_CASE,
    case_input,
    cases_for,
    engine_of,
)
from bench_targets import baseline_speeds, merged, peak_cell, print_summary, targets
from harness import (  # noqa: F401 (bench.X for callers)
    BUILD,
    GENERIC_LOADER,
    PARSE_FLOOR,
    TreeMemory,
    print_cases,
    run_case,
)

from convhub import registry


def bench_source(
    source: str,
    workdir: Path,
    scale: float,
    stream_seconds: float = 10.0,
    only: list[str] | None = None,
    engine: str | None = None,
    repeat: int = 1,
    baseline_code: str | None = None,
) -> list[dict]:
    """Every case of one source (or those whose name contains one of ``only``, or the baselines and
    ``engine``'s cases), each in a fresh process; with ``repeat``, the whole list that many rounds (a row's
    ``round`` says which). With ``baseline_code`` (a checkout), each build case runs again with that code,
    right after the case itself."""
    made = scaled_inputs.make(source, workdir / source, scale)
    for note in made.notes:
        print(f"note: {note}", flush=True)

    def wanted(name: str) -> bool:
        return not only or any(part in name for part in only)

    chosen = cases_for(source, made, stream_seconds, engine)
    cases = [(name, code, args, case_input(name, made)) for name, code, args in chosen]
    memory_cases = [(MEMORY_CASE, "1", [])] if engine != "spark" else []
    if engine != "local" and bench_cases.spark_installed():  # looked up here: tests replace it
        memory_cases.append((SPARK_MEMORY_CASE, "1", ["spark:local[1]"]))
        memory_cases.append((SPARK_PARALLEL_MEMORY_CASE, "2", ["spark:local[2]"]))
    memory_cases = [case for case in memory_cases if wanted(case[0])]
    if memory_cases:  # the smaller input is made only for a memory case that runs
        smaller = scaled_inputs.make(source, workdir / f"{source}-quarter", scale / MEMORY_INPUT_RATIO)
        for name, num_proc, engine_args in memory_cases:
            cases.append(
                (
                    name,
                    BUILD,
                    [source, str(smaller.data_dir), '["sessions"]', num_proc, *engine_args],
                    smaller,
                )
            )
    cases = [case for case in cases if wanted(case[0])]
    runs = [(*case, None) for case in cases]
    if baseline_code is not None:
        runs = [
            twin
            for case in cases
            for twin in [(*case, None)]
            + ([(case[0] + BASELINE_SUFFIX, *case[1:], baseline_code)] if case[0].startswith("build") else [])
        ]
    rows: list[dict] = []
    for round_number in range(1, repeat + 1):
        for name, code, args, its_input, code_root in runs:
            row = _run(source, name, code, args, its_input, code_root)
            if repeat > 1:
                row["round"] = round_number
            rows.append(row)
            print(_format(row, rows), flush=True)
    return rows


def _run(
    source: str,
    name: str,
    code: str,
    args: list,
    case_input: scaled_inputs.ScaledInput,
    code_root: str | None = None,
) -> dict:
    """One case in a fresh process: its row (or a ``failed`` row, the error on stderr)."""
    try:
        argv = [str(a) for a in args]
        peaks: dict = {}
        seconds, rss, printed = run_case(code, argv, code_root, peaks=peaks)
    except RuntimeError as error:
        print(f"{source}: {name} failed: {error}", file=sys.stderr)
        return {"source": source, "case": name, "failed": str(error)[-300:]}
    row = {"source": source, "case": name, "MB": case_input.megabytes, "s": seconds, "rss": rss}
    row["python_rss"] = peaks.get("python", rss)
    if isinstance(printed, dict):  # a streaming case: its own clock, from builder construction
        row.update(rows=printed["rows"], s=printed["seconds"], first_row=printed["first_row"])
        row["complete"] = printed["complete"]
    else:
        row["rows"] = printed
    return row


def _format(row: dict, rows: list[dict]) -> str:
    case = row["case"] if "round" not in row else f"{row['case']} (round {row['round']})"
    if "failed" in row:
        return f"| {row['source']} | {case} | {engine_of(row['case'])} | failed (see stderr) | | | | | | |"
    measured = baseline_speeds(row, rows)
    generic = measured.get(GENERIC_CASE)
    floor = measured.get(FLOOR_CASE)
    rows_text = "-" if row["rows"] < 0 else f"{row['rows']:,}"
    if "first_row" in row:  # streaming: rows/s, and the time to the first row instead of the ratios
        rate = row["rows"] / row["s"] if row["s"] else float("inf")
        if row["first_row"] is not None:
            first = f"first row {row['first_row']:.2f} s"
        else:
            first = "no row" if row["complete"] else f"no row within {row['s']:.0f} s"
        whole = "" if row["complete"] else " (stopped)"
        return (
            f"| {row['source']} | {case} | {engine_of(row['case'])} | {row['MB']:.1f} | {rows_text}{whole} "
            f"| {row['s']:.2f} "
            f"| {rate:,.0f} rows/s | {peak_cell(row)} | {first} | |"
        )
    speed = row["MB"] / row["s"] if row["s"] else float("inf")
    # the baselines read the full input, not a memory case's smaller one
    same_input = not row["case"].startswith(MEMORY_CASE)
    vs_generic = f"{speed / generic:.2f}x" if generic and same_input else "-"
    vs_floor = f"{speed / floor:.2f}x" if floor and same_input else "-"
    return (
        f"| {row['source']} | {case} | {engine_of(row['case'])} | {row['MB']:.1f} | {rows_text} "
        f"| {row['s']:.2f} | {speed:.1f} "
        f"| {peak_cell(row)} | {vs_generic} | {vs_floor} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.05, help="1.0 = the full-size inputs")
    parser.add_argument("--source", action="append", choices=registry.names(), help="only this source")
    parser.add_argument("--workdir", type=Path, help="keep generated inputs here (default: a temp folder)")
    parser.add_argument(
        "--stream-seconds", type=float, default=10.0, help="stop each streaming case after this long"
    )
    parser.add_argument(
        "--case", action="append", help="only the cases whose name contains this (e.g. 'sessions', 'stream')"
    )
    parser.add_argument(
        "--engine",
        choices=["local", "spark"],
        help="only this engine's cases, beside the baselines (default: both; Spark where installed)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run every case this many rounds, alternating, and summarize each by its median and range",
    )
    parser.add_argument(
        "--baseline-code",
        type=Path,
        help="a checkout of convhub before a change (git worktree add ../base COMMIT): every build case runs "
        "again with its code, in the same round, and the targets compare the two",
    )
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.baseline_code is not None and not (args.baseline_code / "convhub" / "__init__.py").is_file():
        parser.error(
            f"--baseline-code {args.baseline_code}: no convhub/ package there (a checkout of this layout)"
        )
    print(machine_line())
    print(f"scale {args.scale}; load average at start: {load_average()}")
    print(
        "| source | case | engine | input MB | rows | seconds | MB/s | peak MiB (tree) "
        "| speed vs load_dataset('json') | vs parse floor |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="convhub-bench-") as temp:
        workdir = args.workdir or Path(temp)
        rows = []
        started = time.perf_counter()
        for source in args.source or registry.names():
            if scaled_inputs.generator(source) is not None:
                rows += bench_source(
                    source,
                    workdir,
                    args.scale,
                    args.stream_seconds,
                    args.case,
                    args.engine,
                    args.repeat,
                    None if args.baseline_code is None else str(args.baseline_code.resolve()),
                )
            else:
                print(
                    f"| {source} | skipped: no scaled input (builders/{source}/scaled.py) | | | | | | | | |"
                )
    print(f"\nload average at end: {load_average()}; whole run {time.perf_counter() - started:.0f} s")
    if args.repeat > 1:
        rows = merged(rows)
        print_summary(rows)
    print("\ntargets:" if args.repeat == 1 else "\ntargets (on the medians):")
    print("\n".join(targets(rows)))
    return 0


def load_average() -> str:
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())


def machine_line() -> str:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            cpu = next(line.split(":", 1)[1].strip() for line in handle if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    disk = shutil.disk_usage(tempfile.gettempdir()).free / 2**30
    return (
        f"machine: {cpu}, {os.cpu_count()} cores, {memory:.0f} GiB RAM, {disk:.0f} GiB free in "
        f"{tempfile.gettempdir()}; Python {platform.python_version()}"
    )


if __name__ == "__main__":
    sys.exit(main())
