"""``conversation_id`` is unique in a build: the check over every sessions shard, and what a duplicate left out
under ``on_bad_record="skip"`` takes with it (its rows in a source's own configs, its counts in the statistics)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import datasets
import numpy as np
import pyarrow as pa

from convhub.engine.checks import quarantine
from convhub.engine.writers.output_shards import ConfigBuild
from convhub.engine.writers.parquet_writer import write_parquet
from convhub.errors import SourceError
from convhub.stats import SplitStats, Statistics
from convhub.storage.folders import Folder, parquet_file, read_parquet, text_of

if TYPE_CHECKING:
    from convhub.engine.runners.engine import Engine


def drop_duplicate_ids(
    root: Folder, sessions: ConfigBuild, on_bad_record: str, quarantine_dir: Path, engine: Engine
) -> list[tuple[str, dict, str]]:
    """Check the sessions shards under ``root`` (:func:`find_duplicate_ids`): shards are parsed apart (by
    ``num_proc`` workers), so a parser can only see duplicates in its own shard. ``raise``: a SourceError names
    both shards and rows and their subsets. ``skip``: the later row (in split, shard, row order) is removed and
    quarantined with its canonical record; returned are those rows, (split, row as a dict, the subset of the row
    kept), for the statistics and the source's own configs to drop too."""
    duplicates: list[tuple[str, dict, str]] = []
    removed: dict[tuple[str, str], list[int]] = {}  # (split, shard file) → its rows to drop
    for conversation_id, first, later in find_duplicate_ids(root, sessions, engine):
        problem = (
            f"duplicate conversation_id {conversation_id!r}, also in {first['file']} row {first['row']} "
            f"(subset {first['subset']!r})"
        )
        where = f"row {later['row']} (subset {later['subset']!r})"
        error = SourceError(later["file"], where, "conversation_id", problem)
        if on_bad_record == "raise":
            raise error
        row = _row(root / later["file"], later["row"])
        quarantine.write(str(quarantine_dir), error, row)
        removed.setdefault((later["split"], later["file"]), []).append(later["row"])
        duplicates.append((later["split"], row, first["subset"]))
    for (split, file), rows in removed.items():
        _drop_rows(sessions, split, root / file, rows)
    return duplicates


def drop_rows_of_duplicates(
    built: ConfigBuild, staging: Folder, duplicates: list[tuple[str, dict, str]]
) -> None:
    """A source's own per-conversation config (``built``, under ``staging``) drops the rows of the sessions rows
    :func:`drop_duplicate_ids` dropped, matched by (conversation_id, subset): when the kept and the dropped
    conversation share both, they cannot be told apart there, and the build stops."""
    if not duplicates or not {"conversation_id", "subset"} <= set(built.features):
        return
    dropped = {(row["conversation_id"], row["subset"]) for _, row, _ in duplicates}
    kept = {(row["conversation_id"], kept_subset) for _, row, kept_subset in duplicates}
    ambiguous = dropped & kept
    if ambiguous:
        conversation_id, subset = sorted(ambiguous)[0]
        raise SourceError(
            subset,
            conversation_id,
            "conversation_id",
            f"duplicate conversation_id in one subset: the {built.name} config cannot tell the two apart",
        )
    for split, files in built.files.items():
        for relative in files:
            path = staging / relative
            places = read_parquet(path, columns=["conversation_id", "subset"])
            pairs = zip(
                places.column("conversation_id").to_pylist(), places.column("subset").to_pylist(), strict=True
            )
            rows = [row for row, pair in enumerate(pairs) if pair in dropped]
            if rows:
                _drop_rows(built, split, path, rows)


def _drop_rows(built: ConfigBuild, split: str, path: Folder, rows: list[int]) -> None:
    """Rewrite one shard of ``built``'s ``split`` without its ``rows``, which leave the split's counts of rows and
    bytes too: a dropped duplicate's, in whichever config holds it."""
    table = read_parquet(path)
    keep = np.ones(table.num_rows, dtype=bool)
    keep[rows] = False
    dropped_bytes = table.filter(pa.array(~keep)).nbytes
    write_shard(path, table.filter(pa.array(keep)))
    info = built.splits[split]
    built.splits[split] = datasets.SplitInfo(
        split, max(info.num_bytes - dropped_bytes, 0), info.num_examples - len(rows)
    )


def find_duplicate_ids(root: Folder, built: ConfigBuild, engine: Engine) -> list[tuple[str, dict, dict]]:
    """(conversation_id, first place, later place) for every repeated id; a place names its subset, split, shard
    ``file`` (relative to ``root``) and its ``row`` there, the first in (split, shard, row) order. Only the rows of
    repeated ids reach this process (``Engine.repeated_rows`` finds them)."""
    shards = [(split, file) for split, files in built.files.items() for file in files]
    paths = [text_of(root / file) for _, file in shards]
    rows = engine.repeated_rows(paths, "conversation_id", ["subset"])
    rows.sort(key=lambda row: (row["file"], row["row"]))
    first: dict[str, dict] = {}
    found = []
    for row in rows:
        split, file = shards[row["file"]]  # (``repeated_rows`` names a file by its position in ``paths``)
        place = {"subset": row["subset"], "split": split, "file": file, "row": row["row"]}
        kept = first.setdefault(row["conversation_id"], place)
        if kept is not place:
            found.append((row["conversation_id"], kept, place))
    return found


def _row(path: Folder, row: int) -> dict:
    """Row ``row`` of a Parquet file, from the one row group that holds it (a ``sessions`` file may be 500 MB)."""
    file, start = parquet_file(path), 0
    for group in range(file.num_row_groups):
        rows = file.metadata.row_group(group).num_rows
        if row < start + rows:
            return file.read_row_group(group).slice(row - start, 1).to_pylist()[0]
        start += rows
    raise IndexError(f"{path} has no row {row}")


def forget(statistics: Statistics, split: str, record: dict) -> None:
    """Take one record back out of the statistics (a sessions row dropped after the workers counted it)."""
    removed = SplitStats()
    removed.add(record)
    statistics.by_split_subset[(split, record["subset"])].subtract(removed)


def write_shard(path: Folder, table: pa.Table) -> None:
    """Write a shard's kept rows back as every shard is written (``parquet_writer.write_parquet``), the
    features read from the shard's own, not with pyarrow's defaults."""
    write_parquet(text_of(path), datasets.Features.from_arrow_schema(table.schema), lambda _: [table])
