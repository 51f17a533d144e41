"""``benchmarks/bench.py`` smoke tests: a row per source and case, and real cases on a tiny input.

Nothing here is timed: the benchmark's figures are reported, not asserted. The first test replaces the
fresh-process runner with a stub (the matrix is ~40 processes of a few seconds each) but generates every
source's real scaled input; the second runs two real cases end to end.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
from pathlib import Path

import bench
import bench_cases
import harness
import pytest
import scaled_inputs

from convhub import registry
from convhub.builders.locomo import scaled as locomo_scaled
from tests.support.bench_output import table_rows

TINY = "0.001"


def test_every_source_and_case_has_a_row(tmp_path, monkeypatch, capsys):
    seen: list[tuple[str, list[str]]] = []

    def stub(code: str, args: list[str], code_root: str | None = None, peaks: dict | None = None):
        seen.append((code, args))
        if code == bench_cases.STREAM:
            return 1.0, 200.0, {"rows": 3, "seconds": 0.5, "first_row": 0.25, "complete": True}
        return 2.0, 300.0, 3

    monkeypatch.setattr(bench, "run_case", stub)
    assert bench.main(["--scale", TINY, "--workdir", str(tmp_path)]) == 0
    output = capsys.readouterr().out
    rows = table_rows(output)
    found = {(row[0], row[1]) for row in rows}
    for source in registry.names():
        made = scaled_inputs.make(source, tmp_path / source, float(TINY))  # reused, not generated again
        assert made.files and all(path.stat().st_size > 0 for path in made.files)
        expected = {(source, name) for name, _, _ in bench_cases.cases_for(source, made, 10.0)}
        assert expected <= found
        names = {name for s, name in found if s == source}
        assert {
            bench_cases.FLOOR_CASE,
            bench_cases.GENERIC_CASE,
            bench_cases.SESSIONS_CASE,
            bench_cases.SHARED_CASE,
        } <= names
        assert {"stream sessions", "stream turns", "stream qa", "stream messages"} <= names
        assert (bench_cases.ALL_CASE in names) == bool(registry.get(source).EXTRA_VIEWS)
        assert bench_cases.MEMORY_CASE in names
        assert (bench_cases.SPARK_MEMORY_CASE in names) == bench_cases.spark_installed()
        assert (bench_cases.SPARK_PARALLEL_MEMORY_CASE in names) == bench_cases.spark_installed()
        smaller = scaled_inputs.make(source, tmp_path / f"{source}-quarter", float(TINY) / 4)
        assert [source, str(smaller.data_dir), '["sessions"]', "1"] in [args for _, args in seen]
    assert len(rows) == len(seen)
    # MNBVC's floor and the build beside it read the multi-turn files: their MB and speeds are of those alone
    made = scaled_inputs.make("mnbvc", tmp_path / "mnbvc", float(TINY))
    multiturn = bench_cases.case_input(bench_cases.NATIVE_FLOOR_CASE, made)
    assert multiturn.files and all(path.parent.name == "multiturn" for path in multiturn.files)
    assert 0 < multiturn.megabytes < made.megabytes
    for case in (bench_cases.NATIVE_FLOOR_CASE, bench_cases.FLOORED_BUILD_CASE):
        (row,) = [row for row in rows if row[:2] == ["mnbvc", case]]
        assert row[3] == f"{multiturn.megabytes:.1f}"
        assert row[8] == f"{multiturn.megabytes / made.megabytes:.2f}x"  # every stub case takes 2 s
    assert "targets:" in output and "peak memory of the builds" in output
    # the stub gives every build 300 MiB, so memory does not grow: 1.00x, met
    assert "peak memory of build sessions, input x4 vs input 1.00x (target <= 1.25x): met" in output


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_an_engine_switch_keeps_the_baselines_and_that_engines_cases(tmp_path, monkeypatch, engine):
    monkeypatch.setattr(bench_cases, "spark_installed", lambda: True)  # the Spark cases are listed, never run
    made = scaled_inputs.make("locomo", tmp_path / "locomo", float(TINY))
    every = [name for name, _, _ in bench_cases.cases_for("locomo", made, 10.0)]
    chosen = [name for name, _, _ in bench_cases.cases_for("locomo", made, 10.0, engine)]
    assert chosen == [name for name in every if bench_cases.engine_of(name).split()[0] in ("-", engine)]
    assert {bench_cases.FLOOR_CASE, bench_cases.GENERIC_CASE} <= set(chosen)
    assert (bench_cases.SPARK_PARALLEL_CASE in chosen) == (engine == "spark")
    assert (bench_cases.SESSIONS_CASE in chosen) == (engine == "local")
    assert ("stream sessions" in chosen) == (engine == "local")


def test_a_baseline_twin_is_in_its_cases_engine_column():
    twin = bench_cases.SPARK_SESSIONS_CASE + bench_cases.BASELINE_SUFFIX
    assert (
        bench_cases.engine_of(twin)
        == bench_cases.engine_of(bench_cases.SPARK_SESSIONS_CASE)
        == "spark local[1]"
    )
    assert bench_cases.engine_of(bench_cases.SESSIONS_CASE + bench_cases.BASELINE_SUFFIX) == "local"


def test_repeat_alternates_rounds_and_takes_ratios_within_each(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench_cases, "spark_installed", lambda: False)
    calls: list[str] = []
    # seconds per round: the generic loader slows down over the rounds, as a drifting machine does
    seconds = {"generic": [10.0, 20.0, 40.0], "sessions 1": [5.0, 10.0, 40.0], "sessions 2": [4.0, 8.0, 8.0]}

    def stub(code: str, args: list[str], code_root: str | None = None, peaks: dict | None = None):
        kind = "generic" if code == bench.GENERIC_LOADER else f"sessions {args[3]}"
        calls.append(kind)
        return seconds[kind][calls.count(kind) - 1], 100.0 * calls.count(kind), 7

    monkeypatch.setattr(bench, "run_case", stub)
    argv = ["--scale", TINY, "--workdir", str(tmp_path), "--source", "locomo", "--repeat", "3"]
    assert bench.main([*argv, "--case", "load_dataset", "--case", "build sessions"]) == 0
    assert calls == ["generic", "sessions 1", "sessions 2"] * 3  # rounds, not one case three times
    output = capsys.readouterr().out
    rows = {row[1]: row for row in table_rows(output)}
    assert rows["build sessions (round 2)"][8] == "2.00x"  # against round 2's generic loader
    assert rows["build sessions num_proc=2 (round 3)"][8] == "5.00x"
    summary = {row[1]: row for row in table_rows(output) if len(row) == 7}
    assert summary[bench_cases.SESSIONS_CASE][3:] == ["3", "10.00 (5.00-40.00)", "300", "2.00x (1.00-2.00x)"]
    assert summary[bench_cases.PARALLEL_CASE][6] == "2.50x (2.50-5.00x)"
    # targets on the medians: 20.0 / 10.0 and 20.0 / 8.0
    # a small source's speed is shown, not judged (issue 34)
    assert "locomo: sessions speed vs load_dataset('json'), num_proc=1 2.00x (shown, no target)" in output
    assert "locomo: sessions speed vs load_dataset('json'), num_proc=2 2.50x (shown, no target)" in output
    assert "targets (on the medians):" in output


def test_baseline_code_runs_each_build_again_with_that_checkout_and_compares(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench_cases, "spark_installed", lambda: False)
    (tmp_path / "base" / "convhub").mkdir(parents=True)
    (tmp_path / "base" / "convhub" / "__init__.py").write_text("")
    calls: list[tuple[str, str | None]] = []

    def stub(code: str, args: list[str], code_root: str | None = None, peaks: dict | None = None):
        calls.append((args[3] if code == bench.BUILD else "generic", code_root))
        return (3.0 if code_root else 5.0) if code == bench.BUILD else 10.0, 100.0, 7

    monkeypatch.setattr(bench, "run_case", stub)
    argv = [
        "--scale",
        TINY,
        "--workdir",
        str(tmp_path / "in"),
        "--source",
        "locomo",
        "--case",
        "load_dataset",
    ]
    assert bench.main([*argv, "--case", "build sessions", "--baseline-code", str(tmp_path / "base")]) == 0
    base = str((tmp_path / "base").resolve())
    assert calls == [("generic", None), ("1", None), ("1", base), ("2", None), ("2", base)]
    output = capsys.readouterr().out
    assert "locomo: build sessions: time / the baseline code's 1.67x (target <= 2.0x): met" in output
    assert "build sessions num_proc=2 (baseline code)" in output


def test_a_case_imports_the_baseline_checkouts_code_wherever_the_benchmark_runs(tmp_path, monkeypatch):
    """``python -c`` puts its working folder first on sys.path: a case started from the project's own checkout
    imported that convhub, not the baseline's, and compared the code with itself."""
    (tmp_path / "base" / "convhub").mkdir(parents=True)
    (tmp_path / "base" / "convhub" / "__init__.py").write_text("MARKER = 7\n")
    monkeypatch.chdir(Path(__file__).resolve().parents[2])  # the project's checkout, where README runs it
    code = "import convhub; print(getattr(convhub, 'MARKER', 0))"
    assert harness.run_case(code, [], str(tmp_path / "base"))[2] == 7
    assert harness.run_case(code, [])[2] == 0  # without one, the installed convhub


