"""What a run killed with SIGKILL leaves (its hidden ``.OUT.partial-*`` staging beside the output, its work
folders in TMPDIR) is removed by a later run, and nothing else is: not a running process's folder, not a folder
another host made, not one without convhub's owner file (``convhub.storage.abandoned``).

The killed runs are real processes, killed with SIGKILL while they hold their folder.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from convhub import registry
from convhub.cli.main import main
from convhub.storage.abandoned import (
    OWNER_SUFFIX,
    MarkedTemporaryDirectory,
    is_running,
    owner_record,
    process_start,
    sweep_abandoned,
)
from convhub.storage.staging import MARKER

LOCOMO_SAMPLE = str(registry.get("locomo").sample_dir())

#: A process that stages ``sys.argv[1]`` (as a build does), writes a big file into it, says so, and waits.
HOLD_STAGING = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from convhub.storage.staging import staged_folder
    with staged_folder(Path(sys.argv[1])) as staging:
        (staging / "sessions").mkdir()
        (staging / "sessions" / "part.parquet").write_bytes(b"x" * 100_000)
        print(staging, flush=True)
        time.sleep(600)
    """
)

#: A process that makes a marked work folder in ``sys.argv[1]`` (as a build's ``convhub-work-*``) and waits.
HOLD_WORK = textwrap.dedent(
    """
    import sys, time
    from convhub.storage.abandoned import MarkedTemporaryDirectory
    with MarkedTemporaryDirectory("convhub-work-", dir=sys.argv[1]) as work:
        print(work, flush=True)
        time.sleep(600)
    """
)


@contextmanager
def holding(script: str, argument: Path) -> Iterator[tuple[subprocess.Popen, Path]]:
    """A real process running ``script``, once it holds its folder: the process and the folder. Killed at the
    end whatever the test did, so that no test leaves it running."""
    process = subprocess.Popen(
        [sys.executable, "-c", script, str(argument)], stdout=subprocess.PIPE, text=True
    )
    try:
        line = process.stdout.readline().strip()
        assert line, f"the holding process exited with {process.poll()}"
        yield process, Path(line)
    finally:
        kill_9(process)


def kill_9(process: subprocess.Popen) -> None:
    """SIGKILL, as ``kill -9`` sends it (no cleanup runs), then reap the process."""
    if process.poll() is None:
        process.send_signal(signal.SIGKILL)
    process.wait()
    process.stdout.close()


def test_a_build_removes_the_staging_a_killed_build_left_beside_its_output(tmp_path, capsys):
    output = tmp_path / "out"
    with holding(HOLD_STAGING, output) as (killed, staging):
        assert staging.parent == tmp_path and staging.name.startswith(".out.partial-")
        assert (tmp_path / (staging.name + OWNER_SUFFIX)).is_file()
        kill_9(killed)
    assert (staging / "sessions" / "part.parquet").is_file()  # what SIGKILL leaves
    assert main(["build", "locomo", "--sample", "--config", "sessions", "--output", str(output)]) == 0
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out"]
    assert sorted(path.name for path in output.iterdir()) == [MARKER, "README.md", "sessions"]


def test_a_running_builds_staging_is_left_alone(tmp_path):
    output = tmp_path / "out"
    with holding(HOLD_STAGING, output) as (_, staging):
        assert main(["build", "locomo", "--sample", "--config", "sessions", "--output", str(output)]) == 0
        assert (staging / "sessions" / "part.parquet").read_bytes() == b"x" * 100_000
        assert (tmp_path / (staging.name + OWNER_SUFFIX)).is_file()


