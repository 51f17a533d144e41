"""``conversation_id`` is unique in a build: the check over every sessions shard, with Arrow, and what a
duplicate left out under ``on_bad_record="skip"`` takes with it (its rows in a source's own configs, its
counts in the statistics).
"""

from __future__ import annotations

from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from convhub.engine.checks import quarantine
from convhub.engine.checks.stats import SplitStats, Statistics
from convhub.engine.writers.output_shards import ConfigBuild
from convhub.engine.writers.parquet_writer import write_parquet
from convhub.errors import SourceError
from convhub.storage.folders import parquet_file, read_parquet, text_of


def drop_duplicate_ids(
    root: Path, sessions: ConfigBuild, on_bad_record: str, quarantine_dir: Path, engine=None
) -> list[tuple[str, dict, str]]:
    """``conversation_id`` is unique in the dataset: checked over every sessions shard (under ``root``) with Arrow.

    Shards are parsed apart (by ``num_proc`` workers), so a parser can only see duplicates in its own
    shard. ``raise``: a SourceError names both shards and rows and their subsets. ``skip``: the later
    row (in split, shard, row order) is removed and quarantined with its canonical record; returned are those
    rows, (split, row as a dict, the subset of the row kept), for the statistics and the source's own configs to
    drop too.
    """
    duplicates: list[tuple[str, dict, str]] = []
    found = find_duplicate_ids(root, sessions, engine)
    if not found:
        return duplicates
    removed: dict[tuple[str, int], list[int]] = {}
    for conversation_id, first, later in found:
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
        removed.setdefault((later["split"], later["index"]), []).append(later["row"])
        duplicates.append((later["split"], row, first["subset"]))
    for (split, index), rows in removed.items():
        path = root / sessions.files[split][index]
        table = read_parquet(path)
        keep = np.ones(table.num_rows, dtype=bool)
        keep[rows] = False
        dropped_bytes = table.filter(pa.array(~keep)).nbytes
        write_shard(path, table.filter(pa.array(keep)))
        info = sessions.splits[split]
        sessions.splits[split] = datasets.SplitInfo(
            split, max(info.num_bytes - dropped_bytes, 0), info.num_examples - len(rows)
        )
    return duplicates


def drop_rows_of_duplicates(
    built: ConfigBuild, staging: Path, duplicates: list[tuple[str, dict, str]]
) -> None:
    """A source's own per-conversation config (``built``, under ``staging``) drops the rows of the sessions rows
    dropped as duplicates (``duplicates``, from ``drop_duplicate_ids``).

    Its rows are matched by (conversation_id, subset); when the kept and the dropped conversation share
    both, they cannot be told apart there, and the build stops.
    """
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
            keep = [pair not in dropped for pair in pairs]
            if all(keep):
                continue
            write_shard(path, read_parquet(path).filter(pa.array(keep)))
            info = built.splits[split]
            built.splits[split] = datasets.SplitInfo(
                split, info.num_bytes, info.num_examples - (len(keep) - sum(keep))
            )


def _id_table(root: Path, built: ConfigBuild) -> pa.Table:
    """conversation_id and subset of every sessions row, with its split, shard index, row and file order."""
    tables = []
    for order, (split, index, relative) in enumerate(
        (split, index, relative)
        for split, files in built.files.items()
        for index, relative in enumerate(files)
    ):
        table = read_parquet(root / relative, columns=["conversation_id", "subset"])
        table = (
            table.append_column("split", pa.array([split] * table.num_rows, pa.string()))
            .append_column("index", pa.array(np.full(table.num_rows, index, dtype=np.int32)))
            .append_column("row", pa.array(np.arange(table.num_rows, dtype=np.int64)))
            .append_column("order", pa.array(np.full(table.num_rows, order, dtype=np.int32)))
        )
        tables.append(table)
    return pa.concat_tables(tables) if tables else pa.table({"conversation_id": pa.array([], pa.string())})


def find_duplicate_ids(root: Path, built: ConfigBuild, engine=None) -> list[tuple[str, dict, dict]]:
    """(conversation_id, first place, later place) for every repeated id; a place names split, file and row.

    Only the id and subset columns are read, and counting is Arrow's: memory is a few dozen bytes a row. With an
    engine that finds repeated values itself (``SparkEngine.repeated_rows``), the driver reads no file: it gets the
    rows of repeated ids alone.
    """
    table = _id_table(root, built) if engine is None else _repeated_id_table(root, built, engine)
    if table.num_rows == 0:
        return []
    counts = table.group_by("conversation_id").aggregate([("conversation_id", "count")])
    repeated = counts.filter(pc.greater(counts.column("conversation_id_count"), 1)).column("conversation_id")
    if len(repeated) == 0:
        return []
    rows = table.filter(pc.is_in(table.column("conversation_id"), value_set=repeated)).to_pylist()
    rows.sort(key=lambda place: (place["order"], place["row"]))
    first: dict[str, dict] = {}
    found = []
    for place in rows:
        place["file"] = built.files[place["split"]][place["index"]]
        if place["conversation_id"] in first:
            found.append((place["conversation_id"], first[place["conversation_id"]], place))
        else:
            first[place["conversation_id"]] = place
    return found


def _repeated_id_table(root: Path, built: ConfigBuild, engine) -> pa.Table:
    """:func:`_id_table`'s columns for the rows of repeated ids, found by ``engine`` (a row's place in the
    build's list of files says its split, shard index and order)."""
    places = [(split, index) for split, files in built.files.items() for index in range(len(files))]
    paths = [text_of(root / built.files[split][index]) for split, index in places]
    rows = engine.repeated_rows(paths, "conversation_id", ["subset"])
    return pa.table(
        {
            "conversation_id": pa.array([row["conversation_id"] for row in rows], pa.string()),
            "subset": pa.array([row["subset"] for row in rows], pa.string()),
            "split": pa.array([places[row["file"]][0] for row in rows], pa.string()),
            "index": pa.array([places[row["file"]][1] for row in rows], pa.int32()),
            "row": pa.array([row["row"] for row in rows], pa.int64()),
            "order": pa.array([row["file"] for row in rows], pa.int32()),
        }
    )


def _row(path: Path, row: int) -> dict:
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


def write_shard(path: Path, table: pa.Table) -> None:
    """Write a shard's kept rows back as every shard is written (``parquet_writer.write_parquet``), the
    features read from the shard's own, not with pyarrow's defaults."""
    write_parquet(text_of(path), datasets.Features.from_arrow_schema(table.schema), lambda _: [table])
