"""JSON read as ``json`` reads it, through orjson where orjson reads it the same (:func:`loads_exact`): what every
reader of the sources' JSON calls. orjson is several times faster than ``json`` on the sources' lines and values
(``docs/performance.md``).
"""

from __future__ import annotations

import json
import os
from typing import Any

import orjson

from convhub.errors import NESTED_TOO_DEEPLY, SourceError

#: Each byte → ``0`` for an ASCII digit, ``x`` otherwise: :func:`may_hold_long_integer` then finds runs of
#: digits with one ``bytes.find`` (a regex over a whole file cost more than the parse itself).
_DIGITS_AS_ZEROS = bytes(ord("0") if ord("0") <= byte <= ord("9") else ord("x") for byte in range(256))
_LONG_INTEGER_DIGITS = 19  # -9223372036854775809 (19 digits) is the shortest integer beyond 64 bits
_JSON_WHITESPACE = b" \t\n\r"


def may_hold_long_integer(raw: bytes) -> bool:
    """Whether ``raw`` may hold a JSON integer of 19 digits or more, which orjson would read as a float.

    A run of that many digits is a number's integer part when what precedes it (past a ``-`` and
    whitespace) is the start of the text, ``[``, ``,`` or ``:``; runs inside strings (tweet ids in a URL)
    follow other characters. A string holding ": 1234567890123456789" answers True too: the text is then
    read by ``json``, slower but exact.
    """
    marked = raw.translate(_DIGITS_AS_ZEROS)
    run = b"0" * _LONG_INTEGER_DIGITS
    start = marked.find(run)
    while start != -1:
        before = start - 1
        if before >= 0 and raw[before] == ord("-"):
            before -= 1
        while before >= 0 and raw[before] in _JSON_WHITESPACE:
            before -= 1
        if before < 0 or raw[before] in b"[,:":
            return True
        end = start + _LONG_INTEGER_DIGITS
        while end < len(marked) and marked[end] == ord("0"):
            end += 1
        start = marked.find(run, end)
    return False


def loads_exact(data: bytes | str) -> Any:
    """``json.loads(data)``, through orjson where orjson gives the same value (faster); an integer past
    Python's int-string limit is a JSONDecodeError like any other unreadable text.

    orjson refuses what json reads with a twist (NaN, 1e400, lone surrogates, a BOM, UTF-16): json then reads
    it, or raises its own error. Integers past 64 bits orjson would read as floats, so text that may hold one
    (:func:`may_hold_long_integer`, one pass in C) goes to json directly. (A walk of orjson's value for floats
    would do too, but costs more than that scan.)
    """
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data  # (for the scan alone)
    if not may_hold_long_integer(raw):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise
    except ValueError as error:  # an integer past Python's int-string limit (4300 digits): no crash
        document = data if isinstance(data, str) else data.decode("utf-8", "replace")
        raise json.JSONDecodeError(str(error), document, 0) from error


def load_value(raw: bytes, path: str | os.PathLike, record: str | int | None) -> Any:
    """``raw`` as its JSON value, :func:`loads_exact`'s; every error is a SourceError naming ``path`` and
    ``record``: what every reader of JSON bytes raises (a line, a list's element, a zip member)."""
    try:
        return loads_exact(raw)
    except UnicodeDecodeError as error:
        raise SourceError(path, record, None, f"not valid UTF-8: {error}") from error
    except json.JSONDecodeError as error:
        raise SourceError(path, record, None, f"not valid JSON: {error}") from error
    except RecursionError:
        raise SourceError(path, record, None, NESTED_TOO_DEEPLY) from None


def load_object(raw: bytes, path: str | os.PathLike, place: str) -> dict[str, Any]:
    """One JSON Lines line (``raw``) as its object (:func:`load_value`), naming the line (``place``)."""
    value = load_value(raw, path, place)
    if not isinstance(value, dict):
        raise SourceError(path, place, None, f"expected a JSON object, got {type(value).__name__}")
    return value
