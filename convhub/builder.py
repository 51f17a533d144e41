"""The ``GeneratorBasedBuilder`` every source extends.

It turns a source's parser into one builder config per view: the shared views of
``convhub.views.definitions`` for every source, plus the source's own ``EXTRA_VIEWS``. A source builder only says
where its files are (``shards``) and how one shard becomes canonical records: by naming its ``READER`` and its
``CONVERT`` (the default ``parse_shard`` runs reader -> record loop -> conversion, with the duplicate-id check of
its ``ID_FIELD``), or by a ``parse_shard`` of its own; table views (ontology, database) also implement
``table_rows``.
"""

from __future__ import annotations

import inspect
import os
import posixpath
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, Required, TypedDict, cast

import datasets
from datasets import config as datasets_config
from datasets.builder import Key
from datasets.download.streaming_download_manager import StreamingDownloadManager

from convhub.engine.checks import quarantine
from convhub.engine.grouping import group_by_key, local_groupby
from convhub.engine.inputs import digests
from convhub.engine.inputs.downloads import source_url
from convhub.engine.inputs.listing import Listing, SourceFile
from convhub.engine.readers.contract import Place, Reader
from convhub.engine.readers.record_loop import UniqueIds, convert_records
from convhub.engine.readers.storable import SurrogateScreen, unstorable
from convhub.engine.runners.input_shards import (
    GroupShard,
    Partition,
    Shard,
    SortedPartition,
    own_shard,
    shard_name,
)
from convhub.engine.runners.memory import each_made_with_fewer_collections, fewer_collections
from convhub.errors import NESTED_TOO_DEEPLY, Notes, SourceError
from convhub.stats import Report
from convhub.views.definitions import DEFAULT_VIEW, QA, SHARED_VIEWS, Record, Row, View

#: The download managers ``datasets`` gives ``_split_generators``: a build's, or a stream's (``as_streaming_dataset``),
#: which reads URLs in place; a source's listing takes either.
DownloadManagers = datasets.DownloadManager | StreamingDownloadManager


def _too_deep(shard: Shard) -> SourceError:
    """Where a parser did not catch it by record: the shard is named."""
    return SourceError(shard_name(shard), None, None, NESTED_TOO_DEEPLY)


def download_folder(dl_manager: DownloadManagers) -> str:
    """Where a source copies a file it reads at a URL: the download folder of ``datasets``' manager (a build's own
    work folder; a stream's or a check's cache)."""
    config = getattr(dl_manager, "download_config", None)
    return str(getattr(config, "cache_dir", None) or datasets_config.DOWNLOADED_DATASETS_PATH)


def group_shard(files: list[tuple[str, str]], sizes: list[int], partition_bytes: int) -> GroupShard:
    """Rows of ``files`` ((name, path); ``sizes``: their bytes, uncompressed) whose conversations may lie anywhere
    in them: an engine regroups them into partitions of about ``partition_bytes`` (the embedded engine in
    ``ConversationBuilder.local_shards``, Spark's shuffle in ``convhub.engine.runners.spark``)."""
    return GroupShard(files, sizes, group_by_key.partition_count(sum(sizes), partition_bytes))


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
    #: ``skip``: it is left out and written to ``quarantine_dir`` (see ``convhub.engine.checks.quarantine``).
    on_bad_record: str = "raise"
    #: Where each process appends the records it rejected under ``skip`` (``quarantine-<pid>.jsonl``).
    quarantine_dir: str | None = None
    #: An audit of the source's labels to carry in the build (LoCoMo's, ``convhub build --errata``); a source that
    #: takes none refuses it (``ConversationBuilder.TAKES_ERRATA``).
    errata: str | None = None


class CardLicense(TypedDict, total=False):
    """The card's license keys (``ConversationBuilder.card_license``): a None one is left out of the card."""

    license: Required[str]
    license_name: str | None
    license_link: str | None


