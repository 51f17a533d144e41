"""Builds on Apache Spark (``convhub build SOURCE --engine spark``): a config's shards as Spark tasks that parse
with the builder's own code and write with the local engine's (``runners.local.write_job``), a group shard
regrouped by Spark's shuffle (``SparkEngine._regroup``), the rows in the local build's order; docs/scale-out.md,
"Running on Spark", says what runs where.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import logging
import os
import re
import subprocess
import sys
import urllib.parse
import warnings
from collections.abc import Callable, Generator, Iterable, Iterator
from functools import partial
from operator import itemgetter
from pathlib import Path
from typing import Any

import datasets

from convhub.engine.checks import quarantine
from convhub.engine.grouping.group_by_key import keyed_by_partition
from convhub.engine.runners.cluster_masters import check_reachable
from convhub.engine.runners.cuts import even_runs
from convhub.engine.runners.engine import ENGINE_WORK
from convhub.engine.runners.input_shards import GroupShard, SortedPartition
from convhub.engine.runners.local import MAX_SHARD_BYTES, JobResult, SplitWritten, write_job
from convhub.engine.runners.memory import ARROW_VARIABLES, fewer_collections
from convhub.errors import EngineError, SourceError
from convhub.stats import save_report, saved_reports
from convhub.storage.abandoned import MarkedTemporaryDirectory
from convhub.storage.folders import Folder

#: Marks a SourceError inside the text of Spark's error, for the driver to raise it again as itself.
_ERROR_MARK = "convhub source error: "

#: The build's phase lines (``convhub.console`` prints this logger's INFO lines as they are).
phases = logging.getLogger("convhub.build")


def spark_session(master: str | None = None, verbose: bool = False):
    """A SparkSession on ``master``, else Spark's own configuration, else ``local[*]``, tried first
    (``check_reachable``); a local one on the loopback address, its Python workers this interpreter (the one that
    has convhub). Unless ``verbose``, Spark's own output (in local mode its executors' too) is silenced, so that a
    build's error is convhub's one line."""
    try:
        from pyspark import SparkConf, SparkContext
        from pyspark.java_gateway import launch_gateway
        from pyspark.sql import SparkSession
    except ImportError as error:
        raise EngineError(
            '--engine spark needs PySpark: pip install "convhub[spark]" (and Java 17 or later)'
        ) from error
    master = master or SparkConf().get("spark.master", None) or "local[*]"
    check_reachable(master)
    conf = SparkConf().setAppName("convhub").setMaster(master).set("spark.ui.showConsoleProgress", "false")
    for variable in ARROW_VARIABLES:  # the executors' Python workers allocate as this process does
        if os.environ.get(variable):
            conf = conf.set(f"spark.executorEnv.{variable}", os.environ[variable])
    if master.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # read when the context starts
        conf = (
            conf.set("spark.driver.host", "127.0.0.1")
            .set("spark.driver.bindAddress", "127.0.0.1")
            .set("spark.ui.enabled", "false")
            .set("spark.pyspark.python", sys.executable)
            .set("spark.pyspark.driver.python", sys.executable)
        )
    with warnings.catch_warnings():
        if not verbose:
            warnings.filterwarnings("ignore", category=FutureWarning, module=r"pyspark\.")
            for name in ("py4j", "pyspark"):
                logging.getLogger(name).setLevel(logging.CRITICAL)
            if SparkSession.getActiveSession() is None:
                quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
                SparkContext(conf=conf, gateway=launch_gateway(conf, popen_kwargs=quiet))
        session = SparkSession.builder.config(conf=conf).getOrCreate()
    session.sparkContext.setLogLevel("ERROR" if verbose else "OFF")
    return session


class SparkEngine:
    """Runs a build's configs and derived views as Spark jobs (see the module docstring)."""

    name = "spark"

    def __init__(self, master: str | None = None, verbose: bool = False):
        self.master = master
        self.verbose = verbose  # Spark's own log on stderr (``spark_session``)
        self._session = None

    @property
    def session(self):
        """The Spark session, started at the first job."""
        if self._session is None:
            self._session = spark_session(self.master, self.verbose)
        return self._session

    def stop(self) -> None:
        if self._session is not None:
            self._session.stop()
            self._session = None

    def map(self, function: Callable, tasks: list) -> Generator:
        """``function`` of each task, one Spark task each, results in the tasks' order (all collected first)."""
        if tasks:
            yield from _collect(self.session.sparkContext.parallelize(tasks, len(tasks)).map(function))

    def repeated_rows(self, paths: list[str], column: str, columns: list[str]) -> list[dict]:
        """Spark counts the values and finds their rows: the driver reads no file and holds only these rows."""
        if not paths:
            return []
        from pyspark.sql import functions

        table = self.session.read.parquet(*paths)
        counted = table.select(column).groupBy(column).count().filter("count > 1")
        repeated = [row[0] for row in counted.collect()]
        if not repeated:  # a clean build: one pass over the column
            return []
        places = table.filter(functions.col(column).isin(repeated)).select(
            column,
            *columns,
            functions.col("_metadata.file_path").alias("file"),
            functions.col("_metadata.row_index").alias("row"),
        )
        rows = [row.asDict() for row in places.collect()]
        named = {spark_path: _place_in(paths, spark_path) for spark_path in {row["file"] for row in rows}}
        for row in rows:
            row["file"] = named[row["file"]]
        return rows

    def scratch(self, work: Path, staging: Folder) -> Folder:
        """``ENGINE_WORK``, which every executor reaches; renaming from there into the layout stays on one file
        system."""
        return staging / ENGINE_WORK

    def write_config(self, builder, folder: Folder, download_dir: str) -> dict[str, SplitWritten]:
        """A task's file without a row left out (``SplitWritten.of``); the tasks read a URL where it is (not
        in ``download_dir``); their reports and rejected records saved here, as the local engine's save theirs."""
        config, written = builder.config, {}
        for split, results in sorted(self._task_results(builder, folder).items()):
            for result in results:  # a report file each, the rejected records in one part file
                for text in result.reports:
                    save_report(config.report_dir, text)
                if result.quarantine:
                    quarantine.append_lines(config.quarantine_dir, result.quarantine, part="engine")
            written[split] = SplitWritten.of(split, results, drop_empty_files=True)
        return written

    def _task_results(self, builder, work) -> dict[str, tuple[JobResult, ...]]:
        """Split → the results of the tasks that wrote it, in the order the local build writes the same rows."""
        download = datasets.DownloadManager(dataset_name=builder.SOURCE, data_dir=builder.config.data_dir)
        with fewer_collections():  # the driver lists the shards (GigaMemory's pass 1 parses in our tasks)
            by_split = builder.engine_shards(download)
        work.mkdir(parents=True, exist_ok=True)
        written: dict[str, tuple[JobResult, ...]] = {}
        for split, shards in by_split.items():
            label = f"{builder.SOURCE} {builder.config.name} {split}"
            share = file_share(shards)
            # past the file limit, each task writes one file, however big
            max_shard_size = MAX_SHARD_BYTES if share is None else None
            results: list[JobResult] = []
            for grouped, run in itertools.groupby(shards, key=lambda shard: isinstance(shard, GroupShard)):
                if grouped:
                    for shard in run:
                        shard = dataclasses.replace(shard, partitions=_shared(shard.partitions, share))
                        phases.info(
                            "%s: regrouping %d files into %d partitions on Spark",
                            label,
                            len(shard.files),
                            shard.partitions,
                        )
                        write = partial(
                            _write_partition, builder, split, shard, work, max_shard_size, len(results)
                        )
                        results += self._regroup(builder, shard, write)
                    continue
                plain = list(run)
                runs = even_runs(len(plain), _shared(len(plain), share))
                tasks = list(enumerate((plain[run.start : run.stop] for run in runs), start=len(results)))
                in_tasks = "" if len(tasks) == len(plain) else f", in {len(tasks)} tasks (a file each)"
                phases.info(
                    "%s: %d shard%s on Spark%s", label, len(plain), "" if len(plain) == 1 else "s", in_tasks
                )
                results += self.map(partial(_write_records, builder, split, work, max_shard_size), tasks)
            written[split] = tuple(results)
        return written

    def _regroup(self, builder, shard: GroupShard, write: Callable) -> list[JobResult]:
        """A group shard: every file read (one task each) into keyed rows, moved and sorted by partition and key
        (a key is (partition, sort key): Spark sorts the sort keys, tuples, by Python's ``<``), each partition
        written by ``write(index, rows)``."""
        files = self.session.sparkContext.parallelize(range(len(shard.files)), len(shard.files))
        keyed = files.flatMap(partial(_keyed_rows, builder, shard))
        moved = keyed.repartitionAndSortWithinPartitions(
            shard.partitions + 1, partitionFunc=itemgetter(0), keyfunc=itemgetter(1)
        )
        return _collect(moved.mapPartitionsWithIndex(write))


