"""How fast could MNBVC's multi-turn ``sessions`` build be if its rows never became Python objects? A floor.

    python benchmarks/native_floor.py --mb 400                               # about two minutes
    python benchmarks/native_floor.py --mb 1536 --repeat 2 --workdir /tmp/nf  # the benchmark's full size

Issue 16 asks the ``sessions`` build for 1.0x the speed of ``load_dataset("json")`` on MNBVC's input. The build
spends its time in Python per row; this script measures what an engine would take with no Python per row at all,
to say whether rewriting the conversion natively could meet the target. It writes multi-turn shards like the
benchmark's (``mnbvc_synthetic``: conversations scattered over shards, 15% of ``扩展字段`` not valid JSON), then
runs each case in a fresh process, as ``bench.py`` does:

- ``load_dataset('json')``: the baseline. It parses the lines into Arrow (pyarrow's C++ reader, every core)
  and writes them to its cache as Arrow IPC, in the input's order;
- ``arrow: read`` and ``arrow: read, write Arrow IPC``: the same two steps without ``datasets`` around them;
- ``arrow: read, regroup, write Parquet``: the least a native ``sessions`` build does. It keys each row by
  regular expressions on ``扩展字段`` (valid or not), sorts the keys, gathers the rows into conversation order
  and writes the conversations (a list of turns each) as Parquet. It holds the whole input in memory, which a
  build may not (peak at most 1 GiB), and keeps none of what makes convhub's rows exact (the raw row of each
  question for ``export``, notes, dates, language);
- ``duckdb: read, regroup, write Parquet``: the same in SQL, with a memory limit of 1 GB (the build's) and
  of 16 GB;
- ``convhub build sessions``: the real build, with ``--num-proc 2``.

Each case prints its rows (a regrouping case: its conversations, which must be the build's); the table gives
seconds, the peak memory of the process tree and the speed as a ratio of the baseline's time in the same round
(above 1 = faster than the baseline).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import mnbvc_synthetic
from harness import BUILD, GENERIC_LOADER, run_case

ARROW_READ = """
import sys
import pyarrow as pa, pyarrow.json as pj
table = pa.concat_tables([pj.read_json(path) for path in sys.argv[1:]])
print(table.num_rows)
"""

ARROW_IPC = (
    ARROW_READ
    + """