class ConversationBuilder(datasets.GeneratorBasedBuilder):
    """Shared views for one source; subclasses set the class attributes and the two parse hooks."""

    config: ConvHubConfig  # (datasets makes it of BUILDER_CONFIG_CLASS)

    SOURCE: ClassVar[str]
    HUB_NAME: ClassVar[str]  # the folder and Hub repo name, e.g. "locomo-unified"
    PRETTY_NAME: ClassVar[str]
    LICENSE: ClassVar[str]
    LANGUAGES: ClassVar[tuple[str, ...]]
    HOMEPAGE: ClassVar[str]
    CITATION: ClassVar[str]
    DESCRIPTION: ClassVar[str]
    ROLE_MAPPING: ClassVar[dict[str, str]]  # source speaker/role → chat role, shown in the card
    #: The card's ``source_datasets``: ``extended|<Hub repo>``, or ``extended|other-<name>`` for a source that is
    #: not on the Hub.
    SOURCE_DATASETS: ClassVar[tuple[str, ...]] = ()
    #: With ``LICENSE = "other"``: the card's ``license_name`` (a slug) and ``license_link``, which the Hub asks for.
    LICENSE_NAME: ClassVar[str | None] = None
    LICENSE_LINK: ClassVar[str | None] = None
    EXTRA_VIEWS: ClassVar[tuple[View, ...]] = ()
    #: Publish every config once more per subset (``<config>-<subset>``), its files under ``<config>/<subset>/``.
    SUBSET_CONFIGS: ClassVar[bool] = False
    #: The file formats ``--format`` may name, for a source with several (MNBVC); empty: no ``--format``.
    FORMATS: ClassVar[tuple[str, ...]] = ()
    #: Rows per writer batch of some configs (config name → rows), where ``datasets``' default batch (1,000 rows,
    #: held in memory until written) would hold too much, e.g. ``sessions`` rows that are whole long conversations.
    #: A ``writer_batch_size`` given to the builder wins.
    WRITER_BATCH_SIZES: ClassVar[dict[str, int]] = {}
    #: Whether the source's records can hold memory questions. A source without them (ConvLab, MNBVC: its parser
    #: always gives ``questions: []``) streams ``qa`` as no row at once, instead of parsing every record for none.
    HAS_QUESTIONS: ClassVar[bool] = True
    #: Whether the source reads an audit of its labels (``ConvHubConfig.errata``).
    TAKES_ERRATA: ClassVar[bool] = False
    #: The reader of the source's files (``convhub.engine.readers``: ``JsonList(...)``, ...), for the default
    #: ``parse_shard``: each shard (a path, or a dict with ``path`` and ``name``) is read by it and each raw record
    #: converted by ``CONVERT(raw, place, notes)`` (give it as ``staticmethod(parse.convert)``).
    READER: ClassVar[Reader | None] = None
    CONVERT: ClassVar[Callable[[Any, Place, Notes], Record]]
    #: The key of a raw record that holds its id: a record whose id an earlier one of its file holds is rejected
    #: while parsing (``record_loop.UniqueIds``), named by file, record and this field.
    ID_FIELD: ClassVar[str | None] = None
    #: Whether an id is unique across files too (LoCoMo's ``sample_id`` is the conversation_id; LongMemEval's
    #: ``question_id`` is unique only within a subset's file), checked where one process reads every file (a
    #: stream, ``convhub check``, a build that raises); other repeats are the build's conversation_id check's.
    ID_ACROSS_FILES: ClassVar[bool] = False
    #: How the source's files lie in ``--data-dir``: a file per subset (the default), a folder per subset, a file
    #: per split, files at any depth (``convhub.engine.inputs.listing.Listing``); ``listed_files`` lists them.
    LISTING: ClassVar[Listing] = Listing()

    BUILDER_CONFIG_CLASS = ConvHubConfig
    DEFAULT_CONFIG_NAME = DEFAULT_VIEW
    #: The build's ``num_proc`` (``runners.local.write_config``, ``download_and_prepare``); None where nothing is
    #: built (a stream, ``check``).
    _build_processes: int | None = None
    #: The most processes a split was written in by the local engine (``runners.local.write_config``).
    processes_run: int = 0
    #: id → (file, record) of the first record with it this process read, where ``ID_ACROSS_FILES`` is checked.
    _first_files: dict[Hashable, tuple[str, str | int]] | None = None
    #: The sizes of the regrouping of a ``group_shard`` (``convhub.engine.grouping.local_groupby``); tests make them tiny.
    PARTITION_BYTES: ClassVar[int] = group_by_key.PARTITION_BYTES
    SLICE_BYTES: ClassVar[int] = local_groupby.SLICE_BYTES

    def __init__(self, *args, data_dir=None, **kwargs):
        # a pathlib.Path is welcome; parsers compare and join strings (datasets sets it after __post_init__)
        super().__init__(*args, data_dir=None if data_dir is None else os.fspath(data_dir), **kwargs)
        #: Rows per writer batch: the one given, else the config's ``WRITER_BATCH_SIZES``, else None (the
        #: writer's default). ``datasets``' own ``download_and_prepare`` is told it too.
        self.writer_batch_rows = kwargs.get("writer_batch_size") or self.WRITER_BATCH_SIZES.get(
            self.config.name
        )
        if self.writer_batch_rows is not None and kwargs.get("writer_batch_size") is None:
            self._writer_batch_size = self.writer_batch_rows

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.BUILDER_CONFIGS = [
            ConvHubConfig(name=view.name, description=view.description) for view in cls.views()
        ]

    @classmethod
    def card_license(cls, subsets: list[str]) -> CardLicense:
        """The card's ``license`` for a build of ``subsets`` (and ``license_name`` / ``license_link`` for other)."""
        if cls.LICENSE != "other":
            return {"license": cls.LICENSE}
        return {"license": "other", "license_name": cls.LICENSE_NAME, "license_link": cls.LICENSE_LINK}

    @classmethod
    def card_source_datasets(cls, subsets: list[str]) -> list[str]:
        return list(cls.SOURCE_DATASETS)

    @classmethod
    def input_files(
        cls, data_dir: str | None, subsets: list[str] | None, downloads: str | None
    ) -> list[tuple[str, str]]:
        """(name, path) of the files a build read, for the card's ``source_files`` (``source_digests``): by
        default every file of ``data_dir`` that is not hidden, or the files downloaded into ``downloads``."""
        return digests.input_files(data_dir, downloads)

    @classmethod
    def subset_licenses(cls, subsets: list[str]) -> dict[str, tuple[str, str]]:
        """``{subset: (license, link)}`` where subsets carry licenses of their own (ConvLab); else empty."""
        return {}

    @classmethod
    def views(cls) -> tuple[View, ...]:
        return SHARED_VIEWS + cls.EXTRA_VIEWS

    @classmethod
    def view_named(cls, name: str) -> View:
        for view in cls.views():
            if view.name == name:
                return view
        raise KeyError(
            f"{cls.SOURCE} has no config {name!r}; configs: {', '.join(v.name for v in cls.views())}"
        )

    @classmethod
    def sample_dir(cls) -> str:
        """Small files in the source's own format that ship inside the package."""
        return os.path.join(os.path.dirname(inspect.getfile(cls)), "sample")

    def listed_files(self, dl_manager: DownloadManagers, url: str | None = None) -> list[SourceFile]:
        """The files ``LISTING`` finds in ``--data-dir`` (a folder, a file or a URL), each with its subset and
        split, those of ``--subset`` only; without ``--data-dir``, the file at ``url`` downloaded (from its mirror
        when ``CONVHUB_SOURCE_MIRROR`` is set), named by the URL's file name, in the URL's folder."""
        config = cast(ConvHubConfig, self.config)  # what BUILDER_CONFIG_CLASS made
        if config.data_dir is not None:
            return self.LISTING.files(config.data_dir, self.SOURCE, config.subsets)
        if url is None:
            raise FileNotFoundError(f"{self.SOURCE} has no public download: give --data-dir")
        folder = posixpath.basename(posixpath.dirname(url))  # a folder-per-subset file's subset
        local = cast(str, dl_manager.download(source_url(url)))  # one URL in, one path out
        return self.LISTING.chosen([(posixpath.basename(url), local)], folder, self.SOURCE, config.subsets)

    # -- hooks a source implements -------------------------------------------------------------

    def shards(self, dl_manager: DownloadManagers) -> dict[str, list[Shard]]:
        """Split name → the shards of that split (local paths after download). Files whose rows of one
        conversation may lie anywhere (MNBVC's multi-turn rows) are one ``group_shard``: each engine reads each of
        its files with ``keyed_rows``, moves every row to its partition, sorts each partition by the rows' keys
        and turns each conversation's rows into a record with ``grouped_records`` (``local_shards``, Spark)."""
        raise NotImplementedError

    def parse_shard(self, shard: Shard, notes: Notes) -> Iterator[Record]:
        """Canonical records of one shard, in a deterministic order: by default its ``READER``'s records through
        the record loop and ``CONVERT``."""
        return self.converted(self.read_shard(shard), notes)

    # -- the default parse path: reader -> record loop -> convert --------------------------------------

    def read_shard(self, shard: Shard) -> Iterator[tuple[Place, Any]]:
        """(place, raw record) of each record of a source's own shard, as its ``READER`` reads them; with
        ``--on-bad-record skip``, reading on after a break in a file."""
        if self.READER is None:
            raise NotImplementedError(f"{self.SOURCE} names no READER and has no parse_shard of its own")
        recover = self.reject if self.config.on_bad_record == "skip" else None
        return self.READER.read(own_shard(shard), recover)

    def converted(self, items: Iterable[tuple[Place, Any]], notes: Notes) -> Iterator[Record]:
        """``items`` through the record loop: ``CONVERT``, the ``ID_FIELD`` check, bad records to ``reject``."""
        unique = None
        if self.ID_FIELD is not None:
            first_files = self._first_files if self.ID_ACROSS_FILES else None
            unique = UniqueIds(self.ID_FIELD, first_files)
        return convert_records(items, type(self).CONVERT, notes, self.reject, unique)

    def _start_listing(self, dl_manager: DownloadManagers) -> None:
        """Before the shards are listed: which ids this process's records are checked against across files."""
        streaming = isinstance(dl_manager, StreamingDownloadManager)
        across = self.ID_ACROSS_FILES and (streaming or self.config.on_bad_record == "raise")
        self._first_files = {} if across else None

    def table_rows(self, view: View, shard: Shard) -> Iterator[Row]:
        """Rows of a table view (one not derived from conversations)."""
        raise NotImplementedError(f"{self.SOURCE} has no table view {view.name!r}")

    # -- for an engine that moves rows itself (``convhub.engine.runners.spark``) ---------------------------------

    def engine_shards(self, dl_manager: DownloadManagers) -> dict[str, list[Shard]]:
        """The shards an engine other than the local one reads: ``shards``, where a source has no reason to list
        them otherwise (MNBVC reads a URL ``--data-dir`` in the engine's tasks, not after a download)."""
        self._start_listing(dl_manager)
        return self.shards(dl_manager)

    def keyed_rows(self, shard: Shard, file_index: int) -> Iterator[group_by_key.KeyedRow]:
        """((group, order), payload, bytes of the source line) of each row of file ``file_index`` of a
        ``group_shard``: the texts that name the row's conversation, its place in it, and the row converted
        as ``convhub.engine.grouping.group_by_key.payload`` makes it: ``marshal``'s bytes, which
        ``SurrogateScreen`` scans for a lone surrogate."""
        raise NotImplementedError(f"{self.SOURCE} returns no group shard")

    def grouped_records(
        self, rows: Iterator[tuple[tuple, bytes]], shard: Shard, notes: Notes
    ) -> Iterator[Record]:
        """The records of one partition of a ``group_shard``, from its (sort key, payload) rows in key order.

        A record's strings come from the rows read before it, the shard's file names and the source's own texts:
        the engine checks those for a string Parquet cannot store (``SurrogateScreen``), not each record."""
        raise NotImplementedError(f"{self.SOURCE} returns no group shard")

    # -- bad records -----------------------------------------------------------------------------

    def reject(
        self, error: SourceError, raw: Any = None, scope: str = "record", records: int | None = None
    ) -> None:
        """A bad source record: raised (``on_bad_record="raise"``), or quarantined and skipped.

        Parsers take this as their ``reject`` callback, called once per bad record (a LoCoMo sample, a
        GigaMemory or MNBVC line, a ConvLab dialogue) with the record's raw text or value.
        """
        if quarantine.check_policy(self.config.on_bad_record) == "raise":
            raise error
        quarantine.write(self.config.quarantine_dir, error, raw, scope, records)

    def records_of(self, shard: Shard, notes: Notes) -> Iterator[Record]:
        """``parse_shard`` under the bad-record policy: with ``skip``, an error the parser could not pin
        on one record (an unreadable file, a truncated gzip) quarantines the rest of the shard."""
        screen = None
        if isinstance(shard, Partition):  # the embedded engine's, read here
            shard = SortedPartition(shard.group, local_groupby.read_partition(shard))
        if isinstance(shard, SortedPartition):
            screen = SurrogateScreen(shard)
            records = self.grouped_records(iter(screen), shard.group, notes)
        else:
            records = self.parse_shard(shard, notes)
        try:
            for record in each_made_with_fewer_collections(records):
                if (screen is not None and screen.clean) or self._storable(
                    record, shard, record.get("conversation_id")
                ):
                    yield record
        except SourceError as error:
            self.reject(error, None, scope="file")
        except RecursionError:
            self.reject(_too_deep(shard), None, scope="file")

    def _table_rows(self, view: View, shard: Shard) -> Iterator[Row]:
        try:
            for index, row in enumerate(self.table_rows(view, shard)):
                if self._storable(row, shard, f"{view.name} row {index}"):
                    yield row
        except SourceError as error:
            self.reject(error, None, scope="file")
        except RecursionError:
            self.reject(_too_deep(shard), None, scope="file")

    def _storable(self, value: dict, shard: Shard, record) -> bool:
        """Whether Parquet can hold every string of ``value``; else it is rejected, named (``readers.storable``)."""
        error = unstorable(value, shard_name(shard), record)
        if error is None:
            return True
        self.reject(error, value)
        return False

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

    def local_shards(self, dl_manager: DownloadManagers) -> dict[str, list[Shard]]:
        """``shards`` as the local engine reads them: each ``group_shard`` regrouped by the embedded engine
        (``convhub.engine.grouping.local_groupby``, in the build's ``num_proc`` processes) into one shard per slice of each partition.
        With fewer collections: a source's listing may parse it whole (ConvLab's index scan, GigaMemory's grouping),
        before a stream's first row or a check's first record."""
        self._start_listing(dl_manager)
        with fewer_collections():
            return {
                split: [part for shard in shards for part in self._regrouped(shard)]
                for split, shards in self.shards(dl_manager).items()
            }

    def _regrouped(self, shard: Shard) -> list[Shard]:
        if not isinstance(shard, GroupShard):
            return [shard]
        processes = self._build_processes or 1
        return [*local_groupby.partition_shards(self, shard, processes, self.SLICE_BYTES)]

    def _split_generators(self, dl_manager):
        shards = self.local_shards(dl_manager)
        return [
            datasets.SplitGenerator(name=split, gen_kwargs={"shards": split_shards, "split": split})
            for split, split_shards in shards.items()
        ]

    def _generate_examples(self, **gen_kwargs: Any) -> Iterator[tuple[Key, Row]]:
        """``datasets``' hook, declared with ``**kwargs`` there: given the ``gen_kwargs`` of ``_split_generators``."""
        return self.split_rows(**gen_kwargs)

    def split_rows(self, shards: list[Shard], split: str) -> Iterator[tuple[Key, Row]]:
        """The rows of ``shards`` of ``split`` (keyed by shard and row), its report saved when one is asked for."""
        view = self.view
        if view.name == QA.name and not self.HAS_QUESTIONS:
            return
        report_dir = self.config.report_dir
        report = Report() if report_dir and not view.is_table else None
        for shard_index, shard in enumerate(shards):
            if view.is_table:
                rows = self._table_rows(view, shard)
            else:
                records = self.records_of(shard, report.notes if report else Notes())
                if report:
                    records = report.counting(split, records)
                # a derived view's batch of records is gathered and derived at once, under one relaxed collector
                rows = each_made_with_fewer_collections(view.rows_of(records))
            for row_index, row in enumerate(rows):
                yield Key(shard_index, row_index), row
        if report and report_dir:
            report.save(report_dir)

    def download_and_prepare(self, *args, num_proc: int | None = None, **kwargs):
        """``datasets``' own build (convhub builds with ``convhub.engine.runners.local`` instead), its ``num_proc``
        noted for the work a source does before its shards are read (the regrouping writers, GigaMemory's grouping),
        with fewer cycle collections: ``shards()`` may read a whole source."""
        self._build_processes = num_proc or 1
        with fewer_collections():
            return super().download_and_prepare(*args, num_proc=num_proc, **kwargs)

    # -- used by `convhub check` and the card --------------------------------------------------

    def iter_records(self, notes: Notes) -> Iterator[tuple[str, Record]]:
        """(split, record) for every canonical record, parsed exactly as the build parses them."""
        dl_manager = datasets.DownloadManager(dataset_name=self.SOURCE, data_dir=self.config.data_dir)
        for split, shards in self.local_shards(dl_manager).items():
            try:
                for shard in shards:
                    for record in self.records_of(shard, notes):
                        yield split, record
            finally:
                local_groupby.remove_partitions(shards)  # now, not when the builder is collected
