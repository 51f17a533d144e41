"""The local engine (``LocalEngine``): a config written as Parquet in this machine's processes.

It calls the builder's documented hooks (``_split_generators``, ``_generate_examples``) and writes the rows
itself, not through ``datasets``' ``download_and_prepare``: for speed, one table per writer batch
(``arrow_rows.rows_table``: our rows already have the features' shape) where ``datasets`` encodes each example
(docs/performance.md, "figures that were in the runners' docstrings"); for the files, ``ParquetWriter``'s
per-column options (a very large record's memory); and a bar that counts a split's shards (``ShardBar``).
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from datasets.builder import Key
from datasets.utils.tqdm import tqdm as hf_tqdm

from convhub.engine.runners.child_processes import run_forked
from convhub.engine.runners.cuts import balanced_runs, even_runs
from convhub.engine.runners.input_shards import shard_work
from convhub.engine.runners.memory import LARGE_TABLE_BYTES, fewer_collections, give_back_pages
from convhub.engine.writers.arrow_rows import rows_table
from convhub.engine.writers.parquet_writer import ParquetWriter
from convhub.storage.folders import Folder, read_parquet, text_of

#: A job starts a new file once the one it writes holds more than this many Arrow bytes (``datasets``' 500MB).
MAX_SHARD_BYTES = 500 * 10**6
#: Seconds between two progress updates of a job.
UPDATE_SECONDS = 0.05


@dataclass
class JobResult:
    """What one job wrote: its files in order, the rows of each, and its Arrow bytes in all; a Spark task's also
    its statistics reports and quarantine lines, which it hands to the driver (``runners.spark``)."""

    files: list[str] = field(default_factory=list)
    file_rows: list[int] = field(default_factory=list)
    num_bytes: int = 0
    reports: list[str] = field(default_factory=list)
    quarantine: list[str] = field(default_factory=list)


class ShardBar(hf_tqdm):
    """A split's bar, ``locomo sessions test: 100%|██| 1/1 shards [00:00, 2 rows]``: its shards done of their total,
    the rows written so far beside them, where ``datasets`` draws ``Generating train split: 0 examples`` (no source,
    no config, no total). A ``datasets`` tqdm, so ``datasets.disable_progress_bars()`` turns it off too."""

    def __init__(self, label: str, shards: int) -> None:
        super().__init__(desc=label, total=shards, unit=" shards")
        self.rows = 0
        self.set_postfix_str("0 rows", refresh=False)

    def advance(self, written: tuple[int, int]) -> None:
        """``written``: the (rows, shards) a job wrote since its last update."""
        rows, shards = written
        self.rows += rows
        self.set_postfix_str(f"{self.rows:,} row{'' if self.rows == 1 else 's'}", refresh=False)
        self.update(shards)


@dataclass
class SplitWritten:
    """A split of a config as written: its files in order and its ``SplitInfo`` (rows, Arrow bytes)."""

    info: datasets.SplitInfo
    files: list[str]

    @classmethod
    def of(cls, split: str, results: Sequence[JobResult], drop_empty_files: bool = False) -> SplitWritten:
        """The split the jobs (Spark: the tasks) wrote, in their order; with ``drop_empty_files``, a file without
        a row is left out, but the split's first (Spark's tasks of a regrouping are many, some without a row)."""
        paths = [path for result in results for path in result.files]
        rows = [count for result in results for count in result.file_rows]
        if drop_empty_files:
            paths = [path for path, count in zip(paths, rows, strict=True) if count] or paths[:1]
        info = datasets.SplitInfo(split, sum(result.num_bytes for result in results), sum(rows))
        return cls(info, paths)


def jobs(gen_kwargs: dict[str, Any], processes: int) -> list[dict[str, Any]]:
    """``gen_kwargs`` cut into at most ``processes`` jobs, each a run of consecutive ``shards`` (its other values
    go to every job). Where every shard says its work (``shard_work``), the runs hold similar work
    (``balanced_runs``), else similar numbers of shards (``even_runs``): cut by numbers, one process of MNBVC's
    benchmark input was left working alone (docs/performance.md, "Jobs of similar work")."""
    shards = gen_kwargs["shards"]
    weights = [work for work in map(shard_work, shards) if work is not None]
    runs = (
        balanced_runs(weights, processes)
        if len(weights) == len(shards)
        else even_runs(len(shards), processes)
    )
    return [{**gen_kwargs, "shards": shards[run.start : run.stop]} for run in runs]


def write_job(
    builder,
    gen_kwargs: dict[str, Any],
    folder: Folder,
    job: int,
    max_shard_bytes: int | None = MAX_SHARD_BYTES,
    on_update: Callable[[tuple[int, int]], Any] = lambda _: None,
) -> JobResult:
    """The rows of ``builder._generate_examples(**gen_kwargs)`` written a writer batch at a time into ``folder``'s
    files ``SPLIT-JOB-FILE.parquet`` (five digits each), both engines' names; as it goes, (rows, shards) written
    since the last update to ``on_update``."""

    features = builder.info.features
    arrow_schema = features.arrow_schema
    batch_rows = getattr(builder, "writer_batch_rows", None)
    shard_count = len(gen_kwargs["shards"])
    result = JobResult()
    since_update, shards_reported, shard_index, last_update = 0, 0, 0, time.time()

    def update(finished: int) -> None:
        nonlocal since_update, shards_reported
        on_update((since_update, finished - shards_reported))
        since_update, shards_reported = 0, finished

    def new_writer() -> ParquetWriter:
        path = text_of(folder / f"{gen_kwargs['split']}-{job:05d}-{len(result.files):05d}.parquet")
        result.files.append(path)
        return ParquetWriter(features, path, writer_batch_size=batch_rows)

    def close(writer: ParquetWriter) -> None:
        rows, num_bytes = writer.finalize()
        writer.close()
        give_back_pages()
        result.file_rows.append(rows)
        result.num_bytes += num_bytes

    with fewer_collections():
        writer = new_writer()
        try:
            examples = builder._generate_examples(**gen_kwargs)
            while batch := list(islice(examples, writer.writer_batch_size)):
                if max_shard_bytes is not None and writer.num_bytes > max_shard_bytes:
                    close(writer)
                    writer = new_writer()
                table = rows_table([row for _, row in batch], arrow_schema)
                large = table.nbytes >= LARGE_TABLE_BYTES
                if large:  # Parquet's writer takes some 2.5 times such a table: start it from the least
                    give_back_pages()
                writer.write_table(table)
                if large:
                    table = None
                    give_back_pages()
                last_key = batch[-1][0]
                if isinstance(last_key, Key):
                    shard_index = last_key.original_shard_id
                since_update += len(batch)
                if time.time() > last_update + UPDATE_SECONDS:
                    last_update = time.time()
                    update(shard_index)  # the shards before this one are done
        except BaseException:
            writer.close()
            raise
        close(writer)
    update(shard_count)
    return result


class LocalEngine:
    """The build in this machine's processes: a split's shards shared between ``num_proc`` of them, each job's
    files of at most about ``max_shard_bytes`` (None: one file a job)."""

    name = "local"

    def __init__(self, num_proc: int | None = None, max_shard_bytes: int | None = MAX_SHARD_BYTES):
        self.num_proc = num_proc
        self.max_shard_bytes = max_shard_bytes

    def scratch(self, work: Path, staging: Folder) -> Folder:
        return work

    def write_config(self, builder, folder: Folder, download_dir: str) -> dict[str, SplitWritten]:
        """Also sets ``builder.processes_run``: the most processes a split ran in."""
        if not isinstance(folder, Path):  # (a local UPath is a Path)
            raise ValueError(
                f"the local engine writes in this machine's work folder (its scratch), not at {folder}"
            )
        builder._build_processes = self.num_proc or 1
        download_config = datasets.DownloadConfig(cache_dir=download_dir, num_proc=self.num_proc)
        dl_manager = datasets.DownloadManager(
            dataset_name=builder.dataset_name,
            data_dir=builder.config.data_dir,
            download_config=download_config,
        )
        folder.mkdir(parents=True, exist_ok=True)
        written = {}
        for split_generator in builder._split_generators(dl_manager):  # (listed under ``fewer_collections``)
            cut = jobs(split_generator.gen_kwargs, self.num_proc or 1)
            builder.processes_run = max(builder.processes_run, len(cut))
            results = self._write_split(builder, split_generator, cut, folder)
            written[split_generator.name] = SplitWritten.of(split_generator.name, results)
            give_back_pages()
        return written

    def _write_split(
        self, builder, split_generator, cut: list[dict[str, Any]], folder: Path
    ) -> list[JobResult]:
        """The jobs of one split (``cut``), in this process or each in a forked one, under its progress bar."""
        label = f"{builder.SOURCE} {builder.config.name} {split_generator.name}"
        shard_count = len(split_generator.gen_kwargs["shards"])
        with ShardBar(label, shard_count) as bar:
            if len(cut) == 1:
                return [write_job(builder, cut[0], folder, 0, self.max_shard_bytes, bar.advance)]
            tasks = [
                partial(write_job, builder, gen_kwargs, folder, job, self.max_shard_bytes)
                for job, gen_kwargs in enumerate(cut)
            ]
            return list(run_forked(tasks, on_update=bar.advance))

    def map(self, function: Callable[[Any], Any], tasks: list) -> Generator:
        """Each task in a forked process, ``num_proc`` at a time (``run_forked``), or here with one process. A task
        reaches its process pickled, as a pool's would: a folder it names on an object store is opened there with
        that process's own client (fsspec's async clients, s3fs's among them, refuse to be used across a fork)."""
        if min(self.num_proc or 1, len(tasks)) <= 1:
            yield from map(function, tasks)
            return
        pickled = [partial(_unpickled_call, function, pickle.dumps(task)) for task in tasks]
        yield from run_forked(pickled, at_once=self.num_proc)

    def repeated_rows(self, paths: list[str], column: str, columns: list[str]) -> list[dict]:
        """Counted by Arrow over ``column`` and ``columns`` alone: a few dozen bytes a row in memory."""
        tables = []
        for file, path in enumerate(paths):
            table = read_parquet(path, columns=[column, *columns])
            rows = table.num_rows
            tables.append(
                table.append_column("file", pa.array(np.full(rows, file, dtype=np.int32))).append_column(
                    "row", pa.array(np.arange(rows, dtype=np.int64))
                )
            )
        if not tables:
            return []
        table = pa.concat_tables(tables)
        counts = table.group_by(column).aggregate([(column, "count")])
        repeated = counts.filter(pc.greater(counts.column(f"{column}_count"), 1)).column(column)
        if len(repeated) == 0:
            return []
        return table.filter(pc.is_in(table.column(column), value_set=repeated)).to_pylist()

    def stop(self) -> None:
        """Nothing to let go: each step's processes end with it."""


def _unpickled_call(function: Callable[[Any], Any], task: bytes) -> Any:
    """``function`` of the task ``LocalEngine.map`` pickled (see there why)."""
    return function(pickle.loads(task))
