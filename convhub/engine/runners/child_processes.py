"""Tasks run in processes forked from convhub's (``run_forked``), which die with it (``die_with_parent``): a
build killed with SIGKILL runs no cleanup, and its workers would live on, holding their memory and their files in
the staging folder (docs/guarantees.md, "Nothing left behind").
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection, wait
from typing import Any, cast

#: ``PR_SET_PDEATHSIG`` of ``<linux/prctl.h>``.
_PR_SET_PDEATHSIG = 1
#: Seconds between two looks at the parent, where the kernel cannot watch it.
WATCH_SECONDS = 0.5


def die_with_parent(parent_pid: int) -> None:
    """In a child process forked by ``parent_pid``: end this process when that one ends. On Linux the kernel
    kills it (``prctl(PR_SET_PDEATHSIG, SIGKILL)``, which cannot be caught): it acts at once, whatever the worker
    does, where a thread watching the parent needs the GIL, which a long C call (DuckDB's sort, a Parquet write)
    may hold for seconds, and polls. The signal follows the parent *thread* that forked: convhub forks its workers
    from the main thread, which lives as long as the command. Elsewhere a daemon thread polls the parent's pid."""
    if not (sys.platform.startswith("linux") and _ask_kernel()):
        threading.Thread(
            target=_watch_parent, args=(parent_pid,), name="convhub-parent-watch", daemon=True
        ).start()
    if os.getppid() != parent_pid:  # the parent died before the kernel watched it (it forked us directly)
        os._exit(1)


def _ask_kernel() -> bool:
    """``prctl(PR_SET_PDEATHSIG, SIGKILL)``; whether the kernel took it."""
    try:
        # the process's own symbols, libc's among them (find_library would run ldconfig in every worker)
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(WATCH_SECONDS)
    os._exit(1)


#: What a forked task sends back: an update, its result, or the exception it raised.
_UPDATE, _RESULT, _FAILED = "update", "result", "failed"


def run_forked(
    tasks: list[Callable[..., Any]], on_update: Callable[[Any], Any] | None = None, at_once: int | None = None
) -> Iterator[Any]:
    """Each task's result, in the tasks' order as they come, each task run in a process of its own forked from this
    one (``die_with_parent``), at most ``at_once`` at a time (all by default): the local engine's jobs and its map,
    the group-by's writers and its sort.

    Nothing is pickled on the way in (a task may be a closure, a builder goes as it is); its result is pickled on
    the way back. With ``on_update``, each task is called with one argument, a function that sends a value to
    ``on_update``, called here as the values come (a progress bar). The first task that fails stops the others
    and its exception is raised here; closing the iterator (an error or Ctrl-C in the caller) stops them too. A
    process that died without a result is a RuntimeError.
    """
    context = multiprocessing.get_context("fork")
    queued = list(enumerate(tasks))[::-1]
    running: dict[Connection, tuple[int, Any]] = {}
    results: dict[int, Any] = {}
    given = 0
    try:
        while given < len(tasks):
            while queued and len(running) < (at_once or len(tasks)):
                index, task = queued.pop()
                receiver, sender = context.Pipe(duplex=False)
                arguments = (task, sender, os.getpid(), on_update is not None)
                process = context.Process(target=_send_result, args=arguments, daemon=True)
                process.start()
                sender.close()
                running[receiver] = (index, process)
            for receiver in cast(list[Connection], wait(list(running))):
                index, process = running[receiver]
                try:
                    kind, value = receiver.recv()
                except EOFError:
                    process.join()
                    kind, value = _FAILED, RuntimeError(f"a process ended with exit code {process.exitcode}")
                if kind == _UPDATE and on_update is not None:
                    on_update(value)
                    continue
                if kind == _FAILED:
                    raise value
                del running[receiver]
                process.join()
                results[index] = value
            while given in results:
                yield results.pop(given)
                given += 1
    finally:
        for _, process in running.values():  # a task failed, or the caller stopped: stop the others
            if process.is_alive():
                process.terminate()
            process.join()


def _send_result(task: Callable[..., Any], sender, parent_pid: int, updates: bool) -> None:
    """In a forked process: ``task()`` (``task(update)`` with ``updates``) sent back as its result, or the
    exception it raised."""
    die_with_parent(parent_pid)
    try:
        outcome = (_RESULT, task(lambda value: sender.send((_UPDATE, value))) if updates else task())
    except BaseException as error:
        outcome = (_FAILED, error)
    try:
        sender.send(outcome)
    except Exception as error:  # a result or exception that cannot be pickled
        sender.send((_FAILED, RuntimeError(f"a result could not be sent back: {error!r}")))
    finally:
        sender.close()
