"""Which path MNBVC's multi-turn rows take: converted on columns, or by Python (the rows the columnar pass cannot
say exactly), and so which conversations are made on columns and which in Python.

    python benchmarks/mnbvc_paths.py DATA_DIR

Runs the build's first pass (``MnbvcBuilder.keyed_batches``) over every multi-turn file of ``DATA_DIR`` in this
process, and prints the shares and the seconds it took. ``bench.py`` prints it beside MNBVC's cases.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import datasets
import pyarrow as pa
import pyarrow.compute as pc

from builders.mnbvc.builder import MnbvcBuilder
from convhub.engine.input_shards import GroupShard


def paths(data_dir: str) -> dict:
    """Rows and conversations of each path, and the seconds of the pass."""
    builder = MnbvcBuilder(config_name="sessions", data_dir=data_dir)
    manager = datasets.DownloadManager(dataset_name="mnbvc", data_dir=data_dir)
    groups = [shard for shard in builder.shards(manager)["train"] if isinstance(shard, GroupShard)]
    started = time.perf_counter()
    tables = [
        pa.table({"group": batch.column("group"), "python": pc.is_valid(batch.column("payload"))})
        for group in groups
        for index in range(len(group.files))
        for batch in builder.keyed_batches(group, index)
    ]
    seconds = time.perf_counter() - started
    if not tables:
        return {"rows": 0, "seconds": round(seconds, 1)}
    rows = pa.concat_tables(tables)
    python_rows = pc.sum(rows.column("python")).as_py() or 0
    by_conversation = rows.group_by("group").aggregate([("python", "any")])
    python_conversations = pc.sum(by_conversation.column("python_any")).as_py() or 0
    return {
        "rows": rows.num_rows,
        "rows_by_python": python_rows,
        "conversations": by_conversation.num_rows,
        "conversations_by_python": python_conversations,
        "seconds": round(seconds, 1),
    }


def summary(found: dict) -> str:
    """One line: the share of rows and conversations on each path."""
    if not found["rows"]:
        return "MNBVC paths: no multi-turn row"
    rows, conversations = found["rows"], found["conversations"]
    python_rows, python_conversations = found["rows_by_python"], found["conversations_by_python"]
    return (
        f"MNBVC paths: {rows - python_rows:,} of {rows:,} multi-turn rows converted on columns "
        f"({(rows - python_rows) / rows:.1%}), {python_rows:,} by Python ({python_rows / rows:.1%}); "
        f"{conversations - python_conversations:,} of {conversations:,} conversations made on columns "
        f"({(conversations - python_conversations) / conversations:.1%}); first pass {found['seconds']} s "
        "in one process"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir")
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    args = parser.parse_args()
    datasets.disable_progress_bars()
    found = paths(args.data_dir)
    print(json.dumps(found) if args.json else summary(found))


if __name__ == "__main__":
    sys.exit(main())
