"""The files ``convhub export`` writes: JSONL lines back at their line numbers (``LineSpool``), JSON files and
lists written as the sources write them, every name kept inside the export folder; and ``ExportError``, the one
error an export reports. Apart from ``convhub.export.exporter`` (which reads a build) so that each stays one concern.
"""

from __future__ import annotations

import gzip
import itertools
import json
from functools import partial
from pathlib import Path
from typing import Any


class ExportError(Exception):
    """The build cannot be exported (not a build folder, another source, a config missing...)."""


# -- writing the files -------------------------------------------------------------------------------------


#: The empty lines an export may write into one file for the line numbers the build holds no row for: this many,
#: plus ``GAP_LINES_PER_ROW`` for each row of the file it holds (see ``LineSpool``).
GAP_LINES_FLOOR = 1_000_000
GAP_LINES_PER_ROW = 1_000
#: Empty lines are written in pieces of this many bytes, never as one string of a claimed size.
GAP_CHUNK = 2**20


class LineSpool:
    """Source lines that arrive out of order (grouped by conversation), written back in file and line order.

    Each line goes to one spool file as it arrives; memory keeps only (file, line number, offset, length)
    per line. :meth:`write` then writes every file in line order, reading the spool back with seeks.
    Line numbers the build holds no row for (blank lines the parser skipped, bad records a build with
    ``--on-bad-record skip`` left out, rows of subsets it left out) are written as empty lines, so every row
    stays at its line number.  A name ending ``.gz`` is gzipped.

    A build (one from the Hub above all) is someone else's input, and nothing in it counts its source's lines,
    so no bound on a line number is exact. The bound kept: the empty lines of one file may number at most
    ``GAP_LINES_FLOOR`` plus ``GAP_LINES_PER_ROW`` per row the build holds of that file, so what an export writes
    follows the build's own size (at most 1 MB and 1 KB a row of empty lines), never a number a row claims (line
    3,000,000,000 wrote 2.8 GB of newlines; 10^11 ran out of memory). The same bound holds for all files together,
    with all the build's rows (300 files of one row each, each within its own bound, wrote 288 MB of newlines).
    A file or an export past it is refused before anything is written, naming the file and the row that claims
    the line.
    """

    def __init__(self, folder: Path, location: str = "the build"):
        self.path = folder / ".convhub-export-spool"
        self.location = location
        self._spool = open(self.path, "w+b")  # noqa: SIM115 - closed by write()
        self._index: dict[str, list[tuple[int, int, int]]] = {}
        self._last: dict[str, tuple[int, str]] = {}  # per file: the highest line claimed, and by which row

    def add(self, file: str, line: int, text: str, row: str = "a row") -> None:
        """Spool ``text`` as line ``line`` of ``file``; ``row`` names the build's row that holds it, for errors."""
        if not isinstance(file, str) or not file:
            raise ExportError(f"{self.location}: {row} names no file for its source line (got {file!r})")
        if not isinstance(line, int) or isinstance(line, bool) or line < 1:
            raise ExportError(f"{self.location}: {row} claims {file} line {line!r}: not a line number")
        data = text.encode("utf-8")
        if b"\n" in data:
            raise ValueError(f"{file} line {line}: a JSONL line cannot hold a newline")
        offset = self._spool.tell()
        self._spool.write(data)
        self._index.setdefault(file, []).append((line, offset, len(data)))
        if line > self._last.get(file, (0, ""))[0]:
            self._last[file] = (line, row)

    def _check_gaps(self) -> None:
        """Refuse a file, or the whole export, whose rows leave more empty lines than the build can explain (see
        the class): many small files each within its own bound still wrote gigabytes together."""
        gaps = {}
        for file, entries in self._index.items():
            last, row = self._last[file]
            allowed = GAP_LINES_FLOOR + GAP_LINES_PER_ROW * len(entries)
            gaps[file] = last - len(entries)
            if gaps[file] > allowed:
                raise ExportError(
                    f"{self.location}: {row} claims {file} line {last:,}, but the build holds {len(entries):,} "
                    f"row(s) of that file, which explain at most {allowed + len(entries):,} lines: refusing to "
                    "write the lines between as empty ones"
                )
        rows = sum(map(len, self._index.values()))
        allowed = GAP_LINES_FLOOR + GAP_LINES_PER_ROW * rows
        if sum(gaps.values()) > allowed:
            widest = max(gaps, key=gaps.__getitem__)
            last, row = self._last[widest]
            raise ExportError(
                f"{self.location}: the rows of {len(gaps):,} files claim lines that leave {sum(gaps.values()):,} "
                f"empty lines between them (the most in {widest}: {row} claims line {last:,}), but the build's "
                f"{rows:,} rows explain at most {allowed:,}: refusing to write them"
            )

    def write(self, folder: Path) -> list[str]:
        """Write every file under ``folder``; return their relative names. The spool is deleted."""
        written = []
        try:
            self._check_gaps()
            self._spool.flush()
            for file, entries in sorted(self._index.items()):
                entries.sort()
                _check_unique_lines(file, entries)
                target = safe_join(folder, file)
                target.parent.mkdir(parents=True, exist_ok=True)
                # a gzip header holds a time: 0, so that one build always exports the same bytes
                opener = partial(gzip.GzipFile, mtime=0) if file.endswith(".gz") else open
                with opener(target, "wb") as out:
                    current = 1
                    for line, offset, length in entries:
                        _write_empty_lines(out, line - current)
                        self._spool.seek(offset)
                        out.write(self._spool.read(length) + b"\n")
                        current = line + 1
                written.append(file)
        finally:
            self._spool.close()
            self.path.unlink(missing_ok=True)
        return written


def _write_empty_lines(out, count: int) -> None:
    while count > 0:
        piece = min(count, GAP_CHUNK)
        out.write(b"\n" * piece)
        count -= piece


def _check_unique_lines(file: str, entries: list[tuple[int, int, int]]) -> None:
    for (first, _, _), (second, _, _) in itertools.pairwise(entries):
        if first == second:
            raise ExportError(f"two rows of the build claim {file} line {first}")
        if first < 1:
            raise ExportError(f"a row of the build claims {file} line {first}")


def safe_join(folder: Path, relative: str) -> Path:
    """``folder/relative``, refusing a name that would leave the folder (``..``, an absolute path)."""
    target = (folder / relative).resolve()
    if not target.is_relative_to(folder.resolve()) or not relative:
        raise ExportError(f"the build names a file outside the export folder: {relative!r}")
    return target


def write_json(path: Path, value: Any, indent: int | None = 2, ensure_ascii: bool = False) -> None:
    """One JSON file in UTF-8 (LoCoMo's is ``indent=2`` and ASCII-escaped, ConvLab's unescaped)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(value, handle, ensure_ascii=ensure_ascii, indent=indent)


class JsonListWriter:
    """A top-level JSON list written one element at a time, formatted as ``json.dump(items, indent=2)``."""

    def __init__(self, path: Path, ensure_ascii: bool = False):
        path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed by close()
        self._count = 0
        self.ensure_ascii = ensure_ascii

    def append(self, value: Any) -> None:
        text = json.dumps(value, ensure_ascii=self.ensure_ascii, indent=2).replace("\n", "\n  ")
        self._handle.write(("[\n  " if not self._count else ",\n  ") + text)
        self._count += 1

    def close(self) -> None:
        self._handle.write("\n]" if self._count else "[]")
        self._handle.close()