#: The most Parquet files a Spark build writes for one split of a config: the Hub advises fewer than 10,000
#: entries per folder (and 100,000 files per repository: three configs stay well under). Past it, consecutive
#: shards share a task, a group shard has fewer and bigger partitions, and each task writes one file.
MAX_FILES = 9_000


def file_share(shards: list[Any]) -> float | None:
    """The share of its tasks each part of a split keeps so that it writes at most ``MAX_FILES`` files (a task
    per shard, a task per partition of a group shard); None when all fit."""
    wanted = sum(shard.partitions if isinstance(shard, GroupShard) else 1 for shard in shards)
    return None if wanted <= MAX_FILES else MAX_FILES / wanted


def _shared(count: int, share: float | None) -> int:
    """``count`` tasks cut to their ``share`` (at least one)."""
    return count if share is None else max(1, int(count * share))


def _collect(rdd) -> list:
    """``rdd.collect()``, a SourceError raised in a task raised here again as itself."""
    try:
        return rdd.collect()
    except Exception as error:
        found = re.search(re.escape(_ERROR_MARK) + r"(\[.*?\])(?:\n|$)", str(error))
        if found:
            raise SourceError(*json.loads(found.group(1))) from None
        raise


def _reraisable(error: SourceError) -> RuntimeError:
    """A SourceError as an error whose text the driver finds in Spark's own (see ``_collect``)."""
    fields = [error.path, error.record, error.field, error.problem]
    return RuntimeError(_ERROR_MARK + json.dumps(fields, ensure_ascii=True))


