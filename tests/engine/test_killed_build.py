"""A build killed with SIGKILL (issue #54): its worker processes die with it, and the next build into the same
output leaves none of the killed build's leftovers (``.OUT.partial-*``, ``.OUT.old-*``, MNBVC's
``convhub-partitions-*`` in TMPDIR), on a local folder and on S3 (moto's server), on the local engine and on
Spark's ``local[2]``.

Every build here is a real ``convhub build`` subprocess, killed while its workers write.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import scaled_inputs  # (a benchmark module: its folder is put on the path above)

from convhub import registry
from convhub.storage.folders import folder_at
from convhub.storage.staging import WRITING
from tests.support.running_commands import descendants, start, still_running, wait_until

LOCOMO_SAMPLE = str(registry.get("locomo").sample_dir())
MNBVC_SAMPLE = str(registry.get("mnbvc").sample_dir())
#: Seconds a killed build's workers may take to go: the kernel kills them at once (this is for a busy machine);
#: before, they wrote on until their job's end, or for ever once their queue of progress updates was full.
WORKERS_GONE_SECONDS = 5


@pytest.fixture(scope="module")
def running_locomo(tmp_path_factory) -> Path:
    """LoCoMo's benchmark input at half its scale: four files of ~125 conversations, some seconds of work for each
    of two workers, so that a worker left alive would still be working after ``WORKERS_GONE_SECONDS``."""
    folder = tmp_path_factory.mktemp("scaled-locomo")
    return scaled_inputs.make("locomo", folder, 0.5).data_dir


def kill_while_working(args: list[str], tmp_path: Path, workers: int, started: str, **env: str) -> set[int]:
    """Start ``convhub build ARGS``, wait until ``started`` is in its log and it runs ``workers`` processes of
    its own, then SIGKILL it alone (not its group): the processes it had started."""
    log = tmp_path / "killed.stderr"
    process = start(["build", *args], log, tmp_path, **env)
    try:
        wait_until(lambda: started in log.read_text(), 180, f"{started!r} in the log", process, log)
        seen: set[int] = set()

        def working() -> bool:  # (the set as it was when it held: a job may end between two looks)
            seen.clear()
            seen.update(descendants(process.pid))
            return len(seen) >= workers

        wait_until(working, 60, f"{workers} workers", process, log)
        children = set(seen)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    return children


def leftovers(parent, name: str) -> list[str]:
    """What a build of ``parent / name`` may leave beside it: its staging, an old copy, an owner file."""
    return sorted(entry.name for entry in parent.iterdir() if entry.name.startswith(f".{name}."))


def rebuild(source: str, data: str, output: str, tmp_path: Path, **env: str) -> None:
    """A whole build of ``data`` into ``output``, to its end."""
    log = tmp_path / "rebuild.stderr"
    process = start(
        ["build", source, "--data-dir", data, "--output", output, "--num-proc", "2"], log, tmp_path, **env
    )
    assert process.wait(timeout=300) == 0, log.read_text()


@pytest.mark.slow
@pytest.mark.parametrize("where", ["local", "s3"])
def test_a_killed_two_process_build_leaves_no_worker_and_the_rebuild_no_staging(
    running_locomo, tmp_path, where, request
):
    parent = tmp_path if where == "local" else request.getfixturevalue("bucket")
    output = str(parent / "out")
    args = ["locomo", "--data-dir", str(running_locomo), "--config", "sessions", "--num-proc", "2"]
    workers = kill_while_working([*args, "--output", output], tmp_path, 2, "locomo sessions test")
    assert len(workers) >= 2
    assert still_running(workers, WORKERS_GONE_SECONDS) == set()
    built = folder_at(output)
    if where == "local":
        assert leftovers(parent, "out")  # the killed build's staging is there until the next build
    else:  # a first build on an object store is written in place, held by the killed run
        assert (built / WRITING).exists()
    rebuild("locomo", LOCOMO_SAMPLE, output, tmp_path)
    assert leftovers(parent, "out") == []
    assert not (built / WRITING).exists()
    assert (built / "README.md").is_file()
    ids = set()
    for path in built.rglob("*.parquet"):  # only the rebuild's rows: none of the killed build's copies
        with path.open("rb") as handle:
            ids.update(pq.read_table(handle, columns=["conversation_id"]).column(0).to_pylist())
    assert ids and not any("-copy" in conversation for conversation in ids), sorted(ids)[:5]


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.parametrize("where", ["local", "s3"])
def test_a_killed_spark_build_leaves_no_process_and_the_rebuild_no_staging(
    running_locomo, tmp_path, where, request
):
    pytest.importorskip("pyspark", reason='PySpark is the "spark" extra: pip install ".[spark]"')
    parent = tmp_path if where == "local" else request.getfixturevalue("bucket")
    output = parent / "out"
    args = ["locomo", "--data-dir", str(running_locomo), "--config", "sessions", "--output", str(output)]
    spark = ["--engine", "spark", "--spark-master", "local[2]"]
    # the JVM, and Spark's Python daemon and its two workers
    started = kill_while_working([*args, *spark], tmp_path, 3, "shards on Spark")
    assert still_running(started, 60) == set()
    rebuild("locomo", LOCOMO_SAMPLE, str(output), tmp_path)
    assert leftovers(parent, "out") == []
    assert not (output / WRITING).exists()


@pytest.mark.slow
def test_mnbvc_partitions_a_killed_build_left_are_removed_by_the_next_build(tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    data = scaled_inputs.make("mnbvc", tmp_path / "mnbvc", 0.02).data_dir / "multiturn"
    args = ["mnbvc", "--data-dir", str(data), "--config", "sessions", "--num-proc", "2"]

    def partitions() -> list[str]:
        return sorted(path.name for path in scratch.iterdir() if path.name.startswith("convhub-partitions-"))

    def writing_partitions() -> bool:
        return any(path.suffix == ".rows" for path in scratch.glob("convhub-partitions-*/*"))

    log = tmp_path / "killed.stderr"
    process = start(
        ["build", *args, "--output", str(tmp_path / "out")], log, tmp_path, CONVHUB_TMPDIR=str(scratch)
    )
    try:
        wait_until(writing_partitions, 180, "the partitions being written", process, log)
        started = descendants(process.pid)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    assert still_running(started, WORKERS_GONE_SECONDS) == set()
    killed = partitions()
    assert len(killed) == 2  # the folder and its owner file
    rebuild("mnbvc", MNBVC_SAMPLE, str(tmp_path / "out"), tmp_path, CONVHUB_TMPDIR=str(scratch))
    assert partitions() == []  # the killed build's swept, the rebuild's own removed at its end
    assert os.listdir(scratch) == []