import tempfile
with tempfile.TemporaryDirectory() as folder:
    with pa.OSFile(folder + "/rows.arrow", "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
"""
)

#: A row's conversation: its 扩展字段's 会话 (else its id) within its 来源; its place: 多轮序号. One regular
#: expression reads 扩展字段 whether it is JSON or MNBVC's loose ``{"会话": c01, "多轮序号": 2}``.
ARROW_SESSIONS = (
    ARROW_READ
    + r"""
import tempfile
import numpy as np
import pyarrow.compute as pc, pyarrow.parquet as pq
extension = pc.struct_field(table.column("元数据"), "扩展字段")
def field(name, pattern):  # a JSON null is no value
    value = pc.struct_field(pc.extract_regex(extension, f'"{name}"\\s*:\\s*"?(?P<v>{pattern})'), "v")
    return pc.if_else(pc.equal(value, "null"), pa.scalar(None, pa.string()), value)
keys = pa.table({
    "source": table.column("来源"),
    "conversation": pc.coalesce(field("会话", r'[^",}\s]+'), table.column("id")),
    "order": pc.cast(field("多轮序号", "[0-9]+"), pa.int64()),
})
order = pc.sort_indices(keys, [("source", "ascending"), ("conversation", "ascending"), ("order", "ascending")])
rows, keys = table.take(order).combine_chunks(), keys.take(order).combine_chunks()
source, conversation = keys.column("source").chunk(0), keys.column("conversation").chunk(0)
changed = pc.or_(pc.not_equal(source[1:], source[:-1]), pc.not_equal(conversation[1:], conversation[:-1]))
starts = np.concatenate([[0], pc.indices_nonzero(pc.fill_null(changed, True)).to_numpy().astype(np.int64) + 1, [len(rows)]])
turns = pa.StructArray.from_arrays(
    [rows.column(name).chunk(0) for name in ("问", "答", "时间")] + [keys.column("order").chunk(0)],
    ["question", "answer", "date", "order"],
)
firsts = pa.array(starts[:-1])
sessions = pa.table({
    "source": source.take(firsts),
    "conversation_id": conversation.take(firsts),
    "turns": pa.ListArray.from_arrays(pa.array(starts.astype("int32")), turns),
})
with tempfile.TemporaryDirectory() as folder:
    pq.write_table(sessions, folder + "/sessions.parquet")
print(sessions.num_rows)  # conversations: the last line is the case's count
"""
)

DUCKDB_SESSIONS = r"""
import sys, tempfile, duckdb
limit, files = sys.argv[1], ", ".join(f"'{path}'" for path in sys.argv[2:])
metadata = 'STRUCT(create_time VARCHAR, "问题明细" VARCHAR, "回答明细" VARCHAR, "扩展字段" VARCHAR)'
def field(name):
    return (
        f"CASE WHEN json_valid(extension) THEN json_extract_string(extension, '$.{name}') "
        f"ELSE regexp_extract(extension, '\"{name}\"\\s*:\\s*\"?([^\",}}]*)', 1) END"
    )
with tempfile.TemporaryDirectory() as folder:
    connection = duckdb.connect()
    connection.execute(f"SET threads=2; SET memory_limit='{limit}'; SET preserve_insertion_order=false; SET temp_directory='{folder}/spill'")
    connection.execute(f'''
    COPY (
      WITH rows AS (
        SELECT *, struct_extract("元数据", '扩展字段') AS extension
        FROM read_json([{files}], format='newline_delimited', columns={{
          'id': 'VARCHAR', '问': 'VARCHAR', '答': 'VARCHAR', '来源': 'VARCHAR', '时间': 'VARCHAR',
          '元数据': '{metadata}'}})
      ), keyed AS (
        SELECT *, coalesce(NULLIF({field("会话")}, ''), id) AS conversation, TRY_CAST({field("多轮序号")} AS BIGINT) AS turn
        FROM rows
      )
      SELECT "来源" AS source, conversation AS conversation_id,
             list(struct_pack(question := "问", answer := "答", date := "时间", "order" := turn) ORDER BY turn)
               AS turns
      FROM keyed GROUP BY "来源", conversation
    ) TO '{folder}/sessions.parquet' (FORMAT parquet)''')
    print(connection.execute(f"SELECT count(*) FROM '{folder}/sessions.parquet'").fetchone()[0])
"""


def cases(data_dir: Path, files: list[str]) -> list[tuple[str, str, list[str]]]:
    return [
        ("load_dataset('json')", GENERIC_LOADER, files),
        ("arrow: read", ARROW_READ, files),
        ("arrow: read, write Arrow IPC", ARROW_IPC, files),
        ("arrow: read, regroup, write Parquet", ARROW_SESSIONS, files),
        ("duckdb: read, regroup, write Parquet, 1 GB", DUCKDB_SESSIONS, ["1GB", *files]),
        ("duckdb: read, regroup, write Parquet, 16 GB", DUCKDB_SESSIONS, ["16GB", *files]),
        ("convhub build sessions, num_proc=2", BUILD, ["mnbvc", str(data_dir), '["sessions"]', "2"]),
    ]


def run_rounds(data_dir: Path, files: list[str], repeat: int) -> tuple[dict[str, list[dict]], dict[str, str]]:
    """Every case ``repeat`` times, round by round: name → its runs (seconds, peak MiB, rows, ratio to the
    baseline of the same round), and name → why it failed."""
    runs: dict[str, list[dict]] = {}
    failures: dict[str, str] = {}
    for _ in range(repeat):
        baseline = None
        for name, code, case_args in cases(data_dir, files):
            try:
                seconds, peak, rows = run_case(code, case_args)
            except RuntimeError as error:  # DuckDB's list aggregate can exceed its memory limit
                lines = str(error).strip().splitlines()
                failures[name] = next((line for line in reversed(lines) if "Error" in line), lines[-1])[:160]
                print(f"{name}: failed: {failures[name]}", flush=True)
                continue
            baseline = baseline or seconds
            runs.setdefault(name, []).append(
                {"s": seconds, "peak": peak, "rows": rows, "ratio": baseline / seconds}
            )
            print(f"{name}: {seconds:.2f} s, {peak:.0f} MiB, {rows:,} rows", flush=True)
    return runs, failures


def print_summary(runs: dict[str, list[dict]], failures: dict[str, str]) -> None:
    print(
        "\n| case | rows | seconds, median | peak MiB | speed vs load_dataset('json'), median (lowest-highest) |"
    )
    print("|---|---|---|---|---|")
    for name, done in runs.items():
        ratios = [run["ratio"] for run in done]
        print(
            f"| {name} | {done[0]['rows']:,} | {statistics.median(run['s'] for run in done):.2f} "
            f"| {max(run['peak'] for run in done):.0f} "
            f"| {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}x) |"
        )
    for name, reason in failures.items():
        print(f"| {name} | | failed | | {reason} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=400, help="megabytes of multi-turn rows")
    parser.add_argument(
        "--repeat", type=int, default=1, help="run every case this many times, round by round"
    )
    parser.add_argument(
        "--workdir", type=Path, help="keep the generated input here (reused at the same size)"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="convhub-native-") as scratch:
        data_dir = (args.workdir or Path(scratch)) / f"mnbvc-multiturn-{args.mb:g}mb"
        shards = data_dir / "multiturn"
        if not shards.is_dir():
            mnbvc_synthetic.generate(shards, args.mb, 8, use_gzip=False, seed=0)
        files = [str(path) for path in sorted(shards.glob("*.jsonl"))]
        size_mib = sum(Path(path).stat().st_size for path in files) / 2**20
        print(f"input: {len(files)} multi-turn shards, {size_mib:.0f} MiB in {data_dir}\n")
        print_summary(*run_rounds(data_dir, files, args.repeat))
    return 0


if __name__ == "__main__":
    sys.exit(main())