@contextlib.contextmanager
def _task_scratch(builder) -> Iterator[Callable[[JobResult], JobResult]]:
    """A task's own report and quarantine folders while it runs, and the function that reads them back into its
    result: a task returns what the driver needs (its files, rows and bytes, its statistics report and quarantined
    records) instead of writing them beside the build, so they reach the driver only if it succeeds, and a
    retried task counts once."""
    config = builder.config
    saved = config.report_dir, config.quarantine_dir
    folder = MarkedTemporaryDirectory(prefix="convhub-spark-task-")
    reports, rejected = os.path.join(folder.name, "reports"), os.path.join(folder.name, "quarantine")

    def collect(result: JobResult) -> JobResult:
        result.reports = saved_reports(reports)
        result.quarantine = list(quarantine.part_lines(rejected))
        return result

    try:
        os.mkdir(reports)
        os.mkdir(rejected)
        config.report_dir = reports if config.report_dir else None
        config.quarantine_dir = rejected
        yield collect
    finally:
        config.report_dir, config.quarantine_dir = saved
        folder.cleanup()


def _write_records(
    builder, split: str, work, max_shard_size: int | None, task: tuple[int, list]
) -> JobResult:
    """A Spark task: ``task``'s shards (a run of consecutive source shards, or a sorted partition) written into
    ``work`` as the local engine's job of that number (``write_job``; ``max_shard_size``: ``LocalEngine``'s)."""
    number, shards = task
    with _task_scratch(builder) as collect:  # (``write_job`` parses under ``fewer_collections``)
        try:
            written = write_job(builder, {"shards": shards, "split": split}, work, number, max_shard_size)
        except SourceError as error:
            raise _reraisable(error) from None
        return collect(written)


def _keyed_rows(builder, shard: GroupShard, file_index: int) -> Iterator[tuple[tuple[int, tuple], bytes]]:
    """A Spark task: one file of a group shard as ((partition, sort key), payload) per row. Records it rejects
    (under ``--on-bad-record skip``) travel as rows of the extra last partition, whose task hands them to the
    driver."""
    with _task_scratch(builder) as collect, fewer_collections():
        try:
            keyed = builder.keyed_rows(shard, file_index)
            for partition, key, payload, _ in keyed_by_partition(keyed, shard.partitions):
                yield (partition, key), payload
        except SourceError as error:
            raise _reraisable(error) from None
        rejected = collect(JobResult())
    for number, line in enumerate(rejected.quarantine):
        yield (shard.partitions, (file_index, number)), line.encode("utf-8")


def _write_partition(
    builder,
    split: str,
    shard: GroupShard,
    work,
    max_shard_size: int | None,
    first: int,
    index: int,
    rows: Iterable,
) -> Iterator[JobResult]:
    """A Spark task: partition ``index`` of a group shard, its rows sorted, built into records and written on an
    executor (the extra last partition holds the files' rejected rows)."""
    if index == shard.partitions:
        yield JobResult(quarantine=[payload.decode("utf-8") for _, payload in rows])
        return
    partition = SortedPartition(shard, ((key, payload) for (_, key), payload in rows))
    yield _write_records(builder, split, work, max_shard_size, (first + index, [partition]))


def _place_in(paths: list[str], spark_path: str) -> int:
    """Which of ``paths`` Spark names ``spark_path`` (qualified, as ``file:/x``, and URL-encoded): the one whose
    path it ends with (they share the build's folder, so one does)."""
    name = urllib.parse.unquote(spark_path)
    places = [place for place, path in enumerate(paths) if name.endswith(path.split("://", 1)[-1])]
    if not places:
        raise RuntimeError(f"Spark read {spark_path}, which is none of the files it was given")
    return max(places, key=lambda place: len(paths[place]))
