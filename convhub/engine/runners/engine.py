"""The engine a build runs on: one small interface (``Engine``), which ``convhub.build`` asks without asking which
engine it is, and two engines behind it: ``LocalEngine`` in this machine's processes (``runners.local``, Arrow),
``SparkEngine`` as Spark jobs (``runners.spark``). ``engine_named`` makes one from ``convhub build --engine``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from convhub.engine.runners.child_processes import die_with_parent
from convhub.engine.runners.local import SplitWritten, write_config
from convhub.storage.folders import Folder, read_parquet

#: The engine names ``convhub build --engine`` takes.
ENGINES = ("local", "spark")
#: An engine's hidden work folder in the staging folder, where tasks running elsewhere write (``Engine.scratch``).
ENGINE_WORK = ".convhub-work"


class Engine(Protocol):
    """All a build asks of an engine: its configs written, the derived views mapped over the sessions shards, the
    duplicate-id check's repeated rows, and where its tasks write."""

    name: str

    def scratch(self, work: Path, staging: Folder) -> Folder:
        """Where the engine's tasks write files the build then places: ``work`` (this machine's work folder) or a
        folder in ``staging`` (the output's own staging folder, which every machine of a cluster reaches)."""
        ...

    def write_config(
        self, builder, folder: Folder, download_dir: str | None = None
    ) -> dict[str, SplitWritten]:
        """Every split of ``builder``'s config as Parquet files in ``folder``: split → its files in order and its
        ``SplitInfo``. What the builder's workers report and reject goes to its config's ``report_dir`` and
        ``quarantine_dir``; a URL it reads may be downloaded into ``download_dir``."""
        ...

    def map(self, function: Callable[[Any], Any], tasks: list) -> Generator:
        """``function`` of each task, the results in the tasks' order; closing the generator (an error, Ctrl-C)
        lets go of the workers at once."""
        ...

    def repeated_rows(self, paths: list[str], column: str, columns: list[str]) -> list[dict]:
        """Each row of the Parquet files at ``paths`` whose ``column`` holds a value another row holds too: its
        ``column`` and ``columns``, its ``file`` (a place in ``paths``) and its ``row`` in that file."""
        ...

    def stop(self) -> None:
        """Let go of what the engine holds (a Spark session); the engine may not be used after."""
        ...


class LocalEngine:
    """The build in this machine's processes: a split's shards shared between ``num_proc`` of them."""

    name = "local"

    def __init__(self, num_proc: int | None = None):
        self.num_proc = num_proc

    def scratch(self, work: Path, staging: Folder) -> Folder:
        return work

    def write_config(
        self, builder, folder: Folder, download_dir: str | None = None
    ) -> dict[str, SplitWritten]:
        if not isinstance(folder, Path):  # (a local UPath is a Path)
            raise ValueError(
                f"the local engine writes in this machine's work folder (its scratch), not at {folder}"
            )
        return write_config(builder, folder, self.num_proc, download_dir or str(folder / "downloads"))

    def map(self, function: Callable[[Any], Any], tasks: list) -> Generator:
        """In ``num_proc`` worker processes (no more than there are tasks; they die with the build), else here."""
        processes = min(self.num_proc or 1, len(tasks))
        if processes <= 1:
            yield from map(function, tasks)
            return
        with ProcessPoolExecutor(processes, initializer=die_with_parent, initargs=(os.getpid(),)) as pool:
            yield from pool.map(function, tasks)

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


def engine_named(
    name: str, spark_master: str | None = None, num_proc: int | None = None, verbose: bool = False
) -> Engine:
    """The engine ``convhub build --engine NAME`` runs on: ``local`` in ``num_proc`` processes, or ``spark`` on
    ``spark_master`` (Spark's own log on stderr when ``verbose``). A ValueError for an unknown name, or a master
    given to the local engine."""
    if name not in ENGINES:
        raise ValueError(f"unknown engine {name!r}: one of {', '.join(ENGINES)}")
    if name == "local":
        if spark_master:
            raise ValueError("--spark-master needs --engine spark")
        return LocalEngine(num_proc)
    from convhub.engine.runners.spark import SparkEngine  # PySpark is an extra

    return SparkEngine(spark_master, verbose=verbose)
