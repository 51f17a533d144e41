"""Worker processes that die with the convhub process that started them.

A build killed with SIGKILL runs no cleanup: before this, the workers of a ``--num-proc 2`` build (and the
forked writers of MNBVC's regroup, the pool that derives the views) lived on, an hour later still holding their
memory and their files in the staging folder. ``die_with_parent`` runs first in every such process:

- on Linux, the kernel is asked (``prctl(PR_SET_PDEATHSIG, SIGKILL)``, through ``ctypes``) to kill the process
  when its parent goes. This is the robust choice: the kernel acts at once, whatever the worker is doing (a
  thread watching the parent needs the GIL, which a long C call such as DuckDB's sort or a Parquet write may hold
  for seconds, and it polls); SIGKILL cannot be caught or ignored. Its one trap, the signal following the parent
  *thread* that forked the worker, does not bite: convhub starts its pools from the main thread, which lives as
  long as the command, and the pools never start a replacement worker (no ``maxtasksperchild``).
- elsewhere (no ``prctl``), a daemon thread polls the parent's pid and ends the process when it changes.

A parent that died between the fork and the call is caught by comparing ``os.getppid()`` with the pid the
parent passed (all these processes are forked by it directly).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time

#: ``PR_SET_PDEATHSIG`` of ``<linux/prctl.h>``.
_PR_SET_PDEATHSIG = 1
#: Seconds between two looks at the parent, where the kernel cannot watch it.
WATCH_SECONDS = 0.5


def die_with_parent(parent_pid: int) -> None:
    """In a child process forked by ``parent_pid``: end this process when that one ends (module docstring)."""
    if not (sys.platform.startswith("linux") and _ask_kernel()):
        threading.Thread(
            target=_watch_parent, args=(parent_pid,), name="convhub-parent-watch", daemon=True
        ).start()
    if os.getppid() != parent_pid:  # the parent died before the kernel watched it
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
