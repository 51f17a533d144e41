"""A large GigaMemory file, and how the builder copes with it (seconds, peak RSS).

    python benchmarks/gigamemory_scaled.py --lines 1000            # ~375 MB .jsonl, a few minutes
    python benchmarks/gigamemory_scaled.py --lines 1000 --gzip     # the same as .jsonl.gz

The file is ``convhub.builders.gigamemory.scaled``'s (a real dialogue's four questions a quarter of the file
apart). Nothing is written into the project; the file goes to a temporary folder (or ``--workdir``).

``benchmarks/scaled_inputs.py`` makes the same file for ``bench.py`` (scale 1 = 1,600 lines, ~1 GB).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scaled_inputs

from convhub.builders.gigamemory.scaled import write_scaled


def main(argv: list[str] | None = None) -> int:
    import harness  # each case in a fresh process, with its process tree's peak memory

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1000)
    parser.add_argument("--gzip", action="store_true", help="write the file as .jsonl.gz")
    parser.add_argument("--workdir", type=Path, help="keep the generated file here (default: a temp folder)")
    parser.add_argument("--num-proc", type=int, default=2)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="gigamemory-scaled-") as temp:
        folder = args.workdir or Path(temp)
        folder.mkdir(parents=True, exist_ok=True)
        path = write_scaled(
            folder / ("scaled.jsonl.gz" if args.gzip else "scaled.jsonl"),
            args.lines,
            scaled_inputs.existing_real_file("gigamemory"),
        )
        size = os.path.getsize(path) / 2**20
        print(f"{path.name}: {args.lines:,} lines, {size:,.1f} MiB on disk")
        every = json.dumps(["sessions", "turns", "qa", "messages"])
        cases = [
            ("json.loads (parse floor)", harness.PARSE_FLOOR, [str(path)]),
            ("build sessions", harness.BUILD, ["gigamemory", str(folder), '["sessions"]', "1"]),
            ("build all shared configs", harness.BUILD, ["gigamemory", str(folder), every, "1"]),
            (
                f"build all, num_proc={args.num_proc}",
                harness.BUILD,
                ["gigamemory", str(folder), every, str(args.num_proc)],
            ),
        ]
        harness.print_cases(cases, size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
