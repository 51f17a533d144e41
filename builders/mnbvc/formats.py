"""Sources whose files come in several formats (MNBVC: 多轮对话, 问答, 论坛): the names a user may give a format
(``--format``), a file's format told from its first rows, and whether a ``--subset`` wants a format at all.

A source declares its formats once (:class:`Formats`) with a pure ``classify(row)``; the engine does the rest, so
that every source detects alike and names the file, the line and the field when it cannot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

from convhub.errors import SourceError

#: Rows a detection reads at most before it settles on the format of the last row it classified.
DETECT_ROWS = 50


@dataclass(frozen=True)
class Formats:
    """A source's file formats.

    ``classify(row)`` is ``(format, final)`` for a row of some format (``final``: no later row can change the
    file's format, so detection stops there) or None for a row of none. ``described`` says in an error what a row
    of these formats is (``an MNBVC dialogue row (no 问/答, ...)``), and ``field`` what such a row lacks.
    """

    source: str
    names: tuple[str, ...]
    classify: Callable[[dict[str, Any]], tuple[str, bool] | None]
    described: str
    field: str
    #: Other names a user may give (``--format``), lower case; each format's own name is one already.
    aliases: Mapping[str, str] = dataclass_field(default_factory=dict)

    def normalize(self, name: str) -> str:
        """The format a ``--format`` names; a ValueError listing the formats otherwise."""
        wanted = name.strip().lower()
        if wanted in self.names:
            return wanted
        try:
            return self.aliases[wanted]
        except KeyError:
            problem = f"unknown {self.source} format {name!r}; formats: {', '.join(self.names)}"
            raise ValueError(problem) from None

    def detect(
        self, rows: Iterable[tuple[int, dict[str, Any]]], path: str, tolerant: bool = False
    ) -> str | None:
        """A file's format from its first (line number, row) pairs; None for a file with no row.

        A first row of no format is a SourceError that asks for ``--format``; ``tolerant`` (``--on-bad-record
        skip``) passes over such rows (the format's reader rejects them later) and fails only when no row of the
        first ``DETECT_ROWS`` has a format.
        """
        found, formatless = None, None
        for seen, (number, row) in enumerate(rows):
            classified = self.classify(row)
            if classified is None and tolerant:
                formatless = formatless or (number, row)
                continue
            if classified is None:
                problem = (
                    f"missing: not {self.described}; keys {list(row)[:8]}; give the format with --format"
                )
                raise SourceError(path, f"line {number}", self.field, problem)
            found, final = classified
            if final or seen + 1 >= DETECT_ROWS:
                return found
        if found is None and formatless is not None:
            number, row = formatless
            problem = f"missing: none of the first {DETECT_ROWS} rows is {self.described}"
            raise SourceError(
                path, f"line {number}", self.field, f"{problem}; keys {list(row)[:8]}; give --format"
            )
        return found

    def wanted(self, kind: str, subsets: Iterable[str] | None) -> bool:
        """False only when every ``--subset`` names another format (``forum``, ``forum/北大树洞``), so a file of
        format ``kind`` need not be read; a subset that names no format (a 来源) may be in any file."""
        if not subsets:
            return True
        heads = {wanted.split("/", 1)[0] for wanted in subsets}
        return kind in heads or any(head not in self.names for head in heads)
