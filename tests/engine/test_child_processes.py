"""``child_processes.die_with_parent``: a worker ends when the process that forked it is killed with SIGKILL, by the
kernel on Linux and by the watching thread where the kernel cannot be asked; a worker whose parent is already
gone ends at once. The parents here are real processes, killed for real."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from convhub.engine.runners import child_processes
from tests.support.running_commands import command_env, still_running

#: A parent that forks a worker (which calls ``die_with_parent`` and sleeps), prints its pid and sleeps too;
#: ``sys.argv[1]`` "watch" makes the worker use the watching thread instead of the kernel.
PARENT = textwrap.dedent(
    """
    import multiprocessing, os, sys, time
    from convhub.engine.runners import child_processes

    def worker(parent_pid):
        if sys.argv[1] == "watch":
            child_processes._ask_kernel = lambda: False
        child_processes.die_with_parent(parent_pid)
        print(os.getpid(), "ready", flush=True)  # one line of one process: the parent writes nothing
        time.sleep(600)

    process = multiprocessing.get_context("fork").Process(target=worker, args=(os.getpid(),))
    process.start()
    time.sleep(600)
    """
)


@pytest.mark.parametrize("how", ["kernel", "watch"])
def test_a_worker_dies_with_its_killed_parent(how):
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, how], stdout=subprocess.PIPE, text=True, env=command_env()
    )
    try:
        # the worker's pid and "ready" once it has called die_with_parent; when the parent printed the pid
        # and the worker "ready", a loaded machine interleaved the two writes ("ready3027")
        pid, said = parent.stdout.readline().split()
        worker = int(pid)
        assert said == "ready"
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
    assert still_running({worker}, 5 * child_processes.WATCH_SECONDS + 5) == set()


def test_a_worker_whose_parent_is_already_gone_ends_at_once():
    process = multiprocessing.get_context("fork").Process(
        target=child_processes.die_with_parent,
        args=(os.getpid() + 10**7,),  # not its parent
    )
    process.start()
    process.join(timeout=30)
    assert process.exitcode == 1
