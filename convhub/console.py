"""What the ``convhub`` command prints on stderr: log messages, progress bars and phase lines.

- Every log message is printed once, by one handler on the root logger: ``datasets`` adds a handler of
  its own to its ``datasets`` logger at import, which printed each of its warnings a second time, without
  a level or a name. ``setup_logging`` removes it; ``datasets``' records reach the root handler.
- Warnings read ``WARNING logger.name: message``; the phase lines of a build (``convhub.engine.build``, INFO) are
  the bare message. Both go through ``tqdm.write``, so a line never lands in the middle of a progress bar.
- ``quirks_counted`` turns a source parser's warnings into a count, for ``build --sample``: its sample
  files hold odd records on purpose, and ``convhub check SOURCE --sample`` lists them.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import sys
from collections.abc import Iterator

from tqdm import tqdm

from convhub import registry

#: The logger of a build's phases (derive, split by subset, card, move into place); INFO under the CLI.
phases = logging.getLogger("convhub.engine.build")

WARNING_FORMAT = "%(levelname)s %(name)s: %(message)s"


class _Formatter(logging.Formatter):
    """A phase line (INFO and below) is its message; a warning or error names its level and logger."""

    def __init__(self) -> None:
        super().__init__(WARNING_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        if record.levelno < logging.WARNING:
            return record.getMessage()
        return super().format(record)


class ConsoleHandler(logging.Handler):
    """Writes to the ``sys.stderr`` of the moment (pytest's capture too), above any progress bar: warnings
    and errors, and the phase lines, whatever level a test or a caller set on the root logger."""

    def __init__(self) -> None:
        super().__init__()
        self.pid = os.getpid()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING and record.name != phases.name:
            return False
        return super().filter(record)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if os.getpid() == self.pid:
                tqdm.write(self.format(record), file=sys.stderr)
            else:  # a forked worker: the bars it inherited are the parent's to draw; start the line afresh
                clear = "\r\x1b[K" if sys.stderr.isatty() else "\r"
                sys.stderr.write(clear + self.format(record) + "\n")
        except Exception:
            self.handleError(record)


def setup_logging() -> ConsoleHandler | None:
    """One handler on the root logger (added once, however often the CLI runs in one process); warnings
    from every library, and ``convhub.engine.build``'s phase lines. Like ``logging.basicConfig``, nothing is added
    where the root logger has handlers already (a program that runs ``cli.main``, pytest): None."""
    import datasets.utils.logging

    root = logging.getLogger()
    handler = next((h for h in root.handlers if isinstance(h, ConsoleHandler)), None)
    if handler is None:
        if root.handlers:
            return None
        library = datasets.utils.logging._get_library_root_logger()
        for default in list(library.handlers):  # datasets' own StreamHandler: the second copy of each line
            if type(default) is logging.StreamHandler:
                library.removeHandler(default)
        handler = ConsoleHandler()
        handler.setFormatter(_Formatter())
        root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > logging.WARNING:
        root.setLevel(logging.WARNING)
    phases.setLevel(logging.INFO)
    return handler


class _QuirkFilter(logging.Filter):
    """Holds back the warnings of the loggers of ``source``'s package (``convhub.builders.<source>.*``, as
    ``registry.module_name`` says) and counts them. The count is in shared memory, so the warnings of forked worker
    processes (``--num-proc``) count too."""

    def __init__(self, source: str) -> None:
        super().__init__()
        self.prefix = f"{registry.module_name(source)}."
        self.count = multiprocessing.Value("i", 0)
        self.last: logging.LogRecord | None = None  # one record passes each handler: counted once

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.WARNING and record.name.startswith(self.prefix):
            if record is not self.last:
                self.last = record
                with self.count.get_lock():
                    self.count.value += 1
            return False
        return True


@contextlib.contextmanager
def quirks_counted(source: str) -> Iterator[_QuirkFilter]:
    """While the block runs, ``source``'s parser warnings are counted (``.count.value``), not printed."""
    handler = setup_logging()
    handlers = [handler] if handler else logging.getLogger().handlers  # the caller's, where it set them
    quirks = _QuirkFilter(source)
    for each in handlers:
        each.addFilter(quirks)
    try:
        yield quirks
    finally:
        for each in handlers:
            each.removeFilter(quirks)


def quirk_summary(source: str, count: int) -> str:
    """The one line a ``--sample`` build prints for the quirks of a source's sample files."""
    quirks = f"{count} deliberate quirk{'' if count == 1 else 's'}"
    return f"{source}: the sample holds {quirks} (handled as in real data); `convhub check {source} --sample` lists them"