def test_baseline_code_must_be_a_checkout_of_this_layout(tmp_path, capsys):
    with pytest.raises(SystemExit):
        bench.main(["--scale", TINY, "--baseline-code", str(tmp_path)])
    assert "no convhub/ package there" in capsys.readouterr().err


def test_repeat_summarizes_a_stream_by_its_first_row(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench_cases, "spark_installed", lambda: False)
    firsts = iter([0.5, 0.25, 2.0])

    def stub(code: str, args: list[str], code_root: str | None = None, peaks: dict | None = None):
        if code == bench_cases.STREAM:
            return 1.0, 200.0, {"rows": 3, "seconds": 10.0, "first_row": next(firsts), "complete": False}
        return 2.0, 300.0, 3

    monkeypatch.setattr(bench, "run_case", stub)
    argv = ["--scale", TINY, "--workdir", str(tmp_path), "--source", "locomo", "--repeat", "3"]
    assert bench.main([*argv, "--case", "load_dataset", "--case", "stream sessions"]) == 0
    output = capsys.readouterr().out
    summary = {row[1]: row for row in table_rows(output) if len(row) == 7}
    assert summary["stream sessions"][6] == "first row 0.50 s (0.25-2.00)"
    assert "slowest first streamed row 0.50 s (target <= 1.0 s): met" in output


