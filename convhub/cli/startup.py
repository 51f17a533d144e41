"""Ctrl-C while the ``convhub`` command starts: its one line and exit status 130, no traceback.

The command's imports (``datasets``, pyarrow, numpy) take seconds, and ``cli.main.main`` handles Ctrl-C only once
they are done: before, a Ctrl-C in that time printed a traceback of whichever import it stopped, and the exit
status was -2. The handler is installed by ``convhub.cli``'s import, before anything heavy, and only where the
process is the command (the ``convhub`` script, or ``python -m convhub.cli.main``): a program or a test that
imports the package keeps its own Ctrl-C. ``main`` puts its own handler in place once it runs.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

#: The exit status of a command stopped by Ctrl-C (``cli.errors.INTERRUPTED``; that module imports more).
INTERRUPTED = 130


def interrupt_quietly_while_starting() -> None:
    """Install the starting command's Ctrl-C handler, where this process is the command."""
    # while ``python -m`` imports the module's packages, sys.argv[0] is "-m"
    if sys.argv[:1] == ["-m"] or Path(sys.argv[0] if sys.argv else "").name == "convhub":
        with contextlib.suppress(ValueError):  # not the main thread: signals are not ours to handle
            signal.signal(signal.SIGINT, _interrupted_while_starting)


def _interrupted_while_starting(signum, frame) -> None:
    command = next((arg for arg in sys.argv[1:] if not arg.startswith("-")), None)
    sys.stderr.write(f"convhub {command}: interrupted\n" if command else "convhub: interrupted\n")
    sys.stderr.flush()
    os._exit(INTERRUPTED)
