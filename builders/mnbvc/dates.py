"""MNBVC dates: ``yyyymmdd`` (``-50000101`` for 5000 BC), optionally with ``HH:MM:SS``."""

from __future__ import annotations

import functools
import re
from datetime import datetime
from typing import Any

from convhub.errors import Notes

DATE_TIME = re.compile(r"^(-?\d{4,})-?(\d{2})-?(\d{2})(?:[ T]?(\d{1,2}):(\d{2})(?::(\d{2}))?)?$")


def parse_date(raw: Any, field: str, notes: Notes) -> datetime | None:
    """MNBVC's ``yyyymmdd`` (``-50000101`` for 5000 BC), optionally with `` HH:MM:SS`` as ``create_time``
    (``yyyy-mm-dd`` is read too).

    A date outside Python's datetime range (BC, year 0, after 9999) or not a date at all stays null; the
    caller keeps the raw string. Absent and empty values are null with no note (their absence is counted
    where it matters).
    """
    return parse_date_iso(raw, field, notes)[0]


def parse_date_iso(raw: Any, field: str, notes: Notes) -> tuple[datetime | None, str | None]:
    """``parse_date`` and its ``isoformat()``, both read once per distinct date string."""
    if raw is None or raw == "":
        return None, None
    moment, text, problem = _read_date(raw) if isinstance(raw, str) else (None, None, NOT_A_DATE)
    if problem:
        notes.add(f"{field} {problem}")
    return moment, text


def date_iso(raw: Any, field: str, notes: Notes) -> str | None:
    """``parse_date_iso(...)[1]``: the date as ISO 8601 text, or None."""
    return parse_date_iso(raw, field, notes)[1]


NOT_A_DATE = "not a yyyymmdd date (timestamp null, raw kept)"


@functools.lru_cache(maxsize=1 << 16)
def _read_date(raw: str) -> tuple[datetime | None, str | None, str | None]:
    """(datetime, its isoformat, None) or (None, None, what is wrong): dates repeat, so they are cached."""
    match = DATE_TIME.match(raw.strip())
    if not match:
        return None, None, NOT_A_DATE
    year = int(match.group(1))
    parts = [int(part) if part else 0 for part in match.groups()[1:]]
    if not 1 <= year <= 9999:
        return None, None, "before year 1 (BC) or after 9999 (timestamp null, raw kept)"
    try:
        moment = datetime(year, *parts)
    except ValueError:
        return None, None, "not a valid date (timestamp null, raw kept)"
    return moment, moment.isoformat(), None