def test_a_build_leaves_what_convhub_did_not_mark_or_another_host_marked(tmp_path):
    """A folder that only looks like a staging folder (no owner file, or one that is not convhub's), or one a
    process of another host holds, is not this run's to judge."""
    output = tmp_path / "out"
    unmarked = tmp_path / ".out.partial-users"
    unmarked.mkdir()
    (unmarked / "notes.txt").write_text("mine", encoding="utf-8")
    not_ours = tmp_path / ".out.partial-other"
    not_ours.mkdir()
    (tmp_path / f".out.partial-other{OWNER_SUFFIX}").write_text('{"pid": 1}', encoding="utf-8")
    elsewhere = tmp_path / ".out.partial-remote"
    elsewhere.mkdir()
    record = {**owner_record(), "host": "another-host.invalid", "pid": 2**22 + 1}
    (tmp_path / f".out.partial-remote{OWNER_SUFFIX}").write_text(json.dumps(record), encoding="utf-8")
    assert main(["build", "locomo", "--sample", "--config", "sessions", "--output", str(output)]) == 0
    assert (unmarked / "notes.txt").read_text(encoding="utf-8") == "mine"
    assert not_ours.is_dir() and elsewhere.is_dir()
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
        [
            "out",
            unmarked.name,
            *(name + end for name in (not_ours.name, elsewhere.name) for end in ("", OWNER_SUFFIX)),
        ]
    )


def test_work_folders_of_a_killed_run_are_removed_by_the_next_and_each_run_removes_its_own(tmp_path):
    with holding(HOLD_WORK, tmp_path) as (killed, work):
        (work / "cache").mkdir()
        (work / "cache" / "shard.arrow").write_bytes(b"y" * 1000)
        kill_9(killed)
    unmarked = tmp_path / "convhub-work-users"
    unmarked.mkdir()
    with MarkedTemporaryDirectory("convhub-work-", dir=tmp_path) as mine:
        assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
            [unmarked.name, Path(mine).name, Path(mine).name + OWNER_SUFFIX]
        )
        assert Path(mine).stat().st_mode & 0o777 == 0o700
    assert [path.name for path in tmp_path.iterdir()] == [unmarked.name]


def test_a_killed_process_not_yet_reaped_or_a_reused_pid_holds_nothing(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        record = owner_record(child.pid)
        assert is_running(record)
        os.kill(child.pid, signal.SIGKILL)  # not waited for: a zombie until reaped
        deadline = time.monotonic() + 5
        while is_running(record) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not is_running(record)
    finally:
        child.kill()  # (if an assertion above failed first)
        child.wait()
    if process_start(os.getpid()) is None:
        pytest.skip("this system does not say when a process started (no /proc)")
    assert is_running(owner_record())
    assert not is_running({**owner_record(), "started": "another boot:1"})  # this pid, another process


def test_a_sweep_removes_the_folder_and_then_its_owner_file_and_names_them(tmp_path):
    dead = {**owner_record(), "pid": 2**22 + 1}
    (tmp_path / "convhub-spark-task-ab12").mkdir()
    (tmp_path / "convhub-spark-task-ab12" / "x").write_bytes(b"z")
    (tmp_path / f"convhub-spark-task-ab12{OWNER_SUFFIX}").write_text(json.dumps(dead), encoding="utf-8")
    (tmp_path / f"convhub-spark-task-cd34{OWNER_SUFFIX}").write_text(json.dumps(dead), encoding="utf-8")
    assert sorted(sweep_abandoned(tmp_path, "convhub-spark-task-")) == [
        "convhub-spark-task-ab12",
        "convhub-spark-task-cd34",  # killed after its folder was removed: the owner file alone
    ]
    assert list(tmp_path.iterdir()) == []
    assert sweep_abandoned(tmp_path / "missing", "convhub-work-") == []
    assert socket.gethostname() == dead["host"]


def test_a_build_removes_the_work_folder_a_killed_build_left_in_its_tmpdir(tmp_path, monkeypatch, capsys):
    """The work folder of ``convhub build`` (in CONVHUB_TMPDIR) is marked, so the next build removes a killed one's."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("CONVHUB_TMPDIR", str(scratch))
    with holding(HOLD_WORK, scratch) as (killed, work):
        (work / "cache").mkdir()
        kill_9(killed)
    unmarked = scratch / "convhub-work-users"
    unmarked.mkdir()
    assert main(["build", "locomo", "--sample", "--output", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    assert [path.name for path in scratch.iterdir()] == [unmarked.name]
    assert (tmp_path / "out" / MARKER).exists()
