"""Which embedded engine should regroup MNBVC's multi-turn rows? A bake-off on the regrouping step alone.

    pip install ".[bench]"                                   # DuckDB and Polars
    python benchmarks/engine_bakeoff.py --mb 200             # about a minute
    python benchmarks/engine_bakeoff.py --mb 1000 --memory-limit 1GB

MNBVC's rows of one conversation are scattered across ~500 MB shards. Whatever the engine, a Python pure function
turns each source row into a *keyed row* (conversation key, 多轮序号, file, line, and the converted row as bytes):
that part is the same for every engine and is not measured here. What differs is the moving of data: bring every
conversation's rows together, in order, and hand them to Python one conversation at a time. This script writes
keyed rows as Parquet shards (conversations scattered at random over shards and positions, rows of 60 to 2,000
bytes, 2 to 24 rows a conversation), then runs each candidate in a fresh process (peak memory of the process tree,
``harness.TreeMemory``):

- ``today``: convhub's design until 2026-11-23 in miniature, the baseline: hash-partition the rows into files
  of about 64 MiB with Python, then read each partition, sort it in Python and walk its conversations;
- ``arrow``: ``pyarrow.Table.sort_by`` on the whole input (in memory), groups cut where the key changes;
- ``datasets``: ``Dataset.from_parquet(...).sort(...)`` (an index over memory-mapped Arrow files);
- ``duckdb``: ``ORDER BY`` over ``read_parquet`` with a memory limit (spills to disk), read as Arrow batches;
- ``polars``: ``scan_parquet(...).sort(...)`` on the streaming engine, read in slices;
- ``duckdb-keys`` (what convhub's local build has done since, ``convhub.engine.grouping.local_groupby``) and ``polars-keys``:
  the engine sorts only the keys (key, 多轮序号, file, line, and where the payload is), and each payload is read
  in that order with ``os.pread`` from its shard's payload file: the payloads never pass through the engine, so
  its memory follows the keys, not the rows.

Every candidate prints the number of conversations and rows and a digest of (key, line order) per
conversation; the table says whether all agree, and each one's time and memory as a ratio of ``today``'s,
measured in the same run.
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import run_case

SORT_KEYS = ["key", "order", "file", "line"]

#: Shared by every candidate: walk (key, line, payload) rows sorted by SORT_KEYS, one conversation at a time.
CONSUMER = """
import hashlib, json, sys
class Groups:
    def __init__(self):
        self.groups = self.rows = self.digest = 0  # the digest is a sum: the order of conversations is free
        self.key = None
        self.lines = []
    def add(self, keys, lines, payloads):
        for key, line, payload in zip(keys, lines, payloads):
            if key != self.key:
                self.flush()
                self.key = key
            self.lines.append(line)
            self.rows += 1
    def flush(self):
        if self.key is not None:
            self.groups += 1
            digest = hashlib.sha256(f"{self.key}:{self.lines}".encode()).digest()
            self.digest = (self.digest + int.from_bytes(digest[:8], "big")) % 2**64
        self.key, self.lines = None, []
    def report(self):
        self.flush()
        print(json.dumps({"groups": self.groups, "rows": self.rows, "digest": f"{self.digest:016x}"}))
groups = Groups()
files = sys.argv[2:]
"""

#: The key-only candidates: the engine sorts the keys (about 40 bytes a row) and each payload is read in that order
#: with ``os.pread`` from its shard's payload file, so the payloads never pass through the engine.
KEYS_ONLY = """
import os
key_files = [path.replace("keyed-", "keys-") for path in files]
payloads = [os.open(path.replace("keyed-", "payload-").replace(".parquet", ".bin"), os.O_RDONLY) for path in files]
def walk(batches):
    for batch in batches:
        found = [os.pread(payloads[file], length, offset) for file, offset, length in zip(
            batch.column("file").to_pylist(), batch.column("offset").to_pylist(), batch.column("length").to_pylist())]
        groups.add(batch.column("key").to_pylist(), batch.column("line").to_pylist(), found)
    groups.report()
"""

CANDIDATES = {
    "today": CONSUMER
    + """
