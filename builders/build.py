"""Build a source into a Hub-ready folder: Parquet shards per config and split, and the dataset card.

The source is parsed once, by the builder's ``sessions`` config (the canonical records); ``turns``, ``qa``
and ``messages`` are then flattened from those Parquet shards with Arrow (``builders.derive``), and only a
source's own extra configs run the builder again. The folder is assembled in a hidden staging folder beside
the output and renamed into place only when everything succeeded, so a failed build leaves no partial output.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from datasets.arrow_writer import ParquetWriter

from builders import registry
from builders.derive import DERIVERS, derive_file
from builders.errors import Notes, SourceError
from builders.stats import Report, Statistics
from builders.views import SESSIONS

SHARD_NAME = re.compile(r"-(?P<split>[^-]+?)(?:-(?P<index>\d{5})-of-(?P<total>\d{5}))?\.parquet$")


@dataclass
class ConfigBuild:
    """What one config produced: its features and, per split, rows, bytes and shard paths."""

    name: str
    features: datasets.Features
    splits: dict[str, datasets.SplitInfo] = field(default_factory=dict)
    files: dict[str, list[str]] = field(default_factory=dict)
    #: For a source with ``SUBSET_CONFIGS``: subset → the rows of that subset alone (its own config in the card).
    subsets: dict[str, ConfigBuild] = field(default_factory=dict)


@dataclass
class BuildResult:
    source: str
    output: Path
    configs: dict[str, ConfigBuild]
    notes: Notes
    statistics: Statistics


def check_source(
    source: str, data_dir: str | None = None, subsets=None, source_format: str | None = None
) -> tuple[Notes, Statistics]:
    """Parse every record as the build would; return the normalization counts and the statistics."""
    builder = registry.get(source)(data_dir=data_dir, subsets=_tuple(subsets), source_format=source_format)
    notes, statistics = Notes(), Statistics()
    for split, record in builder.iter_records(notes):
        statistics.add(split, record)
    return notes, statistics


def build_source(
    source: str,
    output: str | os.PathLike,
    data_dir: str | None = None,
    configs: list[str] | None = None,
    num_proc: int | None = None,
    subsets: list[str] | None = None,
    source_format: str | None = None,
) -> BuildResult:
    """Build ``configs`` (all by default) of ``source`` into ``output``, replacing it only on success."""
    from builders.cards import write_card  # the card module imports Jinja2; keep `check` light

    builder_cls = registry.get(source)
    configs = list(configs or [view.name for view in builder_cls.views()])
    for name in configs:
        builder_cls.view_named(name)  # fail on a misspelt config before any work
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}.partial-", dir=output.parent))
    try:
        with tempfile.TemporaryDirectory(prefix="convhub-work-") as work:
            run = _Run(builder_cls, data_dir, _tuple(subsets), num_proc, Path(work), staging, source_format)
            built = run.build_all(configs)
            notes, statistics = run.report(source, subsets)
            for config, split in run.left_out:
                notes.add(f"split with no row left out of the build: {config}/{split}")
        result = BuildResult(source, output, built, notes, statistics)
        write_card(result, staging)
        if output.exists():
            shutil.rmtree(output)
        os.replace(staging, output)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return result


@dataclass
class _Run:
    """One build: where things go, and the sessions build every derived view reads."""

    builder_cls: type
    data_dir: str | None
    subsets: tuple[str, ...] | None
    num_proc: int | None
    work: Path
    staging: Path
    source_format: str | None = None
    sessions: ConfigBuild | None = None
    sessions_root: Path | None = None
    left_out: list[tuple[str, str]] = field(default_factory=list)

    def build_all(self, configs: list[str]) -> dict[str, ConfigBuild]:
        if any(name == SESSIONS.name or name in DERIVERS for name in configs):
            keep = SESSIONS.name in configs
            self.sessions_root = self.staging if keep else self.work / "sessions-only"
            self.sessions_root.mkdir(exist_ok=True)
            self.sessions = self.run_builder(SESSIONS.name, self.sessions_root, report=True)
        built = {}
        for name in configs:
            if name == SESSIONS.name:
                config = self.sessions
            elif name in DERIVERS:
                config = self.derive(name)
            else:
                config = self.run_builder(name, self.staging, report=False)
            if self.drop_empty_splits(config):
                built[name] = config
        if self.builder_cls.SUBSET_CONFIGS:
            for config in built.values():
                split_by_subset(self.staging, config)
        return built

    def run_builder(self, name: str, root: Path, report: bool) -> ConfigBuild:
        report_dir = self.work / "reports"
        report_dir.mkdir(exist_ok=True)
        builder = self.builder_cls(
            config_name=name,
            data_dir=self.data_dir,
            subsets=self.subsets,
            source_format=self.source_format,
            report_dir=str(report_dir) if report else None,
            cache_dir=str(self.work / "cache"),
        )
        try:
            builder.download_and_prepare(file_format="parquet", num_proc=self.num_proc)
        except datasets.exceptions.DatasetGenerationError as error:
            if isinstance(error.__cause__, SourceError):
                raise error.__cause__ from None  # the message names file, record and field
            raise
        built = ConfigBuild(name, builder.info.features)
        shards: dict[str, list[str]] = {}
        for path in glob.glob(os.path.join(builder.cache_dir, "*.parquet")):
            split = SHARD_NAME.search(os.path.basename(path)).group("split")
            shards.setdefault(split, []).append(path)
        (root / name).mkdir()
        for split, paths in sorted(shards.items()):
            paths.sort()
            built.splits[split] = builder.info.splits[split]
            built.files[split] = []
            for index, path in enumerate(paths):
                relative = _shard_path(name, split, index, len(paths))
                shutil.move(path, root / relative)
                built.files[split].append(relative)
        return built

    def derive(self, name: str) -> ConfigBuild:
        features = self.builder_cls.view_named(name).features
        built = ConfigBuild(name, features)
        (self.staging / name).mkdir()
        for split, sessions_files in self.sessions.files.items():
            rows = size = 0
            built.files[split] = []
            for index, sessions_file in enumerate(sessions_files):
                relative = _shard_path(name, split, index, len(sessions_files))
                count, num_bytes = derive_file(
                    name, features, self.sessions_root / sessions_file, self.staging / relative
                )
                rows, size = rows + count, size + num_bytes
                built.files[split].append(relative)
            built.splits[split] = datasets.SplitInfo(split, size, rows)
        return built

    def drop_empty_splits(self, built: ConfigBuild) -> bool:
        """Remove splits with no row (``load_dataset`` cannot load them); False when none is left."""
        for split, info in list(built.splits.items()):
            if info.num_examples == 0:
                for relative in built.files.pop(split):
                    (self.staging / relative).unlink(missing_ok=True)
                del built.splits[split]
                self.left_out.append((built.name, split))
        if not built.splits:
            shutil.rmtree(self.staging / built.name, ignore_errors=True)
        return bool(built.splits)

    def report(self, source: str, subsets) -> tuple[Notes, Statistics]:
        """The workers' merged notes and statistics; a checking pass only if no config parsed records."""
        report = Report.load_all(str(self.work / "reports")) if self.sessions else None
        if report is None:
            return check_source(source, self.data_dir, subsets, self.source_format)
        return report.notes, report.statistics


