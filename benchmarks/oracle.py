"""Today's local build is the oracle: build the benchmark's scaled inputs with another engine and compare.

    python benchmarks/oracle.py --scale 0.2                          # every source, Spark local[2]
    python benchmarks/oracle.py --scale 0.2 --source mnbvc --engine spark:local[1]

For each source it generates the benchmark's input (``scaled_inputs``), builds every config with the local engine
and with the other one, and compares each config and split: the rows of its files in order, as one table, with
``pyarrow.Table.equals`` (schema metadata included), and the cards but for their byte figures (Arrow's byte count
and the files' sizes follow how the rows are cut into files). Prints one line per config and split; exits 1 on any
difference.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scaled_inputs

#: Card lines that count bytes.
BYTE_FIGURES = re.compile(r"^\s*(num_bytes|download_size|dataset_size): \d+$", re.MULTILINE)


def tables(folder: Path) -> dict[tuple[str, str], pa.Table]:
    """(config folder, split) → the rows of its files in order, as one table."""
    found: dict[tuple[str, str], list[pa.Table]] = {}
    for path in sorted(folder.rglob("*.parquet")):
        config = path.parent.relative_to(folder).as_posix()
        found.setdefault((config, path.name.split("-")[0]), []).append(pq.read_table(path))
    return {key: pa.concat_tables(parts) for key, parts in found.items()}


def card_without_bytes(folder: Path) -> str:
    return BYTE_FIGURES.sub("", (folder / "README.md").read_text(encoding="utf-8"))


def compare(expected: Path, actual: Path) -> list[tuple[str, int, bool]]:
    """(config/split, rows, equal) for every config and split of either build, then ("card", 0, equal)."""
    old, new = tables(expected), tables(actual)
    lines = []
    for key in sorted(set(old) | set(new)):
        rows = (old.get(key) or new[key]).num_rows
        same = key in old and key in new and new[key].equals(old[key], check_metadata=True)
        lines.append((f"{key[0]}/{key[1]}", rows, same))
    lines.append(("card (but byte figures)", 0, card_without_bytes(expected) == card_without_bytes(actual)))
    return lines


def main(argv: list[str] | None = None) -> int:
    from convhub import registry
    from convhub.build import build_source

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.2)
    parser.add_argument("--source", action="append", choices=registry.names(), help="only this source")
    parser.add_argument("--engine", default="spark:local[2]", help="spark:<master> (default spark:local[2])")
    args = parser.parse_args(argv)
    engine, _, master = args.engine.partition(":")
    different = 0
    print(f"| source | config/split | rows | local {args.scale} vs {args.engine} |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="convhub-oracle-") as temp:
        for source in args.source or registry.names():
            made = scaled_inputs.make(source, Path(temp) / "input" / source, args.scale)
            started = time.perf_counter()
            local = build_source(source, Path(temp) / "local" / source, str(made.data_dir), num_proc=2)
            local_seconds = time.perf_counter() - started
            started = time.perf_counter()
            other = build_source(
                source,
                Path(temp) / "other" / source,
                str(made.data_dir),
                engine=engine,
                spark_master=master or None,
            )
            other_seconds = time.perf_counter() - started
            for name, rows, same in compare(local.output, other.output):
                different += not same
                print(f"| {source} | {name} | {rows:,} | {'equal' if same else 'DIFFERENT'} |", flush=True)
            print(
                f"| {source} | (seconds: local {local_seconds:.1f}, {args.engine} {other_seconds:.1f}) | | |"
            )
    print(f"\n{different} difference(s)")
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
