"""Large synthetic MNBVC 多轮对话 shards, and the build measured on them.

    python benchmarks/mnbvc_synthetic.py generate OUT_DIR --mb 200 --shards 4 [--gzip]
    python benchmarks/mnbvc_synthetic.py measure OUT_DIR --num-proc 1 [--configs sessions]

``generate`` writes the shards ``convhub.builders.mnbvc.scaled`` makes (conversations' rows scattered over the
shards, the format's quirks); generated data is not committed.

``measure`` builds the shards with ``convhub``'s ``build_source`` in a fresh process and prints seconds,
input MB/s, and peak RSS of the main process and of the largest worker process.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from convhub.builders.mnbvc.scaled import generate, generate_forum

__all__ = ["generate", "generate_forum", "measure"]

ROOT = Path(__file__).resolve().parents[1]


MEASURE = """
import json, resource, sys, tempfile, time
import datasets
datasets.disable_progress_bars()
from convhub.engine.build import build_source
data_dir, num_proc, configs = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
start = time.perf_counter()
with tempfile.TemporaryDirectory() as out:
    result = build_source("mnbvc", out + "/mnbvc", data_dir, configs, num_proc)
    rows = {name: sum(i.num_examples for i in built.splits.values()) for name, built in result.configs.items()}
seconds = time.perf_counter() - start
print(json.dumps({
    "seconds": round(seconds, 1),
    "rows": rows,
    "peak_rss_main_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    "peak_rss_largest_child_mb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024),
}))
"""


def measure(data_dir: Path, num_proc: int, configs: list[str] | None) -> dict:
    input_mb = sum(path.stat().st_size for path in data_dir.glob("*.jsonl*")) / 2**20
    process = subprocess.run(
        [sys.executable, "-c", MEASURE, str(data_dir), str(num_proc), json.dumps(configs)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(process.stdout.strip().splitlines()[-1])
    result.update(
        num_proc=num_proc, input_mb=round(input_mb, 1), mb_per_s=round(input_mb / result["seconds"], 2)
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("generate")
    make.add_argument("out", type=Path)
    make.add_argument("--mb", type=float, default=200, help="uncompressed size of all shards together")
    make.add_argument("--shards", type=int, default=4)
    make.add_argument("--gzip", action="store_true")
    make.add_argument("--seed", type=int, default=0)
    run = commands.add_parser("measure")
    run.add_argument("data_dir", type=Path)
    run.add_argument("--num-proc", type=int, default=1)
    run.add_argument("--configs", nargs="*", default=None)
    args = parser.parse_args()
    start = time.perf_counter()
    if args.command == "generate":
        summary = generate(args.out, args.mb, args.shards, args.gzip, args.seed)
        summary["seconds"] = round(time.perf_counter() - start, 1)
    else:
        summary = measure(args.data_dir, args.num_proc, args.configs)
    print(json.dumps(summary, ensure_ascii=False))


if __name__ == "__main__":
    main()
