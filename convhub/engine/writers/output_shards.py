"""A config's Parquet shards in a build folder: what a config built, the shards' names, one config per subset."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import datasets
import pyarrow as pa
import pyarrow.compute as pc

from convhub.engine.writers.parquet_writer import ParquetWriter
from convhub.storage.folders import Folder, move, parquet_file, read_parquet, text_of

#: A split name every reader takes: word characters, parts joined by single dots (``fullmatch``): it becomes part
#: of a shard's file name, so no separator, no ``..`` and no line break.
SPLIT_NAME = re.compile(r"\w+(\.\w+)*")
#: Split names ``datasets`` keeps for itself (``all`` is the union of every split, in any case).
RESERVED_SPLITS = frozenset(("all",))


@dataclass
class ConfigBuild:
    """What one config produced: its features and, per split, rows, bytes and shard paths."""

    name: str
    features: datasets.Features
    splits: dict[str, datasets.SplitInfo] = field(default_factory=dict)
    files: dict[str, list[str]] = field(default_factory=dict)
    #: For a source with ``SUBSET_CONFIGS``: subset → the rows of that subset alone (its own config in the card).
    subsets: dict[str, ConfigBuild] = field(default_factory=dict)


def shard_path(config: str, split: str, index: int, total: int) -> str:
    """Where shard ``index`` of ``total`` of a split of ``config`` (``<config>`` or ``<config>/<subset>``) goes."""
    return f"{config}/{split}-{index:05d}-of-{total:05d}.parquet"


#: A path ``shard_path`` makes, relative to the build folder: how ``push`` knows a file of the layout it owns.
SHARD_PATH = re.compile(r"^[^/]+/(?:[^/]+/)?[^/]+-\d{5}-of-\d{5}\.parquet$")


def split_by_subset(staging: Folder, built: ConfigBuild, batch_rows: int = 256) -> None:
    """Rewrite each split of ``built`` as one Parquet file per subset: ``<config>/<subset>/<split>-...``.

    The card then offers ``<config>-<subset>`` configs that load one subset alone, while ``<config>`` lists
    every subset's files. Streams record batches, so memory holds one batch per subset at most. A config without
    a ``subset`` column, or with a null one, is left as is; every split has rows (the build drops an empty one).
    """
    if "subset" not in built.features:
        return
    for split, files in list(built.files.items()):
        paths = [staging / relative for relative in files]
        subsets = [read_parquet(path, columns=["subset"]).column("subset") for path in paths]
        if any(column.null_count for column in subsets):
            return
        found = set().union(*(pc.unique(column).to_pylist() for column in subsets))
        if len(found) == 1:  # one subset (a build of one dataset): its files move, nothing is rewritten
            _move_to_subset(staging, built, split, found.pop())
            continue
        writers: dict[str, tuple[str, ParquetWriter]] = {}
        for path in paths:
            for batch in parquet_file(path, pre_buffer=False).iter_batches(batch_size=batch_rows):
                table = pa.Table.from_batches([batch])
                for subset in pc.unique(table.column("subset")).to_pylist():
                    if subset not in writers:
                        relative = shard_path(f"{built.name}/{subset}", split, 0, 1)
                        (staging / relative).parent.mkdir(parents=True, exist_ok=True)
                        writer = ParquetWriter(features=built.features, path=text_of(staging / relative))
                        writers[subset] = (relative, writer)
                    writers[subset][1].write_table(table.filter(pc.equal(table.column("subset"), subset)))
        for path in paths:
            path.unlink()
        built.files[split] = []
        for subset, (relative, writer) in sorted(writers.items()):
            rows, size = writer.finalize()  # (the file is closed: nothing is left for ``close``)
            part = _subset_config(built, subset)
            part.splits[split] = datasets.SplitInfo(split, size, rows)
            part.files[split] = [relative]
            built.files[split].append(relative)


def _move_to_subset(staging: Folder, built: ConfigBuild, split: str, subset: str) -> None:
    """Every row of ``split`` is in ``subset``: its files become that subset's files by a rename."""
    moved = []
    for index, relative in enumerate(built.files[split]):
        target = shard_path(f"{built.name}/{subset}", split, index, len(built.files[split]))
        (staging / target).parent.mkdir(parents=True, exist_ok=True)
        move(staging / relative, staging / target)
        moved.append(target)
    built.files[split] = moved
    part = _subset_config(built, subset)
    part.splits[split] = built.splits[split]
    part.files[split] = list(moved)


def _subset_config(built: ConfigBuild, subset: str) -> ConfigBuild:
    """The ``<config>-<subset>`` config of ``built``, made on first use."""
    return built.subsets.setdefault(subset, ConfigBuild(f"{built.name}-{subset}", built.features))
