"""How the ``convhub`` command fails: one line, ``convhub COMMAND: error: ...``, and an exit status that says
what kind of failure it was; never a traceback for a user's mistake, bad data, a full disk or Ctrl-C.

- ``USAGE`` (2): the command line cannot run as given (argparse's own status for its errors);
  :class:`convhub.errors.UsageError` carries such a problem found after parsing (a config a source does not have).
- ``DATA`` (1): the data, the files or the machine stopped the command (a bad record, a full disk).
- ``INTERRUPTED`` (130, as a shell reports a process stopped by SIGINT): Ctrl-C.

A library error often arrives wrapped: ``datasets`` raises ``DatasetGenerationError`` from the real cause, and
its worker pool, interrupted, raises a ``TimeoutError`` while it handles the ``KeyboardInterrupt``. So the
cause is looked for along the whole exception chain (``__cause__`` and ``__context__``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from convhub.errors import EngineError, SourceError, UsageError, in_chain

if TYPE_CHECKING:
    import httpx2

USAGE, DATA, INTERRUPTED = 2, 1, 130

#: The commands whose output is staged and removed on failure: after Ctrl-C nothing of theirs is left.
STAGED = ("build", "check")


def _no_space(error: BaseException) -> bool:
    return isinstance(error, OSError) and error.errno == errno.ENOSPC


def describe(error: BaseException) -> str:
    """The text of one error line: a ``KeyError``'s message without the quotes ``str`` adds, an ``OSError`` as
    what went wrong and where (a full disk in the same words whatever raised it: pyarrow's ``strerror`` is
    "Error writing bytes to file. Detail: [errno 28] No space left on device")."""
    if isinstance(error, KeyError) and len(error.args) == 1 and isinstance(error.args[0], str):
        return error.args[0]
    if isinstance(error, OSError) and error.strerror:
        where = f": {error.filename}" if error.filename else ""
        return f"{'no space left on device' if error.errno == errno.ENOSPC else error.strerror}{where}"
    return str(error)


def dropped_transfer(error: BaseException) -> str | None:
    """The line for a transfer whose connection was lost, and lost again on every retry (a stream's read of the
    Hub: ``datasets`` says only "Server Disconnected"): which server, which file, and why; None for another error.
    """
    import httpx2

    lost = in_chain(error, lambda each: _request_of(each) is not None)
    request = None if lost is None else _request_of(lost)
    if request is None:
        return None
    url = request.url
    origin = f"{url.scheme}://{url.netloc.decode('ascii', 'replace')}"
    from huggingface_hub import constants

    server = f"the Hub at {origin} (HF_ENDPOINT)" if constants.ENDPOINT.rstrip("/") == origin else origin
    if isinstance(lost, httpx2.TimeoutException):
        return f"{server} stalled while reading {url.path}: {_stalled()}, on every try"
    return f"lost the connection to {server} while reading {url.path}, on every try: {lost}"


def _stalled() -> str:
    from convhub.publish.hub_client import TIMEOUT_ENV, timeout_seconds

    return f"no answer within {timeout_seconds():g} s (timed out; {TIMEOUT_ENV} sets the limit)"


def _why_unreached(error: BaseException, line: str) -> str:
    """``datasets``' "Couldn't reach 'ORG/NAME' on the Hub (ReadTimeout)" said nothing of a stall: say it."""
    timed_out = in_chain(
        error, lambda each: isinstance(each, TimeoutError) or "Timeout" in type(each).__name__
    )
    if line.startswith("Couldn't reach") and timed_out is not None:
        return f"{line}: the Hub stalled, {_stalled()}"
    return line


def _says_it_all(error: BaseException) -> bool:
    """An error of convhub's own, whose line already names what failed (a record, an engine), whatever it wraps."""
    return isinstance(error, (SourceError, EngineError))


def _from_spark(error: BaseException) -> bool:
    """An error PySpark or py4j raised (told by its module: PySpark is an extra, maybe not installed)."""
    return type(error).__module__.split(".")[0] in ("pyspark", "py4j")


def _request_of(error: BaseException) -> httpx2.Request | None:
    """The request a transport error of httpx2's was sending; None for another error."""
    import httpx2

    if not isinstance(error, httpx2.TransportError):
        return None
    try:
        return error.request
    except RuntimeError:  # an httpx2 error raised outside a request has none
        return None


def _reportable(error: BaseException) -> bool:
    """An error a user can act on from its message (not a bug, whose traceback is the report)."""
    from huggingface_hub.errors import HfHubHTTPError

    return isinstance(error, (SourceError, ValueError, OSError, KeyError, HfHubHTTPError, EngineError))


