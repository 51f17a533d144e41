"""Checks of ``convhub build`` options made before any work, each failing as one usage error line (exit 2):
a Spark master URL, an output name the file system cannot hold, a config a source does not have.

Each of these failed late before: a Spark master that is no URL or asks for 100,000 local threads deep in
the JVM, a too-long output name in the middle of the build (``File name too long``), a misspelt config with
Python's quoting of a list.
"""

from __future__ import annotations

import argparse
import os
import re

from convhub import registry
from convhub.errors import EngineError

#: ``local``, ``local[N]``, ``local[*]``, ``local[N,F]``, ``local[*,F]`` (F: task retries).
LOCAL_MASTER = re.compile(r"^local(?:\[(?P<threads>[^\],]*)(?:,(?P<retries>[^\]]*))?\])?$")
#: Cluster masters, checked here for their shape (each is tried before the build: ``cluster_master_error``).
CLUSTER_MASTER = re.compile(r"^(?:spark://[^/\s]+|yarn|k8s://\S+|local-cluster\[\d+,\d+,\d+\])$")
#: ``local[N]`` runs N task threads, each with a Python worker process: more than this many per core is a typo.
THREADS_PER_CORE = 4

MASTER_FORMS = "local, local[N], local[*], spark://HOST:PORT, yarn or k8s://URL"


def cluster_master_error(master: str | None) -> str | None:
    """What stops a cluster master (``spark://``, ``yarn``, ``k8s://``) before any work (None: it answers, or the
    master is local): its configuration missing, or no place it names answering (the engine's own check,
    ``cluster_masters.check_reachable``). Without it, Spark's JVM exited with a traceback of PySpark's, or YARN's client retried
    a cluster that was down for many minutes."""
    if not master or master.startswith("local"):
        return None
    from convhub.engine.runners.cluster_masters import check_reachable

    try:
        check_reachable(master)
    except EngineError as error:
        return str(error)
    return None


def max_local_threads() -> int:
    return THREADS_PER_CORE * (os.cpu_count() or 1)


def spark_master(text: str) -> str:
    """``--spark-master``: a master URL Spark takes, and a ``local[N]`` with 1 <= N <= ``max_local_threads()``."""
    local = LOCAL_MASTER.match(text)
    if local is None:
        if CLUSTER_MASTER.match(text):
            return text
        raise argparse.ArgumentTypeError(f"{text!r} is not a Spark master URL: give {MASTER_FORMS}")
    threads, retries = local["threads"], local["retries"]
    if retries is not None and not (retries.isdigit() and int(retries) >= 1):
        raise argparse.ArgumentTypeError(f"{text!r}: the task retries F in local[N,F] must be 1 or more")
    if threads is None or threads == "*":
        return text
    try:
        count = int(threads)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: N in local[N] must be a number or *") from None
    limit = max_local_threads()
    if not 1 <= count <= limit:
        raise argparse.ArgumentTypeError(
            f"{text!r}: N in local[N] must be 1 to {limit} ({THREADS_PER_CORE} per core of this machine's "
            f"{os.cpu_count()}; local[*] is one per core)"
        )
    return text


#: The longest name convhub puts beside an output folder: its staging folder ``.NAME.partial-XXXXXXXX``
#: (``staging.staged_folder``), one byte longer than ``NAME.quarantine.jsonl``.
BESIDE_OUTPUT = len(".") + len(".partial-") + 8


def output_name_error(output) -> str | None:
    """What is wrong with a local output folder's name (None: nothing): the staging folder made beside it
    must fit the file system's longest name."""
    if "://" in str(output):
        return None
    name = os.fsencode(os.path.basename(os.path.normpath(os.fspath(output))))
    limit = _name_max(os.path.dirname(os.path.abspath(os.fspath(output))))
    if len(name) + BESIDE_OUTPUT > limit:
        return (
            f"--output: the folder name is {len(name)} bytes long; here it can be at most {limit - BESIDE_OUTPUT} "
            f"bytes (the file system's {limit}, less {BESIDE_OUTPUT} for the staging folder convhub makes "
            "beside it)"
        )
    return None


def _name_max(folder: str) -> int:
    """The longest file name the file system of ``folder`` (or its nearest existing parent) takes."""
    while folder and not os.path.isdir(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    try:
        return os.pathconf(folder or ".", "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def config_error(sources: list[str], configs: list[str] | None) -> str | None:
    """A ``--config`` that one of ``sources`` does not have (None: every one is known)."""
    for source in sources:
        names = [view.name for view in registry.get(source).views()]
        for config in configs or ():
            if config not in names:
                return (
                    f"argument --config: {source} has no config {config!r} (choose from {', '.join(names)})"
                )
    return None


def config_help() -> str:
    """The ``--config`` help: the configs every source has, then each source's own."""
    views = {source: [view.name for view in registry.get(source).views()] for source in registry.names()}
    shared = [name for name in next(iter(views.values())) if all(name in names for names in views.values())]
    own = [
        f"{source}: {', '.join(name for name in names if name not in shared)}"
        for source, names in views.items()
        if any(name not in shared for name in names)
    ]
    return f"only this config (repeatable; default: all): {', '.join(shared)} for every source" + (
        f"; also {'; '.join(own)}" if own else ""
    )


def formats() -> list[str]:
    """Every ``--format`` some source takes, in the order the sources list them."""
    found: list[str] = []
    for source in registry.names():
        found += [name for name in registry.get(source).FORMATS if name not in found]
    return found


def source_options_error(args) -> str | None:
    """What is wrong with a build's or check's source options, checked before any work (None: nothing):
    each of these would otherwise fail late, with a traceback or a misleading message."""
    if args.sample and args.data_dir:
        return "--sample and --data-dir contradict each other: give one"
    sources = registry.names() if getattr(args, "all", False) else [args.source] if args.source else []
    for source in sources:
        formats = registry.get(source).FORMATS
        if args.source_format and not formats:
            return f"--format: source {source!r} has no formats (only a source with several file formats takes one)"
    if args.data_dir and "://" not in args.data_dir and not os.path.exists(args.data_dir):
        return f"--data-dir {args.data_dir} does not exist"
    if sources and not args.sample and not args.data_dir and _offline():
        return (
            "the source must be downloaded and offline mode is on (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE): "
            "pass --data-dir DIR or --sample"
        )
    return None


def talks_to_the_hub(args) -> bool:
    """push, export and mix may; build and check when they download the source."""
    if args.command in ("build", "check"):
        return not args.sample and not args.data_dir
    return True


def _offline() -> bool:
    """Offline as ``datasets`` sees it (it reads the environment once, at import)."""
    import datasets.config
    import huggingface_hub.constants

    return bool(datasets.config.HF_HUB_OFFLINE or huggingface_hub.constants.HF_HUB_OFFLINE)