import marshal, os, tempfile, zlib, pyarrow.parquet as pq
total = sum(os.path.getsize(path) for path in files)
count = max(1, -(-total // (64 << 20)))
with tempfile.TemporaryDirectory(dir=sys.argv[1]) as folder:
    outs = [open(os.path.join(folder, f"p{i}"), "wb") for i in range(count)]
    for path in files:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=8192):
            columns = batch.to_pydict()
            for row in zip(columns["key"], columns["order"], columns["file"], columns["line"], columns["payload"]):
                marshal.dump(row, outs[zlib.crc32(row[0].encode()) % count])
    for out in outs:
        out.close()
    for i in range(count):
        rows = []
        with open(os.path.join(folder, f"p{i}"), "rb") as handle:
            while True:
                try:
                    rows.append(marshal.load(handle))
                except EOFError:
                    break
        rows.sort(key=lambda row: row[:4])
        groups.add([r[0] for r in rows], [r[3] for r in rows], [r[4] for r in rows])
        groups.flush()
groups.report()
""",
    "arrow": CONSUMER
    + """
import pyarrow.parquet as pq
table = pq.read_table(files).sort_by([(name, "ascending") for name in ("key", "order", "file", "line")])
for batch in table.to_batches(max_chunksize=8192):
    groups.add(batch.column("key").to_pylist(), batch.column("line").to_pylist(), batch.column("payload"))
groups.report()
""",
    "datasets": CONSUMER
    + """
import datasets
datasets.disable_progress_bars()
data = datasets.Dataset.from_parquet(files, cache_dir=sys.argv[1]).sort(["key", "order", "file", "line"])
for batch in data.with_format("arrow").iter(batch_size=8192):
    groups.add(batch.column("key").to_pylist(), batch.column("line").to_pylist(), batch.column("payload"))
groups.report()
""",
    "duckdb": CONSUMER
    + """
import duckdb
connection = duckdb.connect(config={"memory_limit": sys.argv[1].split("|")[1], "threads": 2,
                                    "temp_directory": sys.argv[1].split("|")[0], "preserve_insertion_order": False})
connection.execute("SET enable_progress_bar = false")
listed = ", ".join("'" + path + "'" for path in files)
query = f"SELECT key, line, payload FROM read_parquet([{listed}]) ORDER BY key, \\"order\\", file, line"
reader = connection.sql(query).to_arrow_reader(8192)
for batch in reader:
    groups.add(batch.column("key").to_pylist(), batch.column("line").to_pylist(), batch.column("payload"))
groups.report()
""",
    "duckdb-keys": CONSUMER
    + KEYS_ONLY
    + """
import duckdb
connection = duckdb.connect(config={"memory_limit": sys.argv[1].split("|")[1], "threads": 2,
                                    "temp_directory": sys.argv[1].split("|")[0], "preserve_insertion_order": False})
connection.execute("SET enable_progress_bar = false")
listed = ", ".join("'" + path + "'" for path in key_files)
query = f"SELECT key, line, file, \\"offset\\", length FROM read_parquet([{listed}]) ORDER BY key, \\"order\\", file, line"
walk(connection.sql(query).to_arrow_reader(8192))
""",
    "polars-keys": CONSUMER
    + KEYS_ONLY
    + """
import polars as pl
frame = pl.scan_parquet(key_files).sort(["key", "order", "file", "line"]).select(["key", "line", "file", "offset", "length"])
walk(batch.to_arrow() for batch in frame.collect(engine="streaming").iter_slices(8192))
""",
    "polars": CONSUMER
    + """
import polars as pl
frame = pl.scan_parquet(files).sort(["key", "order", "file", "line"]).select(["key", "line", "payload"])
collected = frame.collect(engine="streaming")
for batch in collected.iter_slices(8192):
    groups.add(batch["key"].to_list(), batch["line"].to_list(), batch["payload"])
groups.report()
""",
}


def write_keyed_rows(folder: Path, megabytes: float, shards: int, seed: int = 0) -> tuple[list[str], float]:
    """Parquet shards of keyed rows totalling about ``megabytes`` of payload; their paths and payload MiB."""
    rng = random.Random(seed)
    target = megabytes * 2**20
    conversations, size = [], 0
    while size < target:
        rows = rng.randint(2, 24)
        lengths = [rng.randint(60, 2000) for _ in range(rows)]
        conversations.append((f"ShareGPT/{rng.getrandbits(64):016x}", lengths))
        size += sum(lengths)
    placed = [(key, order, length) for key, lengths in conversations for order, length in enumerate(lengths)]
    rng.shuffle(placed)
    per_shard = -(-len(placed) // shards)
    paths = []
    for index in range(shards):
        chunk = placed[index * per_shard : (index + 1) * per_shard]
        table = pa.table(
            {
                "key": [key for key, _, _ in chunk],
                "order": pa.array([order for _, order, _ in chunk], pa.int32()),
                "file": pa.array([index] * len(chunk), pa.int32()),
                "line": pa.array(range(1, len(chunk) + 1), pa.int64()),
                "payload": [rng.randbytes(length) for _, _, length in chunk],
            }
        )
        path = folder / f"keyed-{index:05d}.parquet"
        pq.write_table(table, path)
        paths.append(str(path))
        lengths = pa.array([length for _, _, length in chunk], pa.int64())
        offsets = pa.array([0, *itertools.accumulate(length for _, _, length in chunk)][:-1], pa.int64())
        keys = (
            table.drop_columns(["payload"]).append_column("offset", offsets).append_column("length", lengths)
        )
        pq.write_table(keys, folder / f"keys-{index:05d}.parquet")
        with open(folder / f"payload-{index:05d}.bin", "wb") as handle:
            for payload in table.column("payload").to_pylist():
                handle.write(payload)
    return paths, size / 2**20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mb", type=float, default=200, help="payload megabytes of keyed rows (default 200)")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--memory-limit", default="1GB", help="DuckDB's memory_limit (it spills past it)")
    parser.add_argument("--engines", default=",".join(CANDIDATES), help="comma-separated candidates")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="convhub-bakeoff-") as scratch:
        files, size = write_keyed_rows(Path(scratch), args.mb, args.shards)
        print(f"{len(files)} shards, {size:.0f} MiB of payload\n")
        print(
            "| engine | seconds | MiB/s | peak MiB | conversations | rows | digest | time vs today | memory vs today |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        baseline = None
        for name in args.engines.split(","):
            work = f"{scratch}|{args.memory_limit}" if name.startswith("duckdb") else scratch
            try:
                seconds, peak, result = run_case(CANDIDATES[name], [work, *files])
            except RuntimeError as error:
                lines = str(error).strip().splitlines()
                reason = next((line for line in reversed(lines) if "Error" in line), lines[-1])
                print(f"| {name} | failed: {reason.strip()[:140]} |||||||")
                continue
            baseline = baseline or (seconds, peak)
            print(
                f"| {name} | {seconds:.1f} | {size / seconds:.1f} | {peak:.0f} | {result['groups']:,} | "
                f"{result['rows']:,} | {result['digest']} | {seconds / baseline[0]:.2f}x | {peak / baseline[1]:.2f}x |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
