"""The values of a recipe's YAML read with their types checked: every problem a ``RecipeError`` naming its key.

Error messages quote the offending value through ``reprlib``: short, however long or deeply nested the YAML made
it (a 5,000-level list would otherwise fail the message itself with a ``RecursionError``).
"""

from __future__ import annotations

import math
import reprlib
from typing import overload


class RecipeError(ValueError):
    """A recipe that cannot be used; the message names the recipe key, e.g. ``sources[1].weight``."""

    def __init__(self, key: str, problem: str):
        self.key = key
        super().__init__(f"recipe key {key!r}: {problem}")


def no_unknown_keys(document: dict, allowed: set[str], key: str) -> None:
    for name in document:
        if name not in allowed:
            where = f"{key}.{name}" if key else str(name)
            raise RecipeError(where, f"unknown key; allowed here: {', '.join(sorted(allowed))}")


def where(key: str, name: str) -> str:
    return f"{key}.{name}" if key else name


@overload
def string(document: dict, name: str, key: str, default: str) -> str: ...
@overload
def string(document: dict, name: str, key: str, default: None) -> str | None: ...
def string(document: dict, name: str, key: str, default: str | None) -> str | None:
    """``document[name]``, a string (``default`` when absent)."""
    value = document.get(name, default)
    if value is not None and not isinstance(value, str):
        raise RecipeError(where(key, name), f"must be a string, got {shown(value)}")
    return value


def mapping(document, name, key) -> dict:
    value = document.get(name) or {}
    if not isinstance(value, dict):
        raise RecipeError(where(key, name), f"must be a mapping, got {shown(value)}")
    return value


def boolean(document, name, key, default) -> bool:
    value = document.get(name, default)
    if not isinstance(value, bool):
        raise RecipeError(where(key, name), f"must be true or false, got {shown(value)}")
    return value


@overload
def integer(document: dict, name: str, key: str, default: int, minimum: int) -> int: ...
@overload
def integer(document: dict, name: str, key: str, default: None, minimum: int) -> int | None: ...
def integer(document: dict, name: str, key: str, default: int | None, minimum: int) -> int | None:
    """``document[name]``, an integer ≥ ``minimum`` (``default`` when absent)."""
    value = document.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise RecipeError(where(key, name), f"must be an integer ≥ {minimum}, got {shown(value)}")
    return value


def positive(document: dict, name: str, key: str, maximum: float = math.inf) -> float | None:
    value = document.get(name)
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 < value <= maximum
    ):
        bound = f" and ≤ {maximum:g}" if maximum != math.inf else ""
        raise RecipeError(where(key, name), f"must be a finite number > 0{bound}, got {shown(value)}")
    return float(value)


def string_list(document, name, key) -> tuple[str, ...] | None:
    value = document.get(name)
    if value is None:
        return None
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        raise RecipeError(
            where(key, name), f"must be a string or a non-empty list of strings, got {shown(value)}"
        )
    return tuple(values)


def split_names(value, key) -> tuple[str, ...]:
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        raise RecipeError(key, f"must be a split name or a list of split names, got {shown(value)}")
    return tuple(values)


REPR = reprlib.Repr()
REPR.maxlevel, REPR.maxstring, REPR.maxother = 3, 80, 80


def shown(value) -> str:
    """A value as an error message quotes it: short, however long or deeply nested the YAML made it."""
    return REPR.repr(value)
