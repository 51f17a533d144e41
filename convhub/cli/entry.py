"""The ``convhub`` command's entry point (``[project.scripts]``, and ``python -m convhub.cli``): Ctrl-C from the
command's first moment is one line and exit status 130.

The command's modules import ``datasets``, pyarrow and pandas, a second or more before ``main`` runs. A Ctrl-C in
that time raised ``KeyboardInterrupt`` inside an import, outside ``main``'s handling of it: Python's traceback, and
a process killed by SIGINT (status -2 to a caller, not 130). Here they are imported inside that handling; this
module itself imports only the standard library and ``convhub.cli.errors``. What is left is the interpreter's own
start and the import of this module, some tens of milliseconds.
"""

from __future__ import annotations

import sys

from convhub.cli import errors as cli_errors


def console_main() -> None:
    """Import the command, then run it (``main.console_main``); Ctrl-C during the imports: one line, 130."""
    try:
        from convhub.cli import main
    except KeyboardInterrupt:
        sys.exit(cli_errors.interrupted(cli_errors.command_in(sys.argv[1:])))
    main.console_main()