@pytest.mark.parametrize("source", ["locomo", "gigamemory", "convlab"])
def test_an_input_made_without_the_real_files_says_so(tmp_path, monkeypatch, source):
    """Without ../shared/data the inputs come from the packaged samples, whose records are far smaller (a
    'scale 1' GigaMemory input of 2 MB, not 1 GB): the run's notes say so instead of passing it for README's."""
    monkeypatch.setattr(harness, "SHARED_DATA", tmp_path / "absent")
    made = scaled_inputs.make(source, tmp_path / source, float(TINY))
    assert made.files and all(path.stat().st_size > 0 for path in made.files)
    assert [note for note in made.notes if "packaged sample" in note] == [
        f"{source}: {scaled_inputs.real_file(source)} is absent (set CONVHUB_SHARED_DATA), so the input is made "
        "from convhub's packaged sample: its records are not the real ones' size and its figures do not compare "
        "with README's"
    ]


def test_convlab_baselines_read_the_extracted_dialogues(tmp_path):
    made = scaled_inputs.make("convlab", tmp_path / "convlab", float(TINY))
    assert [path.name for path in made.files] == ["dialogues.json"]
    assert (made.data_dir / "multiwoz_like" / "data.zip").exists()
    assert not (made.data_dir / "multiwoz_like" / "data").exists()  # the builder reads the archive
    dialogues = json.loads(made.files[0].read_text(encoding="utf-8"))
    assert len({dialogue["dialogue_id"] for dialogue in dialogues}) == len(dialogues) == 10


