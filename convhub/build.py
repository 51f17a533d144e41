"""Build a source into a Hub-ready folder: Parquet shards per config and split, and the dataset card.

The source is parsed once, by the builder's ``sessions`` config (the canonical records); ``turns``, ``qa``
and ``messages`` are then flattened from those Parquet shards with Arrow (``convhub.views.derive``), and only a
source's own extra configs run the builder again. The folder is assembled in a hidden staging folder beside
the output and renamed into place only when everything succeeded, so a failed build leaves no partial output.
The output may be a URL (``hdfs://``, ``s3a://``: ``convhub.storage.folders``), where an engine's tasks write directly.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import datasets
from datasets.utils.tqdm import tqdm as hf_tqdm
from huggingface_hub.utils import validate_repo_id

from convhub import registry
from convhub.console import phases
from convhub.engine.checks import quarantine
from convhub.engine.checks.duplicate_ids import drop_duplicate_ids, drop_rows_of_duplicates, forget
from convhub.engine.inputs import digests
from convhub.engine.runners.engine import ENGINE_WORK, Engine, engine_named
from convhub.engine.writers.output_shards import ConfigBuild, shard_path, split_by_subset
from convhub.errors import Notes, SourceError
from convhub.stats import Report, Statistics
from convhub.storage.abandoned import MarkedTemporaryDirectory
from convhub.storage.datasets_cache import card_configs, forget_cached_copies
from convhub.storage.folders import Folder, PathArg, folder_at, move, remove_tree
from convhub.storage.staging import staged_folder
from convhub.views.definitions import SESSIONS
from convhub.views.derive import DERIVERS, derive_views


@dataclass
class BuildResult:
    source: str
    output: Folder
    configs: dict[str, ConfigBuild]
    notes: Notes
    statistics: Statistics
    #: Records left out under ``on_bad_record="skip"`` and the file listing them (beside ``output``).
    skipped: int = 0
    quarantine: Folder | None = None
    #: Files whose rest could not be read from some point under ``on_bad_record="skip"`` (records not counted).
    unread_files: tuple[str, ...] = ()
    #: ``{name, bytes, sha256}`` of each input file (``convhub.engine.inputs.digests``), for the card.
    source_files: list[dict] = field(default_factory=list)
    #: The most processes the local build ran a split in (``num_proc``, less where a split had fewer shards);
    #: None on another engine.
    processes: int | None = None


def check_source(
    source: str,
    data_dir: str | None = None,
    subsets=None,
    source_format: str | None = None,
    on_bad_record: str = "raise",
    quarantine_dir: str | None = None,
) -> tuple[Notes, Statistics]:
    """Parse every record as the build would; return the normalization counts and the statistics.

    Conversation ids must be unique across files and subsets too. With ``on_bad_record="skip"`` the
    rejected records are counted in the notes (and written to ``quarantine_dir`` when given).
    """
    with tempfile.TemporaryDirectory(prefix="convhub-check-") as scratch:
        folder = quarantine_dir or scratch
        builder = registry.get(source)(
            data_dir=data_dir,
            subsets=_tuple(subsets),
            source_format=source_format,
            on_bad_record=quarantine.check_policy(on_bad_record),
            quarantine_dir=folder,
        )
        notes, statistics = Notes(), Statistics()
        first_seen: dict[str, str] = {}
        for split, record in builder.iter_records(notes):
            place = f"{split} split, subset {record['subset']!r}"
            conversation_id = record["conversation_id"]
            if conversation_id in first_seen:
                problem = f"duplicate conversation_id {conversation_id!r}, also in the {first_seen[conversation_id]}"
                builder.reject(SourceError(place, conversation_id, "conversation_id", problem), record)
                continue
            first_seen[conversation_id] = place
            statistics.add(split, record)
        if quarantine_dir is None:  # else the caller counts its folder
            notes.update(quarantine.counts(quarantine.collect(folder)))
    return notes, statistics


def build_source(
    source: str,
    output: PathArg,
    data_dir: str | None = None,
    configs: list[str] | None = None,
    num_proc: int | None = None,
    subsets: list[str] | None = None,
    source_format: str | None = None,
    on_bad_record: str = "raise",
    overwrite: bool = False,
    repo_id: str | None = None,
    engine: str | Engine = "local",
    spark_master: str | None = None,
    errata: str | None = None,
) -> BuildResult:
    """Build ``configs`` (all by default) of ``source`` into ``output``, replacing it only on success.

    ``engine``: ``local`` (``convhub.engine.runners.local``, ``num_proc`` processes) or ``spark``
    (``convhub.engine.runners.spark``, on ``spark_master``), which the build stops; or an ``Engine`` to reuse
    (``convhub.engine.runners.engine``), which the caller stops and whose own processes count.

    ``repo_id`` is the Hub repo the card's code loads (``ORG/<hub name>`` when not given).

    ``output`` may be new, empty or an earlier convhub output; another folder only with ``overwrite``
    (``staging.check_output`` says which folders never). It may not be or lie inside ``data_dir``. It may be a
    URL (``hdfs://``, ``s3a://``, any fsspec URL), which the engine's tasks write to.

    ``on_bad_record="skip"``: bad source records are left out, listed with their reason in
    ``<output>.quarantine.jsonl`` beside the folder, and counted in the card's normalizations.

    ``errata``: an audit of the source's labels the build carries (``ConvHubConfig.errata``; LoCoMo's).
    """
    from convhub.cards import write_card  # the card module imports Jinja2; keep `check` light

    builder_cls = registry.get(source)
    if repo_id is not None:
        validate_repo_id(repo_id)  # a ValueError naming what is wrong, before any work
    configs = list(dict.fromkeys(configs or [view.name for view in builder_cls.views()]))  # each once
    for name in configs:
        builder_cls.view_named(name)  # fail on a misspelt config before any work
    quarantine.check_policy(on_bad_record)
    output = folder_at(output)
    quarantine.check_replaceable(quarantine.path_beside(output))
    old_configs = card_configs(output)
    runner = engine_named(engine, spark_master, num_proc) if isinstance(engine, str) else engine
    with contextlib.ExitStack() as stack:
        if isinstance(engine, str):
            stack.callback(runner.stop)
        staging = stack.enter_context(staged_folder(output, overwrite, inputs=[data_dir]))
        with MarkedTemporaryDirectory(prefix="convhub-work-", dir=os.environ.get("CONVHUB_TMPDIR")) as work:
            run = _Run(builder_cls, data_dir, _tuple(subsets), runner, Path(work), staging, source_format)
            run.on_bad_record = on_bad_record  # (a keyword of _Run: kept apart from the positional ones)
            run.errata = errata
            built = run.build_all(configs)
            notes, statistics = run.report(source, subsets)
            rejected = quarantine.collect(run.quarantine_dir)
            notes.update(quarantine.counts(rejected))
            for config, split in run.left_out:
                notes.add(f"split with no row left out of the build: {config}/{split}")
            downloads = str(Path(work) / "cache" / "downloads")  # (without data_dir: what the build fetched)
            source_files = digests.describe(builder_cls.input_files(data_dir, subsets, downloads))
        if rejected and (not built or (run.sessions is not None and not run.sessions.splits)):
            quarantine.save(rejected, quarantine.path_beside(output))
            raise SourceError(
                data_dir or source,
                None,
                None,
                f"no record left to build: all {len(rejected)} rejected ({quarantine.path_beside(output)})",
            )
        if not built:  # a card with no config could not be loaded, nor a folder without one published
            raise ValueError(
                f"{source}: nothing to build: {', '.join(configs)} had no row in this data "
                "(a config with no row is left out of a build)"
            )
        result = BuildResult(
            source, output, built, notes, statistics, skipped=quarantine.records_lost(rejected)
        )
        result.unread_files = tuple(quarantine.unread_files(rejected))
        result.source_files = source_files
        result.processes = run.processes or None
        phases.info("%s: writing the dataset card", source)
        write_card(result, staging, repo_id)
        phases.info("%s: moving the build into place at %s", source, output)
    forget_cached_copies(output, old_configs | card_configs(output))
    _place_quarantine(result, rejected)
    return result


def _place_quarantine(result: BuildResult, rejected: list[dict]) -> None:
    """Write the build's rejections beside its folder, or remove a file an earlier build left there."""
    target = quarantine.path_beside(result.output)
    if rejected:
        quarantine.save(rejected, target)
        result.quarantine = target
    else:
        target.unlink(missing_ok=True)


