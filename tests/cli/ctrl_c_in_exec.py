"""``python -m tests.cli.ctrl_c_in_exec PHASE convhub-args...``: the ``convhub`` command as ``python -m convhub.cli``
runs it, with a Ctrl-C that lands inside an ``exec`` of a string, as a real one does inside a ``dataclass`` being
made by a module a command imports while it starts (PHASE ``parse``) or runs (PHASE ``run``).

A ``KeyboardInterrupt`` leaving a string's ``exec`` marks the interpreter as ended by an unhandled Ctrl-C even
once convhub handles it, and a ``-m`` run then killed itself with SIGINT (status -2) after printing its
"interrupted" line. Run by ``tests/cli/test_interrupt.py``; not a test module itself.
"""

from __future__ import annotations

import sys

from convhub.cli import entry, main


def interrupted_inside_exec(*args, **kwargs):
    exec("raise KeyboardInterrupt")  # what SIGINT does when it lands in dataclasses' exec of an __init__


if __name__ == "__main__":
    phase = sys.argv.pop(1)
    if phase == "parse":
        main.parse = interrupted_inside_exec
    else:
        main._run = interrupted_inside_exec
    entry.console_main()