def test_mnbvc_input_spreads_conversations_over_shards(tmp_path):
    made = scaled_inputs.make("mnbvc", tmp_path / "mnbvc", float(TINY))
    folders = {path.parent.name for path in made.files}
    assert folders == {"multiturn", "forum"}
    keys_by_shard = []
    for path in made.files:
        if path.parent.name == "multiturn":
            rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
            keys_by_shard.append({row["元数据"]["扩展字段"].split(",")[0] for row in rows})
    assert any(a & b for a in keys_by_shard for b in keys_by_shard if a is not b)


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("source", ["locomo"])
def test_real_cases_run_in_fresh_processes(tmp_path, capsys, source):
    argv = ["--scale", TINY, "--workdir", str(tmp_path), "--source", source]
    assert bench.main([*argv, "--case", "parse floor", "--case", "build sessions"]) == 0
    rows = {row[1]: row for row in table_rows(capsys.readouterr().out)}
    local = {bench_cases.SESSIONS_CASE, "build sessions num_proc=2"}
    spark = (
        {bench_cases.SPARK_SESSIONS_CASE, bench_cases.SPARK_PARALLEL_CASE}
        if bench_cases.spark_installed()
        else set()
    )
    assert set(rows) == {bench_cases.FLOOR_CASE} | local | spark
    conversations = max(4, round(locomo_scaled.CONVERSATIONS * float(TINY)))
    for case in local | spark:
        assert rows[case][4] == str(conversations)  # rows: one per conversation, on every engine
        tree, _, python = rows[case][7].partition(" (Python ")
        assert float(tree) > 0  # peak memory: the process tree's
        if python:  # and the Python processes' alone, shown where below it (the JVM's share of a small build
            # may be under the driver's own high-water mark, which is then the peak of both)
            assert case in spark and 0 < float(python.rstrip(")")) < float(tree)
    assert {rows[case][2] for case in local} == {"local"}
    assert {rows[case][2] for case in spark} <= {"spark local[1]", "spark local[2]"}
    assert rows[bench_cases.FLOOR_CASE][2] == "-"


KNOWN_MEMORY = """
import os, sys, time
mib = int(sys.argv[1])
workers = int(sys.argv[2])


def hold(size):  # touched: untouched pages of a fresh bytearray are not resident
    block = bytearray(size << 20)
    for i in range(0, len(block), 4096):
        block[i] = 1
    return block


held = hold(mib)
time.sleep(2.0)  # long enough for the sampler (every 20 ms) to see it, also on a loaded machine (0.4 s was not)
pids = []
for _ in range(workers):  # each worker holds a block of its own while the others live
    pid = os.fork()
    if pid == 0:
        own = hold(mib)
        time.sleep(2.0)
        os._exit(0)
    pids.append(pid)
for pid in pids:
    os.waitpid(pid, 0)
print(1)
"""


@pytest.mark.slow
def test_peak_memory_is_the_cases_own_tree_not_this_process():
    """Known cases: one process holding 200 MiB, and the same with two workers holding 200 MiB each.

    ``wait4``'s ``ru_maxrss`` gave at least this (pytest) process's own size for any case; the tree's PSS
    gives what the case itself holds, workers included, and pages a worker shares with its parent once.
    """
    _, alone, _ = bench.run_case(KNOWN_MEMORY, ["200", "0"])
    _, with_workers, _ = bench.run_case(KNOWN_MEMORY, ["200", "2"])
    assert 200 <= alone < 200 + 60, alone  # the interpreter's own ~10-20 MiB on top
    assert 600 <= with_workers < 600 + 90, with_workers  # 200 + 2 x 200, the parent's block shared


#: A Python process holding 100 MiB whose child, not a Python process (as a Spark build's JVM is not), holds 200
#: for 5 s: the sampler waits nine times what a sample took, which on a loaded machine (the whole suite on two
#: cores) passed over a child that held it 1 s.
PYTHON_AND_OTHER = """
import subprocess
block = bytearray(100 * 2**20)
block[:: 4096] = b"x" * len(block[:: 4096])
subprocess.run(["perl", "-e", '$x = "x" x (200 * 2**20); sleep 5'], check=True)
print(1)
"""


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("perl") is None, reason="needs perl, a process that is not Python")
def test_the_peak_of_the_python_processes_leaves_out_the_others():
    """The tree's peak counts every process; the Python processes' peak (what the 1 GiB target is about, where
    a Spark build's JVM is beside them) leaves out a child that runs another program."""
    peaks: dict = {}
    _, tree, _ = bench.run_case(PYTHON_AND_OTHER, [], peaks=peaks)
    assert 100 <= peaks["python"] < 100 + 40, peaks
    assert tree >= peaks["python"] + 200, tree  # perl's 200 MiB string (it makes a copy on the way: ~400)


