"""Benchmark every builder against the generic JSON loader, on scaled inputs in each source's format.

    python benchmarks/bench.py --scale 0.05          # about a minute
    python benchmarks/bench.py --scale 1             # the full run (README's table)

For each source it generates an input (``benchmarks/scaled_inputs.py``), then measures, each in a fresh
process so that peak RSS is that case's own: a bare ``json.loads`` pass over the files (the parse floor),
``datasets.load_dataset("json", ...)`` (the generic loader, the baseline users have today), the builder's
default ``sessions`` config, all shared configs together, and ``sessions`` with ``num_proc=2``. Ratios are
against the baselines measured in the same run on the same input.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import scaled_inputs

from builders import registry
from builders.views import SHARED_VIEWS

PARSE_FLOOR = """
import gzip, json, sys
for path in sys.argv[1:]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        if path.endswith(".json"):
            json.load(handle)
        else:
            for line in handle:
                json.loads(line)
print(-1)
"""

GENERIC_LOADER = """
import sys, tempfile, datasets
datasets.disable_progress_bars()
with tempfile.TemporaryDirectory() as cache:
    ds = datasets.load_dataset("json", data_files=sys.argv[1:], cache_dir=cache, split="train")
    print(ds.num_rows)
"""

BUILD = """
import sys, tempfile, json, datasets
datasets.disable_progress_bars()
from builders.build import build_source
source, data_dir, configs, num_proc = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
with tempfile.TemporaryDirectory() as out:
    result = build_source(source, out + "/folder", data_dir, configs, num_proc or None)
    print(sum(info.num_examples for built in result.configs.values() for info in built.splits.values()))
"""


def run_case(code: str, args: list[str]) -> tuple[float, float, int]:
    """Seconds, peak RSS in MiB (largest single process, children included) and rows printed."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "HF_DATASETS_OFFLINE": "1"}
    start = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    stdout, stderr = process.stdout.read(), process.stderr.read()
    if status != 0:
        raise RuntimeError(f"benchmark case failed:\n{stderr[-3000:]}")
    return seconds, usage.ru_maxrss / 1024, int(stdout.strip().splitlines()[-1])


def bench_source(source: str, workdir: Path, scale: float) -> list[dict]:
    data_dir, files = scaled_inputs.make(source, workdir / source, scale)
    megabytes = sum(os.path.getsize(path) for path in files) / 2**20
    shared = json.dumps([view.name for view in SHARED_VIEWS])
    cases = [
        ("json.loads (parse floor)", PARSE_FLOOR, files),
        ("load_dataset('json')", GENERIC_LOADER, files),
        ("build sessions", BUILD, [source, str(data_dir), '["sessions"]', "1"]),
        ("build shared configs", BUILD, [source, str(data_dir), shared, "1"]),
        ("build sessions num_proc=2", BUILD, [source, str(data_dir), '["sessions"]', "2"]),
    ]
    rows = []
    for name, code, args in cases:
        try:
            seconds, rss, count = run_case(code, [str(a) for a in args])
        except RuntimeError as error:
            print(f"{source}: {name} failed: {error}", file=sys.stderr)
            continue
        row = {"source": source, "case": name, "MB": megabytes, "rows": count, "s": seconds, "rss": rss}
        rows.append(row)
        print(_format(rows[-1], rows), flush=True)
    return rows


def _format(row: dict, rows: list[dict]) -> str:
    baselines = {r["case"]: r["s"] for r in rows if r["source"] == row["source"]}
    generic = baselines.get("load_dataset('json')")
    floor = baselines.get("json.loads (parse floor)")
    speed = row["MB"] / row["s"] if row["s"] else float("inf")
    vs_generic = f"{generic / row['s']:.2f}x" if generic else "-"
    vs_floor = f"{floor / row['s']:.2f}x" if floor else "-"
    rows_text = "-" if row["rows"] < 0 else f"{row['rows']:,}"
    return (
        f"| {row['source']} | {row['case']} | {row['MB']:.1f} | {rows_text} | {row['s']:.2f} | {speed:.1f} "
        f"| {row['rss']:.0f} | {vs_generic} | {vs_floor} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.05, help="1.0 = the full-size inputs")
    parser.add_argument("--source", action="append", choices=registry.names(), help="only this source")
    parser.add_argument("--workdir", type=Path, help="keep generated inputs here (default: a temp folder)")
    args = parser.parse_args(argv)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(
        "| source | case | input MB | rows | seconds | MB/s | peak RSS MiB "
        "| speed vs load_dataset('json') | vs parse floor |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="convhub-bench-") as temp:
        workdir = args.workdir or Path(temp)
        for source in args.source or registry.names():
            if source in scaled_inputs.GENERATORS:
                bench_source(source, workdir, args.scale)
            else:
                print(f"| {source} | no scaled-input generator yet | | | | | | | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
