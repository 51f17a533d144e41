"""The ``convhub`` command's argument parser: argparse's, with a usage error on one line and a misspelt option
named with the option it is close to.

argparse checks the required options before it looks at the ones it does not know, so ``--ouput out`` was
reported as "the following arguments are required: --output". Each parser here keeps the option strings it was
given (``add_argument`` returns the action, whose ``option_strings`` is public), those of its argument groups and
mutually exclusive groups too (each group's ``add_argument`` is made to tell the parser), and, on an error or on leftover
arguments, first names an unknown ``--option`` and the close one (``difflib``), as
``unrecognized option --ouput (did you mean --output?)``.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Iterable
from typing import Any, TypeVar, overload

from convhub.cli import errors as cli_errors

_N = TypeVar("_N")


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors are one line like every other error of the command
    (``convhub build: error: ...``, exit status 2), an unknown option first, with the option it is close to."""

    def __init__(self, *args, **kwargs) -> None:
        self.option_names: list[str] = []  # before argparse's own __init__ adds --help
        self.has_commands = False
        self.misspelt: list[str] = []
        super().__init__(*args, **kwargs)

    def add_argument(self, *names, **kwargs):
        action = super().add_argument(*names, **kwargs)
        self.option_names += action.option_strings
        return action

    def add_argument_group(self, *args, **kwargs):
        return self._telling(super().add_argument_group(*args, **kwargs))

    def add_mutually_exclusive_group(self, **kwargs):
        return self._telling(super().add_mutually_exclusive_group(**kwargs))

    def _telling(self, group):
        """``group``, whose options (and those of the groups made from it) are added to this parser's names: an
        option in a group is known, and suggested for a misspelling of it, as any other."""
        add_argument, add_group = group.add_argument, group.add_argument_group
        add_exclusive = group.add_mutually_exclusive_group

        def add_recorded(*names, **kwargs):
            action = add_argument(*names, **kwargs)
            self.option_names += action.option_strings
            return action

        group.add_argument = add_recorded
        group.add_argument_group = lambda *args, **kwargs: self._telling(add_group(*args, **kwargs))
        group.add_mutually_exclusive_group = lambda **kwargs: self._telling(add_exclusive(**kwargs))
        return group

    def add_subparsers(self, **kwargs):
        self.has_commands = True  # its commands' options are theirs to check
        return super().add_subparsers(**kwargs)

    # (argparse's own three signatures, which an override must keep)
    @overload
    def parse_known_args(
        self, args: Iterable[str] | None = None, namespace: None = None
    ) -> tuple[argparse.Namespace, list[str]]: ...
    @overload
    def parse_known_args(self, args: Iterable[str] | None, namespace: _N) -> tuple[_N, list[str]]: ...
    @overload
    def parse_known_args(self, *, namespace: _N) -> tuple[_N, list[str]]: ...
    def parse_known_args(
        self, args: Iterable[str] | None = None, namespace: Any = None
    ) -> tuple[Any, list[str]]:
        given = list(sys.argv[1:] if args is None else args)
        self.misspelt = [] if self.has_commands else self.unknown_options(given)
        namespace, extras = super().parse_known_args(args, namespace)
        if self.misspelt:  # parsed, with options left over: name them here, where their neighbours are known
            self.error(self.misspelt_message())
        return namespace, extras

    def unknown_options(self, given: list[str]) -> list[str]:
        """The ``--options`` of ``given`` this parser does not take (an abbreviation it takes is known)."""
        unknown = []
        for token in given:
            if token == "--":
                break
            name = token.split("=", 1)[0]
            if name.startswith("--") and not any(option.startswith(name) for option in self.option_names):
                unknown.append(name)
        return unknown

    def misspelt_message(self) -> str:
        def named(option: str) -> str:
            close = difflib.get_close_matches(option, self.option_names, n=1, cutoff=0.6)
            return option + (f" (did you mean {close[0]}?)" if close else "")

        plural = "s" if len(self.misspelt) > 1 else ""
        return f"unrecognized option{plural} {', '.join(named(option) for option in self.misspelt)}"

    def error(self, message: str):
        if self.misspelt:  # the cause of whatever argparse found missing
            message = self.misspelt_message()
        self.exit(cli_errors.USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")