#: Holds 300 MiB for a moment when told to (a line on stdin), says so once it let it go, and ends on the next line.
SPIKE = """
import sys
sys.stdin.readline()
block = bytearray(300 * 2**20)
block[:: 4096] = b"x" * len(block[:: 4096])  # touched, so resident
del block
print("freed", flush=True)
sys.stdin.readline()
"""


def wait_for(condition, seconds: float = 60.0) -> None:
    import time

    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.mark.slow
def test_a_spike_between_two_samples_is_the_peak():
    """300 MiB held for a moment between two samples 3 seconds apart: the sampled footprint misses it, the
    process's own high-water mark (VmHWM, read at the next sample) does not. The spike starts once the first
    sample is taken (it ran on its own clock before, and a busy machine once put it under a sample)."""
    import subprocess

    from harness import TreeMemory

    process = subprocess.Popen(
        [sys.executable, "-c", SPIKE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        memory = TreeMemory(process.pid, interval=3.0)
        wait_for(lambda: memory.peak_kib > 0)  # the first sample, before the spike
        process.stdin.write("go\n")
        process.stdin.flush()
        assert process.stdout.readline() == "freed\n"
        wait_for(lambda: memory.high_water_kib.get(process.pid, 0) >= 300 * 1024)  # a sample after it
        process.stdin.write("end\n")
        process.stdin.flush()
        process.wait(timeout=60)
    finally:
        process.kill()
    peak = memory.stop()
    assert memory.peak_kib / 1024 < 100  # what the samples of the footprint saw
    assert 300 <= peak < 300 + 60, peak


def test_a_process_that_ends_while_its_tree_is_listed_is_left_out(monkeypatch):
    """A process can end between the check that its ``/proc/PID/task`` exists and the listing of it: the
    sampling thread must go on (it died so in a run of 2026-11-24, and sampled no more)."""
    import subprocess
    import time

    from harness import TreeMemory

    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    tasks, listed = Path(f"/proc/{process.pid}/task"), Path.glob

    def ended_meanwhile(self, pattern):
        if self == tasks:
            raise FileNotFoundError(2, "No such file or directory", str(self))
        return listed(self, pattern)

    monkeypatch.setattr(Path, "glob", ended_meanwhile)
    memory = TreeMemory(process.pid, interval=0.02)
    try:
        time.sleep(0.3)  # several samples
        assert memory._thread.is_alive()
        assert memory._tree() == [process.pid]
    finally:
        process.kill()
        process.wait()
        memory.stop()


@pytest.mark.slow
def test_the_engine_bakeoff_groups_every_conversation_alike_in_each_engine(capsys):
    import engine_bakeoff

    engines = [name for name in engine_bakeoff.CANDIDATES if name in ("today", "arrow", "datasets")]
    engines += [name for name in ("duckdb", "polars") if importlib.util.find_spec(name)]
    assert engine_bakeoff.main(["--mb", "1", "--engines", ",".join(engines)]) == 0
    rows = [
        line.split(" | ")
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("| ") and "---" not in line
    ]
    results = {row[0].strip("| "): row for row in rows[1:]}
    assert sorted(results) == sorted(engines)
    assert (
        len({(row[4], row[5], row[6]) for row in results.values()}) == 1
    )  # conversations, rows, digest agree
    assert int(results["today"][5].replace(",", "")) > 500


@pytest.mark.slow
def test_the_native_floor_regroups_every_row_into_the_builds_conversations(capsys):
    import native_floor

    assert native_floor.main(["--mb", "1"]) == 0
    cells = [row for row in table_rows(capsys.readouterr().out) if row[0] != "case"]
    counts = {row[0]: int(row[1].replace(",", "")) for row in cells if row[2] != "failed"}
    assert len(cells) == len(native_floor.cases(Path("data"), [])) == 11
    built = counts.pop("convhub build sessions, num_proc=2")
    assert counts.pop("convhub build sessions, num_proc=1") == built
    read = {
        counts.pop(name) for name in ("load_dataset('json')", "arrow: read", "arrow: read, write Arrow IPC")
    }
    assert len(read) == 1 and read.pop() > built > 50  # every line read; conversations of several rows
    assert set(counts.values()) == {built}  # the native and per-row floors find the build's conversations
    assert {
        "python per row, least conversion, 1 process",
        "python per row for orjson only, the rest on columns, 1 process",
    } <= set(counts)


@pytest.mark.slow
def test_the_stages_of_an_mnbvc_build_are_timed_on_the_builds_own_conversations(capsys):
    import mnbvc_stages

    assert mnbvc_stages.main(["--mb", "1"]) == 0
    output = capsys.readouterr().out
    made, built = re.search(
        r"stages \(([\d,]+) records\):.*the build: [\d.]+ s, ([\d,]+) rows", output
    ).groups()
    assert made == built and int(made.replace(",", "")) > 50  # the stages made the build's conversations
    stages = {row[0]: float(row[1].split()[0]) for row in table_rows(output) if row[0] != "stage"}
    assert list(stages)[:3] == ["read and orjson", "the engine's reader", "key and convert"]
    assert len(stages) == 8 and all(seconds >= 0 for seconds in stages.values())
    assert stages["key and convert"] > 0 and stages["records"] > 0


@pytest.mark.slow
def test_the_oracle_keeps_todays_builds_and_finds_a_changed_row_or_export(tmp_path, capsys):
    import oracle
    import pyarrow.parquet as pq

    reference = tmp_path / "reference"
    assert oracle.main(["--save", str(reference), "--source", "gigamemory", "--scale", TINY]) == 0
    assert oracle.main(["--against", str(reference), "--source", "gigamemory"]) == 0
    output = capsys.readouterr().out
    assert "| gigamemory | sample | sessions/test | 3 | equal |" in output
    assert f"| gigamemory | scaled-{float(TINY)} | export (bytes) | 0 | equal |" in output

    turns = next((reference / "output" / "gigamemory" / "sample" / "build" / "turns").glob("*.parquet"))
    table = pq.read_table(turns)
    pq.write_table(table.slice(1), turns)  # yesterday's build had one row fewer
    exported = next(
        path for path in (reference / "output" / "gigamemory" / "sample" / "export").rglob("*.jsonl")
    )
    exported.write_bytes(exported.read_bytes() + b"\n")
    assert oracle.main(["--against", str(reference), "--source", "gigamemory"]) == 1
    output = capsys.readouterr().out
    assert "| gigamemory | sample | turns/test | 21 | DIFFERENT |" in output
    assert "| gigamemory | sample | export (bytes) | 0 | DIFFERENT |" in output
    assert "| gigamemory | sample | sessions/test | 3 | equal |" in output
    assert "2 difference(s)" in output


@pytest.mark.slow
def test_mnbvcs_native_floor_and_its_build_run_for_real_on_the_same_conversations(tmp_path, capsys):
    argv = ["--scale", TINY, "--workdir", str(tmp_path), "--source", "mnbvc"]
    assert bench.main([*argv, "--case", "native floor", "--case", "(multi-turn files)"]) == 0
    output = capsys.readouterr().out
    rows = {row[1]: row for row in table_rows(output)}
    assert set(rows) == {bench_cases.NATIVE_FLOOR_CASE, bench_cases.FLOORED_BUILD_CASE}
    assert int(rows[bench_cases.NATIVE_FLOOR_CASE][4].replace(",", "")) > 0
    assert (
        rows[bench_cases.NATIVE_FLOOR_CASE][4] == rows[bench_cases.FLOORED_BUILD_CASE][4]
    )  # one row per conversation
    assert "/ the native floor's (multi-turn files)" in output