def what_was_kept(command: str | None, written: Sequence[str] = ()) -> str:
    """The end of a failed command's line: nothing of its output (its staged folder removed), or, for
    ``build --all``, the sources finished before the failure (each a whole folder, left in place)."""
    if command not in STAGED:
        return ""
    if not written:
        return "; nothing was written"
    return f"; written before it: {', '.join(written)} (nothing of the source that was building)"


def interrupted(command: str | None, written: Sequence[str] = ()) -> int:
    """Ctrl-C: the one line (``convhub build: interrupted; nothing was written``) and exit status 130."""
    print(
        f"convhub{f' {command}' if command else ''}: interrupted{what_was_kept(command, written)}",
        file=sys.stderr,
    )
    return INTERRUPTED


def forget_handled_interrupts() -> None:
    """Clear CPython's mark of an unhandled Ctrl-C once the command has handled every Ctrl-C it met.

    ``exec`` and ``eval`` of a string (``dataclasses`` builds each class's ``__init__``, ``__repr__`` and
    ``__eq__`` so, ``namedtuple`` its ``__new__``: every module defining one, imported while a command runs)
    set that mark when a ``KeyboardInterrupt`` leaves the string's code, even when a caller catches it, and
    ``python -m convhub.cli`` then ends by killing itself with SIGINT after its cleanup (status -2 to a
    caller, not the 130 it printed the line for). Each such ``exec`` also clears the mark when it starts
    (CPython's ``run_eval_code_obj``), so running one empty string does; nothing else changes, and the exit
    that follows runs every cleanup (``atexit``, ``weakref.finalize``, pool shutdown) as before. A
    ``KeyboardInterrupt`` nothing handled (a bug's traceback) leaves the module as an error, which sets the
    mark again."""
    exec("")


def command_in(argv: list[str]) -> str | None:
    """The command a command line names before it is parsed (its first word that is no option), for Ctrl-C's line
    while the command starts."""
    return next((word for word in argv if not word.startswith("-")), None)


def exit_status(command: str, error: BaseException, token=None, written: Sequence[str] = ()) -> int | None:
    """Print ``error`` as the one line a user sees and return the exit status; None for a bug (re-raise it).
    ``written``: what ``build --all`` finished before the error (``what_was_kept``)."""
    from convhub.publish import hub_errors

    if in_chain(error, lambda each: isinstance(each, KeyboardInterrupt)):
        return interrupted(command, written)
    if isinstance(error, UsageError):
        hub_errors.report(command, error, token)
        return USAGE
    full = in_chain(error, _no_space)
    if full is not None:
        hub_errors.report(
            command, f"{describe(full)} (the disk is full){what_was_kept(command, written)}", token
        )
        return DATA
    from convhub.engine.inputs import downloads

    dropped = None if _says_it_all(error) else dropped_transfer(error) or downloads.failure_line(error)
    if dropped is not None:
        hub_errors.report(command, dropped, token)
        return DATA
    # Spark's own error, unless it carries convhub's line (a bad record found in a Spark task says it all)
    spark = None if in_chain(error, _says_it_all) else in_chain(error, _from_spark)
    if spark is not None:  # Spark's JVM exited or refused the master: its first line, not its Java stack
        first = str(spark).strip().splitlines()[0] if str(spark).strip() else type(spark).__name__
        hub_errors.report(command, f"Spark failed: {first} (--verbose shows Spark's own log)", token)
        return DATA
    reportable = error if _reportable(error) else in_chain(error, _reportable)
    if (
        reportable is None
    ):  # a wrapper (DatasetGenerationError) is reported by its cause, if a user can act on it
        return None
    line = _why_unreached(reportable, describe(reportable))
    hub_errors.report(command, line + (what_was_kept(command, written) if written else ""), token)
    return DATA


@contextlib.contextmanager
def interrupt_in_main_process_only() -> Iterator[None]:
    """While the command runs, Ctrl-C raises ``KeyboardInterrupt`` in this process only.

    The terminal sends SIGINT to the whole process group: ``datasets``' worker processes (``--num-proc``) each
    printed a traceback of their own. They are forked with this handler, which ignores the signal in any other
    process, so the command reports the interruption once and its pool stops the workers."""
    main_pid = os.getpid()

    def handler(signum, frame) -> None:
        if os.getpid() == main_pid:
            raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread of the main interpreter: signals are not ours to handle
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
