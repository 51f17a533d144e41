"""Real ``convhub`` commands started as subprocesses, and what a test asks of them once they are stopped: the
processes they started (found in ``/proc``, by pid) and whether those still run.

Shared by the tests that kill a build with SIGKILL or interrupt a command with SIGINT.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def command_env(**extra: str) -> dict[str, str]:
    """This process's environment (the S3 server's, when a fixture set it), the checkout first on PYTHONPATH."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, **extra}


def start(args: list[str], log: Path, cwd: Path, **extra_env: str) -> subprocess.Popen:
    """``convhub ARGS`` in a session of its own (as a terminal runs it), its stderr into ``log``."""
    with open(log, "w", encoding="utf-8") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", "convhub.cli", *args],
            stdout=subprocess.DEVNULL, stderr=stderr, env=command_env(**extra_env), cwd=cwd, start_new_session=True,
        )  # fmt: skip


def wait_until(
    condition: Callable[[], bool], seconds: float, what: str, process=None, log: Path | None = None
):
    """Poll ``condition`` until it holds; fail naming ``what`` after ``seconds`` or when ``process`` ended."""
    deadline = time.monotonic() + seconds
    while not condition():
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the command ended before {what}: {log.read_text() if log else ''}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {seconds} s")
        time.sleep(0.05)


def parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def descendants(pid: int) -> set[int]:
    """The processes ``pid`` started, and theirs, as ``/proc`` shows them now."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            parent = parent_of(int(entry))
            if parent is not None:
                children.setdefault(parent, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def running(pid: int) -> bool:
    """Whether ``pid`` is a process that runs (not gone, not a zombie waiting to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def still_running(pids: set[int], seconds: float) -> set[int]:
    """Those of ``pids`` that still run after at most ``seconds`` (sooner once none does)."""
    deadline = time.monotonic() + seconds
    while (alive := {pid for pid in pids if running(pid)}) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


def in_session(session: int) -> set[int]:
    """The running processes of a session (a command started with ``start`` leads its own: its pid), whoever
    their parent now is: a worker orphaned by its command's end is still found."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[0] != "Z" and int(fields[3]) == session:
                found.add(int(entry))
    return found
