"""Where a one-process MNBVC ``sessions`` build spends its time, stage by stage, with the build's own functions.

    python benchmarks/mnbvc_stages.py --mb 400 --repeat 3 --workdir /tmp/nf   # about three minutes

Issue 35 asks for the build's conversion on columns; ``native_floor.py`` says how fast a build could be at best.
This says which of the build's stages the time goes to, as a profiler cannot say it fairly (py-spy gave a system
call five times its timed share). One process runs the stages of a build in order on the multi-turn files, with
everything in memory and the cycle collector off, and times each with a clock around its calls:

- ``read and orjson``: a first pass over the lines (``json_lines.iter_lines``), each parsed by orjson alone: what
  the least parse costs, for the reader's share beside it;
- ``the engine's reader``: ``json_lines.read_objects`` (the exact parse: integers past 64 bits, a JSON document
  given as JSON Lines, blank lines, errors naming the line);
- ``key and convert``: MNBVC's ``multiturn.key_row`` per row (its group, its order, its converted pair as
  ``marshal`` bytes): pass 1 of a build, without the writing of keys and payloads to files;
- ``sort``: the keyed rows in (group, order) order, in memory (a build sorts keys with DuckDB, out of core);
- ``records``: ``multiturn.records_from_sorted`` (the pairs, the turns, the session's ``extra``, the language);
- ``statistics``: ``SplitStats.add`` per record, for the card's table;
- ``Arrow tables`` and ``Parquet``: ``arrow_rows.rows_table`` a writer batch at a time, and convhub's writer.

The real build (``convhub build sessions --num-proc 1``) runs beside it in each round; what it takes beyond the
stages' sum is what bounds its memory (pass 1 in a forked process writing keys and payloads to files, DuckDB's
sort, pass 2 reading them back), its checks of each record, the card, and its start. Each run is a fresh
process (``harness.run_case``). The input is ``native_floor.py``'s (``mnbvc_synthetic``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import native_floor
from harness import BUILD, run_case

STAGES = r"""
import gc, sys, tempfile, time
import convhub.cli  # first, as the command does (its allocator settings)
import orjson
from convhub.builders.mnbvc import multiturn
from convhub import schema
from convhub.engine.readers import json_lines
from convhub.engine.writers.arrow_rows import rows_table
from convhub.engine.writers.parquet_writer import ParquetWriter
from convhub.stats import SplitStats
from convhub.errors import Notes
gc.disable()
files = sys.argv[1:]
clock = time.perf_counter
spent = dict.fromkeys(["read and orjson", "the engine's reader", "key and convert", "sort", "records",
                       "statistics", "Arrow tables", "Parquet"], 0.0)
for path in files:  # the least a parse costs, for the reader's share beside it
    start = clock()
    for _, _, raw in json_lines.iter_lines(path):
        orjson.loads(raw)
    spent["read and orjson"] += clock() - start
def timed(items, stage):  # items one at a time, the time each took to come counted to the stage
    items = iter(items)
    while True:
        start = clock()
        item = next(items, None)
        spent[stage] += clock() - start
        if item is None:
            return
        yield item
groups = {}
for index, path in enumerate(files):
    for number, _, raw, row in timed(json_lines.read_objects(path, "MNBVC"), "the engine's reader"):
        start = clock()
        keyed = multiturn.key_row(path, number, row, raw)
        if keyed is not None:
            group, order, payload = keyed
            groups.setdefault(group, []).append(((group, (*order, index, number)), payload))
        spent["key and convert"] += clock() - start
start = clock()
ordered = [row for group in sorted(groups) for row in sorted(groups[group])]
del groups
spent["sort"] = clock() - start
records = multiturn.records_from_sorted(iter(ordered), files, Notes())
stats = SplitStats()
with tempfile.TemporaryDirectory() as folder:
    writer = ParquetWriter(schema.SESSIONS_FEATURES, folder + "/sessions.parquet")
    batch, count = [], 0
    def write(batch):
        start = clock()
        table = rows_table(batch, writer.schema)
        middle = clock()
        writer.write_table(table)
        spent["Arrow tables"] += middle - start
        spent["Parquet"] += clock() - middle
    for record in timed(records, "records"):
        start = clock()
        count += 1
        stats.add(record)
        spent["statistics"] += clock() - start
        batch.append(record)
        if len(batch) == writer.writer_batch_size:
            write(batch)
            batch = []
    if batch:
        write(batch)
    start = clock()
    writer.finalize()
    spent["Parquet"] += clock() - start
import json
print(json.dumps({"spent": spent, "records": count}))  # the last line: what harness.run_case reads
"""


def run_rounds(data_dir: Path, files: list[str], repeat: int) -> tuple[dict[str, list[float]], list[float]]:
    """The stages and the build ``repeat`` times, round by round: stage → its seconds, and the build's."""
    spent: dict[str, list[float]] = {}
    builds = []
    for _ in range(repeat):
        _, _, printed = run_case(STAGES, files)
        for stage, seconds in printed["spent"].items():
            spent.setdefault(stage, []).append(seconds)
        taken, _, rows = run_case(BUILD, ["mnbvc", str(data_dir), '["sessions"]', "1"])
        builds.append(taken)
        stages = ", ".join(f"{stage} {seconds:.2f}" for stage, seconds in printed["spent"].items())
        print(f"stages ({printed['records']:,} records): {stages}; the build: {taken:.2f} s, {rows:,} rows")
    return spent, builds


def print_summary(spent: dict[str, list[float]], builds: list[float]) -> None:
    build = statistics.median(builds)
    print(f"\nthe build, 1 process: {build:.2f} s, median ({min(builds):.2f}-{max(builds):.2f})\n")
    print("| stage | seconds, median (lowest-highest) | share of the build's time |")
    print("|---|---|---|")
    for stage, runs in spent.items():
        median = statistics.median(runs)
        print(f"| {stage} | {median:.2f} ({min(runs):.2f}-{max(runs):.2f}) | {median / build:.0%} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=400, help="megabytes of multi-turn rows")
    parser.add_argument("--repeat", type=int, default=1, help="run the stages and the build this many times")
    parser.add_argument(
        "--workdir", type=Path, help="keep the generated input here (reused at the same size)"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="convhub-stages-") as scratch:
        data_dir, files = native_floor.multiturn_input(args.mb, args.workdir or Path(scratch))
        print_summary(*run_rounds(data_dir, files, args.repeat))
    return 0


if __name__ == "__main__":
    sys.exit(main())
