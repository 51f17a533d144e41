"""``扩展字段``: a JSON string inside a row that MNBVC's producers did not always write as JSON."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from convhub.engine.readers.exact_json import loads_exact


@dataclass(slots=True)
class Extension:
    """A parsed ``扩展字段``: ``value`` is a dict (or ``None`` when unreadable), ``problems`` what was odd."""

    value: dict[str, Any] | None
    problems: tuple[str, ...] = ()

    @property
    def readable(self) -> bool:
        return self.value is not None


class _Unreadable(ValueError):
    pass


_DECODER = json.JSONDecoder()
_WHITESPACE = " \t\r\n"


def parse_extension(raw: Any) -> Extension:
    """Read ``扩展字段`` tolerantly.

    Valid JSON objects are read as JSON. MNBVC's ShareGPT extractor also writes values unquoted
    (``{"会话": yOKd88p, "多轮序号": 1, "解析模型": gpt4}``) and leaves values empty (``"会话": ,``):
    a bare value is read as an integer when it is one and as text otherwise, an empty one as ``None``.
    An empty string is an empty object. Anything else is unreadable (``value`` None); the caller keeps
    the raw string in every case.
    """
    if raw is None:
        return Extension({}, ("absent",))
    if isinstance(raw, dict):
        return Extension(raw, ("an object, not a JSON string",))
    if not isinstance(raw, str):
        return Extension(None, (f"a {type(raw).__name__}, not a JSON string",))
    if not raw.strip():
        return Extension({}, ("empty",))
    try:
        value = loads_exact(raw)
    except json.JSONDecodeError:
        pass
    else:
        if isinstance(value, dict):
            return Extension(value)
        return Extension(None, (f"JSON {type(value).__name__}, not an object",))
    try:
        value, problems = _read_loose_object(raw)
    except _Unreadable as error:
        return Extension(None, (f"unreadable: {error}",))
    return Extension(value, tuple(sorted(problems)))


def _skip(text: str, position: int) -> int:
    while position < len(text) and text[position] in _WHITESPACE:
        position += 1
    return position


def _read_loose_object(text: str) -> tuple[dict[str, Any], set[str]]:
    problems: set[str] = set()
    position = _skip(text, 0)
    if not text.startswith("{", position):
        raise _Unreadable(f"expected '{{' at character {position}")
    position += 1
    value: dict[str, Any] = {}
    while True:
        position = _skip(text, position)
        if text.startswith("}", position):
            position += 1
            break
        key, position = _read_key(text, position, problems)
        position = _skip(text, position)
        if not text.startswith(":", position):
            raise _Unreadable(f"expected ':' after key {key!r} at character {position}")
        item, position = _read_value(text, _skip(text, position + 1), problems)
        value[key] = item
        position = _skip(text, position)
        if text.startswith(",", position):
            position += 1
            if text.startswith("}", _skip(text, position)):
                problems.add("trailing comma")
            continue
        if text.startswith("}", position):
            position += 1
            break
        raise _Unreadable(f"expected ',' or '}}' at character {position}")
    if _skip(text, position) != len(text):
        raise _Unreadable(f"text after the object at character {position}")
    return value, problems


def _read_key(text: str, position: int, problems: set[str]) -> tuple[str, int]:
    if text.startswith('"', position):
        try:
            return _DECODER.raw_decode(text, position)  # a JSON string there: the key and where it ends
        except json.JSONDecodeError as error:
            raise _Unreadable(f"bad key at character {position}: {error.msg}") from error
    end = text.find(":", position)
    if end < 0 or not text[position:end].strip():
        raise _Unreadable(f"expected a key at character {position}")
    problems.add("unquoted keys")
    return text[position:end].strip(), end


#: The characters ``json``'s scanner can start a value with; at any other, ``raw_decode`` fails.
_JSON_VALUE_STARTS = frozenset('"{[ntfNI-0123456789')


def _read_value(text: str, position: int, problems: set[str]) -> tuple[Any, int]:
    """A JSON value at ``position``, else a bare one (up to ``,`` or ``}``); raising an exception per
    bare value (``gpt4``, ``yOKd88p``) was most of the time spent on ShareGPT's loose 扩展字段."""
    if position < len(text) and text[position] in _JSON_VALUE_STARTS:
        try:
            value, end = _DECODER.raw_decode(text, position)
        except ValueError:  # JSONDecodeError, or an integer past the int-string limit (read below)
            pass
        else:
            after = _skip(text, end)
            if after == len(text) or text[after] in ",}":
                return value, end
    end = position
    while end < len(text) and text[end] not in ",}":
        end += 1
    bare = text[position:end].strip()
    if not bare:
        problems.add("empty values")
        return None, end
    if bare.startswith(('"', "{", "[")):
        raise _Unreadable(f"unterminated value at character {position}")
    if re.fullmatch(r"-?\d+", bare):
        try:
            value = int(bare)
        except ValueError as error:  # past the int-string limit (4300 digits)
            raise _Unreadable(f"integer too long at character {position}") from error
    else:
        value = bare
    problems.add("unquoted values")
    return value, end
