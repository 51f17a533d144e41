"""The reader contract: the ``READER`` a source names (how to name or write one: docs/adding-a-source.md,
section 4) turns one file (a local path or any URL) into raw records, each with its :class:`Place`.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from convhub.errors import Reject


@dataclass(frozen=True)
class Place:
    """Where one raw record was read: how an error names it, and what a conversion may need of where it was.

    ``file`` is the file as the reader was given it (a local path or a URL: what errors name); ``name`` the
    file's name as the source listed it (a downloaded copy's path names no subset; its listed name does).
    ``record`` is how an error names the record: its id where the reader names records by one, else its
    ``position`` (in a JSON list) or ``line`` (``line 3``, in JSON Lines). ``start``/``end`` are its bytes in
    the file (or the zip ``member``) where the reader knows them."""

    file: str
    name: str
    record: str | int
    position: int | None = None
    line: int | None = None
    start: int | None = None
    end: int | None = None
    member: str | None = None


class Reader(Protocol):
    """What a source names as its ``READER``."""

    def read(self, shard: str | dict[str, Any], reject: Reject | None = None) -> Iterator[tuple[Place, Any]]:
        """(place, raw record) of each record of ``shard`` (a path or URL, or a source's shard dict that names its
        file under ``path`` and its listed name under ``name``), in file order, one at a time: the reader holds
        no raw record it handed on. Given ``reject`` (``--on-bad-record skip``), a break in the file goes to it
        (scope ``span`` or ``file``) and reading goes on where it can; without, the break is raised."""
        ...


def line_place(number: int) -> str:
    """How an error names a line by default: ``record line 3``."""
    return f"line {number}"


def place_of_line(file: str, number: int, name: str | None = None, start: int | None = None) -> Place:
    """The place of line ``number`` (from 1; ``start``: its byte offset) of a JSON Lines file, an error naming
    it :func:`line_place`'s way."""
    return Place(file, name or posixpath.basename(file), line_place(number), line=number, start=start)


def shard_file(shard: str | dict[str, Any]) -> tuple[str, str]:
    """(file, listed name) of what a reader is given: a path or URL, or a shard dict with ``path`` (and ``name``,
    by default the path's file name)."""
    if isinstance(shard, dict):
        path = str(shard["path"])
        return path, str(shard.get("name") or posixpath.basename(path))
    return str(shard), posixpath.basename(str(shard))
