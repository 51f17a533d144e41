"""The engine a build runs on: one small interface (``Engine``), which ``convhub.build`` asks without asking which
engine it is, and two engines behind it: ``LocalEngine`` in this machine's processes (``runners.local``, Arrow),
``SparkEngine`` as Spark jobs (``runners.spark``). ``engine_named`` makes one from ``convhub build --engine``.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any, Protocol

from convhub.engine.runners.local import LocalEngine, SplitWritten
from convhub.storage.folders import Folder

#: The engine names ``convhub build --engine`` takes.
ENGINES = ("local", "spark")
#: An engine's hidden work folder in the staging folder, where tasks running elsewhere write (``Engine.scratch``).
ENGINE_WORK = ".convhub-work"


class Engine(Protocol):
    """All a build asks of an engine, whichever it is."""

    name: str

    def scratch(self, work: Path, staging: Folder) -> Folder:
        """Where the engine's tasks write files the build then places: ``work`` (this machine's work folder) or a
        folder in ``staging`` (the output's own staging folder, which every machine of a cluster reaches)."""
        ...

    def write_config(self, builder, folder: Folder, download_dir: str) -> dict[str, SplitWritten]:
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


def engine_named(
    name: str, spark_master: str | None = None, num_proc: int | None = None, verbose: bool = False
) -> Engine:
    """``local`` in ``num_proc`` processes, or ``spark`` on ``spark_master`` (Spark's own log on stderr when
    ``verbose``); a ValueError for an unknown name, or a master given to the local engine."""
    if name not in ENGINES:
        raise ValueError(f"unknown engine {name!r}: one of {', '.join(ENGINES)}")
    if name == "local":
        if spark_master:
            raise ValueError("--spark-master needs --engine spark")
        return LocalEngine(num_proc)
    from convhub.engine.runners.spark import SparkEngine  # PySpark is an extra

    return SparkEngine(spark_master, verbose=verbose)
