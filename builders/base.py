"""The ``GeneratorBasedBuilder`` every source extends.

It turns a source's parser into one builder config per view: the shared views of
``builders.views`` for every source, plus the source's own ``EXTRA_VIEWS``. A source builder only says
where its files are (``shards``) and how one shard becomes canonical records (``parse_shard``); table
views (ontology, database) also implement ``table_rows``.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import datasets
from datasets.builder import Key

from builders import quarantine
from builders.errors import Notes, SourceError
from builders.stats import Report
from builders.views import DEFAULT_VIEW, SHARED_VIEWS, Record, Row, View

Shard = Any  # a path, or a dict describing a slice of the source that one worker can read alone


@dataclass
class ConvHubConfig(datasets.BuilderConfig):
    """A view of one source. ``subsets`` limits the build to some subsets where a source has several."""

    subsets: tuple[str, ...] | None = None
    #: A source file format where a source has several and detects them (MNBVC: multiturn, qa, forum);
    #: None = detect. ``convhub build|check --format``.
    source_format: str | None = None
    #: When set, each worker writes the normalization counts and statistics of the records it parsed
    #: here (``report-*.json``), so a build needs no separate checking pass over the source.
    report_dir: str | None = None
    #: ``raise``: the first bad source record stops the build (a SourceError naming file, record, field).
    #: ``skip``: it is left out and written to ``quarantine_dir`` (see ``builders.quarantine``).
    on_bad_record: str = "raise"
    #: Where each process appends the records it rejected under ``skip`` (``quarantine-<pid>.jsonl``).
    quarantine_dir: str | None = None


class ConversationBuilder(datasets.GeneratorBasedBuilder):
    """Shared views for one source; subclasses set the class attributes and the two parse hooks."""

    SOURCE: ClassVar[str]
    HUB_NAME: ClassVar[str]  # the folder and Hub repo name, e.g. "locomo-unified"
    PRETTY_NAME: ClassVar[str]
    LICENSE: ClassVar[str]
    LANGUAGES: ClassVar[tuple[str, ...]]
    HOMEPAGE: ClassVar[str]
    CITATION: ClassVar[str]
    DESCRIPTION: ClassVar[str]
    ROLE_MAPPING: ClassVar[dict[str, str]]  # source speaker/role → chat role, shown in the card
    EXTRA_VIEWS: ClassVar[tuple[View, ...]] = ()
    #: Publish every config once more per subset (``<config>-<subset>``), its files under ``<config>/<subset>/``.
    SUBSET_CONFIGS: ClassVar[bool] = False

    BUILDER_CONFIG_CLASS = ConvHubConfig
    DEFAULT_CONFIG_NAME = DEFAULT_VIEW

    def __init__(self, *args, data_dir=None, **kwargs):
        # a pathlib.Path is welcome; parsers compare and join strings (datasets sets it after __post_init__)
        super().__init__(*args, data_dir=None if data_dir is None else os.fspath(data_dir), **kwargs)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.BUILDER_CONFIGS = [
            ConvHubConfig(name=view.name, description=view.description) for view in cls.views()
        ]

    @classmethod
    def views(cls) -> tuple[View, ...]:
        return SHARED_VIEWS + cls.EXTRA_VIEWS

    @classmethod
    def view_named(cls, name: str) -> View:
        for view in cls.views():
            if view.name == name:
                return view
        raise KeyError(f"{cls.SOURCE} has no config {name!r}; configs: {[v.name for v in cls.views()]}")

    @classmethod
    def sample_dir(cls) -> str:
        """Small files in the source's own format that ship inside the package."""
        return os.path.join(os.path.dirname(inspect.getfile(cls)), "sample")

    # -- hooks a source implements -------------------------------------------------------------

    def shards(self, dl_manager: datasets.DownloadManager) -> dict[str, list[Shard]]:
        """Split name → the shards of that split (local paths after download)."""
        raise NotImplementedError

    def parse_shard(self, shard: Shard, notes: Notes) -> Iterator[Record]:
        """Canonical records of one shard, in a deterministic order."""
        raise NotImplementedError

    def table_rows(self, view: View, shard: Shard) -> Iterator[Row]:
        """Rows of a table view (one not derived from conversations)."""
        raise NotImplementedError(f"{self.SOURCE} has no table view {view.name!r}")

    # -- bad records -----------------------------------------------------------------------------

    def reject(self, error: SourceError, raw: Any = None, scope: str = "record") -> None:
        """A bad source record: raised (``on_bad_record="raise"``), or quarantined and skipped.

        Parsers take this as their ``reject`` callback, called once per bad record (a LoCoMo sample, a
        GigaMemory or MNBVC line, a ConvLab dialogue) with the record's raw text or value.
        """
        if quarantine.check_policy(self.config.on_bad_record) == "raise":
            raise error
        quarantine.write(self.config.quarantine_dir, error, raw, scope)

    def records_of(self, shard: Shard, notes: Notes) -> Iterator[Record]:
        """``parse_shard`` under the bad-record policy: with ``skip``, an error the parser could not pin
        on one record (an unreadable file, a truncated gzip) quarantines the rest of the shard."""
        try:
            yield from self.parse_shard(shard, notes)
        except SourceError as error:
            self.reject(error, None, scope="file")

    def _table_rows(self, view: View, shard: Shard) -> Iterator[Row]:
        try:
            yield from self.table_rows(view, shard)
        except SourceError as error:
            self.reject(error, None, scope="file")

    # -- datasets plumbing ---------------------------------------------------------------------

    @property
    def view(self) -> View:
        return self.view_named(self.config.name)

    def _info(self) -> datasets.DatasetInfo:
        return datasets.DatasetInfo(
            description=self.DESCRIPTION,
            features=self.view.features,
            homepage=self.HOMEPAGE,
            license=self.LICENSE,
            citation=self.CITATION,
        )

    def _split_generators(self, dl_manager):
        return [
            datasets.SplitGenerator(name=split, gen_kwargs={"shards": shards, "split": split})
            for split, shards in self.shards(dl_manager).items()
        ]

    def _generate_examples(self, shards: list[Shard], split: str | None = None) -> Iterator[tuple[Key, Row]]:
        view = self.view
        report = Report() if self.config.report_dir and not view.is_table else None
        for shard_index, shard in enumerate(shards):
            if view.is_table:
                rows = self._table_rows(view, shard)
            else:
                records = self.records_of(shard, report.notes if report else Notes())
                if report:
                    records = report.counting(split, records)
                rows = (row for record in records for row in view.rows_from_record(record))
            for row_index, row in enumerate(rows):
                yield Key(shard_index, row_index), row
        if report:
            report.save(self.config.report_dir)

    # -- used by `convhub check` and the card --------------------------------------------------

    def iter_records(self, notes: Notes) -> Iterator[tuple[str, Record]]:
        """(split, record) for every canonical record, parsed exactly as the build parses them."""
        dl_manager = datasets.DownloadManager(dataset_name=self.SOURCE, data_dir=self.config.data_dir)
        for split, shards in self.shards(dl_manager).items():
            for shard in shards:
                for record in self.records_of(shard, notes):
                    yield split, record