def split_by_subset(staging: Path, built: ConfigBuild, batch_rows: int = 256) -> None:
    """Rewrite each split of ``built`` as one Parquet file per subset: ``<config>/<subset>/<split>-...``.

    The card then offers ``<config>-<subset>`` configs that load one subset alone, while ``<config>`` lists
    every subset's files. Streams record batches, so memory holds one batch per subset at most. A split
    with no rows keeps its empty file; a config without a ``subset`` column, or with a null one, is left as is.
    """
    if "subset" not in built.features:
        return
    for split, files in list(built.files.items()):
        paths = [staging / relative for relative in files]
        if any(pq.read_table(path, columns=["subset"]).column("subset").null_count for path in paths):
            return
        writers: dict[str, tuple[str, ParquetWriter]] = {}
        for path in paths:
            for batch in pq.ParquetFile(path).iter_batches(batch_size=batch_rows):
                table = pa.Table.from_batches([batch])
                for subset in pc.unique(table.column("subset")).to_pylist():
                    if subset not in writers:
                        relative = f"{built.name}/{subset}/{split}-00000-of-00001.parquet"
                        (staging / relative).parent.mkdir(parents=True, exist_ok=True)
                        writer = ParquetWriter(features=built.features, path=str(staging / relative))
                        writers[subset] = (relative, writer)
                    writers[subset][1].write_table(table.filter(pc.equal(table.column("subset"), subset)))
        if not writers:
            continue
        for path in paths:
            path.unlink()
        built.files[split] = []
        for subset, (relative, writer) in sorted(writers.items()):
            rows, size = writer.finalize()
            writer.close()
            part = built.subsets.setdefault(subset, ConfigBuild(f"{built.name}-{subset}", built.features))
            part.splits[split] = datasets.SplitInfo(split, size, rows)
            part.files[split] = [relative]
            built.files[split].append(relative)


def _shard_path(config: str, split: str, index: int, total: int) -> str:
    return f"{config}/{split}-{index:05d}-of-{total:05d}.parquet"


def _tuple(values) -> tuple[str, ...] | None:
    return tuple(values) if values else None
