"""The ``convhub`` command's entry point (``[project.scripts]``, and ``python -m convhub.cli``): Ctrl-C from the
command's first moment is one line and exit status 130.

Before the command runs, its modules import ``datasets``, pyarrow and pandas and the parser imports each
command's module: a second or two. A Ctrl-C then raised ``KeyboardInterrupt`` inside an import, where Python
reports it as it may: itself, wrapped in the ``RuntimeError`` of a class body's ``__set_name__``, or as an
extension module's ``ImportError: initialization failed`` (pybind11's, in scipy). And an interrupt that leaves
an ``exec`` or ``eval`` of a string (``dataclasses`` makes each class's methods so, ``namedtuple`` its ``__new__``)
marks the interpreter as ended by an unhandled Ctrl-C even once handled: ``python -m`` then kills itself with
SIGINT at exit (status -2 to a caller, not 130).

So while the modules are imported and the command line parsed, Ctrl-C is held, not raised: the imports end
whole, and then the command stops with its one line and 130 (nothing is open or written yet). What a command
imports as its work starts (``IMPORTED_BEFORE_WORK``: scipy's extensions, which ``datasets`` imports for each
builder) is imported in that window too. An interrupt that leaves an ``exec`` of a string (a dataclass being
made) while the command runs is handled, and its mark cleared (``errors.forget_handled_interrupts``). This module
itself imports only the standard library and ``convhub.cli.errors``; what is left unguarded is the
interpreter's own start and this import, some tens of milliseconds.
"""

from __future__ import annotations

import signal
import sys
from types import FrameType
from typing import TYPE_CHECKING

from convhub.cli import errors as cli_errors
from convhub.errors import kind_in_chain

if TYPE_CHECKING:
    from argparse import Namespace


#: What each command imports as its work starts, imported before it (``import_before_work``): ``datasets`` imports
#: ``scipy.io`` for each dataset builder it makes (its streaming patch of ``loadmat``), and a BEAM score scipy's
#: Kendall tau; scipy's extension modules reported a Ctrl-C during their initialization as "ImportError:
#: initialization failed" (status 1), and a dataclass being made as "unhandled" (``errors.forget_handled_interrupts``).
IMPORTED_BEFORE_WORK = {
    "build": ("convhub.build", "convhub.engine.runners.engine", "scipy.io"),
    "check": ("convhub.build", "scipy.io"),
    "mix": ("convhub.mix", "scipy.io"),
}
#: What a score imports as its work starts, by benchmark: BEAM's Kendall tau (scipy.stats), LoCoMo's Porter stemmer
#: (``nltk.stem``, which imports some 800 modules, scipy's pybind11 extensions among them: seconds on a loaded machine,
#: the window a Ctrl-C of ``tests/storage/test_interrupted_commands.py``'s score runs lands in).
SCORE_IMPORTS = {"beam": ("scipy.stats",), "locomo": ("nltk.stem",)}
#: Those an install may lack: ``datasets`` imports them only when present, and so does this.
OPTIONAL_IMPORTS = frozenset({"scipy.io", "scipy.stats"})


def import_before_work(args: Namespace) -> None:
    """Import what the parsed command imports as its work starts, while Ctrl-C is still held: an
    interrupt then never lands inside those imports (a second, the extension modules' initialization included)."""
    import importlib

    names = IMPORTED_BEFORE_WORK.get(args.command, ())
    if args.command == "score":
        names = SCORE_IMPORTS.get(getattr(args, "benchmark", ""), ())
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            if name not in OPTIONAL_IMPORTS:
                raise


def console_main() -> None:
    """Import the command and parse its line with Ctrl-C held, then run it (``main.console_main``)."""
    pressed: list[int] = []
    args = None

    def hold(signum: int, frame: FrameType | None) -> None:
        pressed.append(signum)

    previous = signal.signal(signal.SIGINT, hold)
    try:
        from convhub.cli import main

        args = main.parse(sys.argv[1:])
        import_before_work(args)  # the lazy imports of its first seconds, Ctrl-C still held
    except BaseException as error:
        # a Ctrl-C from before this handler was set, as itself or wrapped by the import it broke
        if kind_in_chain(error, KeyboardInterrupt) is None:
            raise  # argparse's own exit (usage, --help), or a bug
        pressed.append(signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, previous)
    if pressed or args is None:
        cli_errors.forget_handled_interrupts()  # (one that broke an import's dataclass: handled all the same)
        sys.exit(cli_errors.interrupted(cli_errors.command_in(sys.argv[1:])))
    from convhub.cli import main

    main.console_main(args)