@dataclass
class _Run:
    """One build: where things go, and the sessions build every derived view reads."""

    builder_cls: type
    data_dir: str | None
    subsets: tuple[str, ...] | None
    engine: Engine
    work: Path
    staging: Folder
    source_format: str | None = None
    sessions: ConfigBuild | None = None
    sessions_root: Folder | None = None
    left_out: list[tuple[str, str]] = field(default_factory=list)
    on_bad_record: str = "raise"
    errata: str | None = None
    #: Sessions rows left out as later duplicates of a conversation_id (skip mode): (split, row as a dict, the
    #: subset of the row kept).
    duplicates: list[tuple[str, dict, str]] = field(default_factory=list)
    #: What the derived views left out or merged (``messages``: sessions no chat template takes), for the card.
    derive_notes: Counter = field(default_factory=Counter)
    #: The most processes a split of the local build ran in (``ConversationBuilder.processes_run``).
    processes: int = 0

    @property
    def scratch(self) -> Folder:
        """Where the engine's tasks write before their files are placed (``Engine.scratch``); a folder it makes
        in the staging folder (``ENGINE_WORK``) is removed before the card."""
        return self.engine.scratch(self.work, self.staging)

    @property
    def quarantine_dir(self) -> Path:
        folder = self.work / "quarantine"
        folder.mkdir(exist_ok=True)
        return folder

    def derivable(self, name: str) -> bool:
        """Whether ``name`` comes from the built ``sessions`` shards, not from parsing the source again: the
        shared flattened views (Arrow, ``derive.DERIVERS``) and a source's own views of the record (LoCoMo's
        ``observations`` and ``events``, ConvLab's ``dialogues``), which are functions of the canonical record."""
        view = self.builder_cls.view_named(name)
        return name != SESSIONS.name and (name in DERIVERS or view.rows_from_record is not None)

    def build_all(self, configs: list[str]) -> dict[str, ConfigBuild]:
        if any(name == SESSIONS.name or self.derivable(name) for name in configs):
            keep = SESSIONS.name in configs
            self.sessions_root = self.staging if keep else self.scratch / "sessions-only"
            self.sessions_root.mkdir(parents=True, exist_ok=True)
            self.sessions = self.run_builder(SESSIONS.name, self.sessions_root, report=True)
            phases.info("%s: checking that every conversation_id is unique", self.builder_cls.SOURCE)
            self.duplicates = drop_duplicate_ids(
                self.sessions_root, self.sessions, self.on_bad_record, self.quarantine_dir, self.engine
            )
        derived = self.derive([name for name in configs if self.derivable(name)])
        built = {}
        for name in configs:
            if name == SESSIONS.name:
                config = self.sessions
            elif name in derived:
                config = derived[name]
            else:
                config = self.run_builder(name, self.staging, report=False)
                drop_rows_of_duplicates(config, self.staging, self.duplicates)
            if config is not None and self.drop_empty_splits(config):
                built[name] = config
        remove_tree(self.staging / ENGINE_WORK)
        if self.builder_cls.SUBSET_CONFIGS:
            phases.info("%s: one config per subset: splitting the files by subset", self.builder_cls.SOURCE)
            for config in built.values():
                split_by_subset(self.staging, config)
        return built

    def run_builder(self, name: str, root: Folder, report: bool) -> ConfigBuild:
        report_dir = self.work / "reports"
        report_dir.mkdir(exist_ok=True)
        builder = self.builder_cls(
            config_name=name,
            data_dir=self.data_dir,
            subsets=self.subsets,
            source_format=self.source_format,
            report_dir=str(report_dir) if report else None,
            on_bad_record=self.on_bad_record,
            quarantine_dir=str(self.quarantine_dir),
            errata=self.errata,
            cache_dir=str(self.work / "cache"),
        )
        downloads = str(self.work / "cache" / "downloads")
        written = self.engine.write_config(builder, self.scratch / f"written-{name}", downloads)
        self.processes = max(self.processes, builder.processes_run)
        built = ConfigBuild(name, builder.info.features)
        (root / name).mkdir()
        for split, split_written in sorted(written.items()):
            built.splits[split] = split_written.info
            built.files[split] = []
            for index, path in enumerate(split_written.files):
                relative = shard_path(name, split, index, len(split_written.files))
                move(path, root / relative)
                built.files[split].append(relative)
        return built

    def derive(self, names: list[str]) -> dict[str, ConfigBuild]:
        """Derive ``names`` (``derivable``) from the sessions shards: one read of each shard writes every view,
        one engine task per shard (``Engine.map``)."""
        if not names:
            return {}
        sessions, sessions_root = self.sessions, self.sessions_root
        assert sessions is not None and sessions_root is not None, "build_all builds sessions first"
        built = {name: ConfigBuild(name, self.builder_cls.view_named(name).features) for name in names}
        tasks = []
        for name in names:
            (self.staging / name).mkdir()
        for split, sessions_files in sessions.files.items():
            for index, sessions_file in enumerate(sessions_files):
                outputs = {}
                for name, config in built.items():
                    relative = shard_path(name, split, index, len(sessions_files))
                    config.files.setdefault(split, []).append(relative)
                    rows_from_record = (
                        None if name in DERIVERS else self.builder_cls.view_named(name).rows_from_record
                    )
                    outputs[name] = (config.features, self.staging / relative, rows_from_record)
                tasks.append((split, outputs, sessions_root / sessions_file))
        label = f"{self.builder_cls.SOURCE} {', '.join(names)} (from sessions)"
        done = self.engine.map(_derive_task, [(outputs, path) for _, outputs, path in tasks])
        with hf_tqdm(total=len(tasks), desc=label, unit=" shards") as bar, contextlib.closing(done):
            counts = []
            for shard_counts in done:  # in task order, as each finishes
                counts.append(shard_counts)
                bar.update()
        for (split, _, _), (shard_counts, notes) in zip(tasks, counts, strict=True):
            self.derive_notes.update(notes)
            for name, (rows, size) in shard_counts.items():
                info = built[name].splits.get(split) or datasets.SplitInfo(split, 0, 0)
                built[name].splits[split] = datasets.SplitInfo(
                    split, info.num_bytes + size, info.num_examples + rows
                )
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
            remove_tree(self.staging / built.name)
        return bool(built.splits)

    def report(self, source: str, subsets) -> tuple[Notes, Statistics]:
        """The workers' merged notes and statistics; a checking pass only if no config parsed records."""
        report = Report.load_all(str(self.work / "reports")) if self.sessions else None
        if report is None:
            return check_source(
                source,
                self.data_dir,
                subsets,
                self.source_format,
                self.on_bad_record,
                str(self.quarantine_dir),
            )
        for split, row, _ in self.duplicates:
            forget(report.statistics, split, row)
        report.notes.update(self.derive_notes)
        return report.notes, report.statistics


def _derive_task(task: tuple[dict, Path]):
    """``derive_views`` of one sessions shard, as an engine's task."""
    return derive_views(*task)


def _tuple(values) -> tuple[str, ...] | None:
    return tuple(values) if values else None
