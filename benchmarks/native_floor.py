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
- two ceilings of a build that parses each row in Python, one process each, the whole input in memory, no check
  and no notes: ``python per row, least conversion`` (orjson per line, each question's ``extra`` as a build
  writes it, ``sessions`` rows as dicts, ``from_pylist``, convhub's Parquet writer), and ``python per row for
  orjson only, the rest on columns`` (the same parse and ``extra``, then Arrow: one sort, turns cut by offsets).
  They say how fast the design of today's build could be at best, and the columnar design issue 35 proposes;
- ``arrow: read, raw lines kept, regroup on columns, write Parquet``: no Python per row, each question's
  ``extra`` its raw line as read (texts included) instead of the row re-serialized without its texts;
- ``convhub build sessions``: the real build, with ``--num-proc 1`` and ``2``.

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

#: The ``keys`` of the rows of an Arrow ``table`` of multi-turn lines, read by regular expressions: a row's
#: conversation is its 扩展字段's 会话 (else its id) within its 来源, its place its 多轮序号 (null when none). One
#: regular expression reads 扩展字段 whether it is JSON or MNBVC's loose ``{"会话": c01, "多轮序号": 2}``.
REGEX_KEYS = r"""
import pyarrow.compute as pc
extension = pc.struct_field(table.column("元数据"), "扩展字段")
def field(name, pattern):  # a JSON null is no value
    value = pc.struct_field(pc.extract_regex(extension, f'"{name}"\\s*:\\s*"?(?P<v>{pattern})'), "v")
    return pc.if_else(pc.equal(value, "null"), pa.scalar(None, pa.string()), value)
keys = pa.table({
    "source": table.column("来源"),
    "session": pc.coalesce(field("会话", r'[^",}\s]+'), table.column("id")),
    "order": pc.cast(field("多轮序号", "[0-9]+"), pa.int64()),
})
"""

ARROW_SESSIONS = (
    ARROW_READ
    + REGEX_KEYS
    + r"""
import tempfile
import numpy as np
import pyarrow.parquet as pq
order = pc.sort_indices(keys, [("source", "ascending"), ("session", "ascending"), ("order", "ascending")])
rows, keys = table.take(order).combine_chunks(), keys.take(order).combine_chunks()
source, conversation = keys.column("source").chunk(0), keys.column("session").chunk(0)
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


#: What both Python ceilings below read per line: orjson; the key from 扩展字段 (orjson, else the regular
#: expression of the cases above); each question turn's ``extra``, the row without 问/答 with its file, line, keys
#: and 扩展字段, as orjson text (what makes a build's rows exportable). No check of any kind, no notes or dates.
PYTHON_PARSE = r"""
import gc, re, sys, tempfile
gc.disable()  # the whole input is held as Python values: collections over them would measure the holding
import orjson, pyarrow as pa
from convhub import schema
from convhub.engine.writers.parquet_writer import ParquetWriter
loose = {name: re.compile(f'"{name}"\\s*:\\s*"?([^",}}\\s]+)') for name in ("会话", "多轮序号")}
def extension_of(text):
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return {name: found.group(1) for name, pattern in loose.items() if (found := pattern.search(text))}
def parsed_rows(paths):  # each line's conversation, 多轮序号, 问, 答 and its question's extra
    for path in paths:
        with open(path, "rb") as lines:
            for number, line in enumerate(lines, 1):
                row = orjson.loads(line)
                extension = extension_of(row["元数据"]["扩展字段"])
                session = extension.get("会话")
                key = (row["来源"], str(row["id"] if session in (None, "") else session))
                extra = {"file": path, "line": number, "keys": list(row), "扩展字段": extension}
                extra["row"] = {name: value for name, value in row.items() if name not in ("问", "答")}
                yield key, extension.get("多轮序号"), row["问"], row["答"], orjson.dumps(extra).decode()
"""

#: The least a build that converts each row in Python does: ``PYTHON_PARSE``, conversations gathered in a dict
#: (the whole input in memory), ``sessions`` rows as dicts of convhub's schema, ``pa.Table.from_pylist`` and
#: convhub's Parquet writer (its options: content-defined chunking, Snappy, a page index). One process. No language
#: or statistics: a ceiling for the design that converts rows in Python.
PYTHON_PER_ROW = (
    PYTHON_PARSE
    + r"""
conversations = {}
for key, *turn in parsed_rows(sys.argv[1:]):
    conversations.setdefault(key, []).append(turn)
def record(key, rows):
    rows.sort(key=lambda row: int(row[0]) if str(row[0]).isdigit() else 0)
    turns = []
    for index, (_, question, answer, extra) in enumerate(rows):
        turns.append({**schema.empty_turn(f"{index}q", "问", "user", question), "extra": extra})
        if answer:
            turns.append({**schema.empty_turn(f"{index}a", "答", "assistant", answer), "reply_to": f"{index}q"})
    return {
        "conversation_id": "/".join(key), "source": "mnbvc", "subset": f"多轮对话/{key[0]}", "language": "zh",
        "speakers": ["问", "答"], "sessions": [schema.empty_session(key[1], turns)], "questions": [], "extra": None,
    }
with tempfile.TemporaryDirectory() as folder:
    writer = ParquetWriter(schema.SESSIONS_FEATURES, folder + "/sessions.parquet")
    batch = []
    for key, rows in conversations.items():
        batch.append(record(key, rows))
        if len(batch) == writer.writer_batch_size:
            writer.write_table(pa.Table.from_pylist(batch, schema=writer.schema))
            batch = []
    if batch:
        writer.write_table(pa.Table.from_pylist(batch, schema=writer.schema))
    writer.finalize()
print(len(conversations))
"""
)


#: ``sessions`` written on columns from two tables of the same rows in input order: ``keys`` (source, session,
#: order) and ``rows`` (question, answer or null, the question's ``extra``). One Arrow sort, each conversation's
#: turns cut from the sorted rows by offsets (turn ids, answers interleaved, the schema's empty lists), one
#: ``sessions`` table per batch of conversations, convhub's Parquet writer. Prints the conversations.
COLUMNS_TO_SESSIONS = r"""
import tempfile
import numpy as np
import pyarrow.compute as pc
from convhub.builders.mnbvc.turn_columns import struct_array
order = pc.sort_indices(keys, [("source", "ascending"), ("session", "ascending"), ("order", "ascending")])
keys, rows = keys.take(order).combine_chunks(), rows.take(order).combine_chunks()
source, session = keys.column("source").chunk(0), keys.column("session").chunk(0)
changed = pc.or_(pc.not_equal(source[1:], source[:-1]), pc.not_equal(session[1:], session[:-1]))
starts = np.concatenate([[0], pc.indices_nonzero(changed).to_numpy().astype(np.int64) + 1])
session_type = schema.SESSIONS_FEATURES.arrow_schema.field("sessions").type.value_type
turns_type = session_type.field("turns").type
with tempfile.TemporaryDirectory() as folder:
    writer = ParquetWriter(schema.SESSIONS_FEATURES, folder + "/sessions.parquet")
    bounds = [*starts[:: writer.writer_batch_size], len(rows)]
    for first, stop in zip(bounds, bounds[1:]):
        part = {name: rows.column(name).chunk(0).slice(first, stop - first) for name in rows.column_names}
        begins = starts[(starts >= first) & (starts < stop)] - first
        pairs = stop - first
        answered = part["answer"].is_valid().to_numpy(zero_copy_only=False)
        per_pair = answered.astype(np.int64) + 1
        turn_starts = np.concatenate([[0], np.cumsum(per_pair)])
        is_answer = np.zeros(turn_starts[-1], dtype=bool)
        is_answer[turn_starts[:-1][answered] + 1] = True
        pair_of_turn = np.repeat(np.arange(pairs), per_pair)
        index_in_session = pair_of_turn - np.repeat(begins, np.diff([*begins, pairs]))[pair_of_turn]
        mask = pa.array(is_answer)
        take = pa.array(pair_of_turn)
        prefix = pa.array(index_in_session).cast(pa.string())
        turns = struct_array(turns_type.value_type, {
            "turn_id": pc.binary_join_element_wise(prefix, pc.if_else(mask, "a", "q"), ""),
            "speaker": pc.if_else(mask, "答", "问"),
            "role": pc.if_else(mask, "assistant", "user"),
            "text": pc.if_else(mask, part["answer"].take(take), part["question"].take(take)),
            "reply_to": pc.if_else(mask, pc.binary_join_element_wise(prefix, pa.scalar("q"), ""), None),
            "extra": pc.if_else(mask, None, part["extra"].take(take)),
        }, len(is_answer))
        turn_offsets = pa.array(np.concatenate([turn_starts[begins], [len(is_answer)]]).astype(np.int32))
        count = len(begins)
        firsts = pa.array(begins + first)
        session_ids = session.take(firsts)
        sessions = struct_array(session_type, {
            "session_id": session_ids,
            "turns": pa.ListArray.from_arrays(turn_offsets, turns),
        }, count)
        one_each = pa.array(np.arange(count + 1, dtype=np.int32))
        sources = source.take(firsts)
        table = pa.table({
            "conversation_id": pc.binary_join_element_wise(sources, session_ids, "/"),
            "source": pa.array(["mnbvc"] * count),
            "subset": pc.binary_join_element_wise(pa.scalar("多轮对话"), sources, "/"),
            "language": pa.array(["zh"] * count),
            "speakers": pa.array([["问", "答"]] * count),
            "sessions": pa.ListArray.from_arrays(one_each, sessions),
            "questions": pa.array([[]] * count, writer.schema.field("questions").type),
            "extra": pa.nulls(count, pa.string()),
        })
        writer.write_table(table)
    writer.finalize()
print(len(starts))
"""


#: ``PYTHON_PARSE`` (orjson per line, its key, its ``extra`` as orjson text), with every later step on columns:
#: each row's values appended to lists, then ``COLUMNS_TO_SESSIONS``. Python per row only where the rows'
#: exactness needs it (their parse and their raw text), as issue 35 proposes. One process.
PYTHON_PER_ROW_COLUMNS = (
    PYTHON_PARSE
    + r"""
sources, sessions_of, orders, questions, answers, extras = [], [], [], [], [], []
for (source, session), order, question, answer, extra in parsed_rows(sys.argv[1:]):
    sources.append(source)
    sessions_of.append(session)
    orders.append(int(order) if str(order).isdigit() else 0)
    questions.append(question)
    answers.append(answer or None)
    extras.append(extra)
keys = pa.table({"source": sources, "session": sessions_of, "order": pa.array(orders, pa.int64())})
rows = pa.table({"question": questions, "answer": answers, "extra": extras})
del sources, sessions_of, orders, questions, answers, extras
"""
    + COLUMNS_TO_SESSIONS
)

#: No Python per row, each question's raw line kept as it was read (not its re-serialized object, as a build
#: keeps it): each file read once, pyarrow reads its columns from those bytes and each line is a slice of them,
#: ``REGEX_KEYS`` (a missing 多轮序号 as 0, as the Python ceilings order it), then ``COLUMNS_TO_SESSIONS``. What a
#: columnar build would cost if the ``extra`` of a question held its raw line instead.
ARROW_RAW_LINES = (
    r"""
import sys, numpy as np, pyarrow as pa, pyarrow.compute as pc, pyarrow.json as pj
from convhub import schema
from convhub.engine.writers.parquet_writer import ParquetWriter
tables, lines = [], []
for path in sys.argv[1:]:
    with open(path, "rb") as file:
        data = file.read()
    tables.append(pj.read_json(pa.BufferReader(data)))
    offsets = np.concatenate([[0], np.flatnonzero(np.frombuffer(data, np.uint8) == 10) + 1]).astype(np.int64)
    offsets = offsets if offsets[-1] == len(data) else np.append(offsets, len(data))
    with_newlines = pa.LargeStringArray.from_buffers(len(offsets) - 1, pa.py_buffer(offsets), pa.py_buffer(data))
    lines.append(pc.utf8_rtrim(with_newlines, characters="\n"))
table = pa.concat_tables(tables)
"""
    + REGEX_KEYS
    + r"""
keys = keys.set_column(2, "order", pc.fill_null(keys.column("order"), 0))
answer = table.column("答")
rows = pa.table({
    "question": table.column("问"),
    "answer": pc.if_else(pc.equal(answer, ""), pa.scalar(None, pa.string()), answer),
    "extra": pa.chunked_array([line.cast(pa.string()) for line in lines]),
})
"""
    + COLUMNS_TO_SESSIONS
)


def cases(data_dir: Path, files: list[str]) -> list[tuple[str, str, list[str]]]:
    return [
        ("load_dataset('json')", GENERIC_LOADER, files),
        ("arrow: read", ARROW_READ, files),
        ("arrow: read, write Arrow IPC", ARROW_IPC, files),
        ("arrow: read, regroup, write Parquet", ARROW_SESSIONS, files),
        ("duckdb: read, regroup, write Parquet, 1 GB", DUCKDB_SESSIONS, ["1GB", *files]),
        ("duckdb: read, regroup, write Parquet, 16 GB", DUCKDB_SESSIONS, ["16GB", *files]),
        ("python per row, least conversion, 1 process", PYTHON_PER_ROW, files),
        ("python per row for orjson only, the rest on columns, 1 process", PYTHON_PER_ROW_COLUMNS, files),
        ("arrow: read, raw lines kept, regroup on columns, write Parquet", ARROW_RAW_LINES, files),
        ("convhub build sessions, num_proc=1", BUILD, ["mnbvc", str(data_dir), '["sessions"]', "1"]),
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


def multiturn_input(mb: float, folder: Path) -> tuple[Path, list[str]]:
    """The folder of ``mb`` megabytes of multi-turn shards in ``folder`` (written once, reused at the same size)
    and its files, as the benchmark's generator writes them; says what it is."""
    data_dir = folder / f"mnbvc-multiturn-{mb:g}mb"
    shards = data_dir / "multiturn"
    if not shards.is_dir():
        mnbvc_synthetic.generate(shards, mb, 8, use_gzip=False, seed=0)
    files = [str(path) for path in sorted(shards.glob("*.jsonl"))]
    size_mib = sum(Path(path).stat().st_size for path in files) / 2**20
    print(f"input: {len(files)} multi-turn shards, {size_mib:.0f} MiB in {data_dir}\n")
    return data_dir, files


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
        data_dir, files = multiturn_input(args.mb, args.workdir or Path(scratch))
        print_summary(*run_rounds(data_dir, files, args.repeat))
    return 0


if __name__ == "__main__":
    sys.exit(main())
