"""The ``convhub`` command's entry point (``[project.scripts]``, and ``python -m convhub.cli``): Ctrl-C from the
command's first moment is one line and exit status 130.

The command's modules import ``datasets``, pyarrow and pandas, a second or more before ``main`` runs. A Ctrl-C in
that time raised ``KeyboardInterrupt`` inside an import, outside ``main``'s handling of it: Python's traceback, and
a process killed by SIGINT (status -2 to a caller, not 130). Here they are imported inside that handling; this
module itself imports only the standard library and ``convhub.cli.errors``. What is left is the interpreter's own
start and the import of this module, some tens of milliseconds.
"""

from __future__ import annotations

import os
import sys

from convhub.cli import errors as cli_errors
from convhub.errors import kind_in_chain


def console_main() -> None:
    """Import the command, then run it (``main.console_main``); Ctrl-C during the imports: one line, 130."""
    try:
        from convhub.cli import main
    except BaseException as error:
        # Ctrl-C as itself, or wrapped by the import it broke (a class body's ``__set_name__`` raises RuntimeError
        # from it)
        if kind_in_chain(error, KeyboardInterrupt) is None:
            raise
        status = cli_errors.interrupted(cli_errors.command_in(sys.argv[1:]))
        sys.stdout.flush()
        sys.stderr.flush()
        # Not sys.exit: an interrupt that lands inside an extension module's own run of Python code (its import)
        # marks the interpreter as ended by an unhandled Ctrl-C even though it was handled here, and Python then
        # kills itself with SIGINT at exit (status -2, seen 1 time in 8 at 0.5 s). Nothing is open or written yet.
        os._exit(status)
    main.console_main()
