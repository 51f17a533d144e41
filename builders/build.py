"""Build a source into a Hub-ready folder: Parquet shards per config and split, and the dataset card.

The folder is assembled in a hidden staging folder beside the output and renamed into place only when
every config has been built and the card rendered, so a failed build never leaves partial output.
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

from builders import registry
from builders.errors import Notes
from builders.stats import Statistics

SHARD_NAME = re.compile(r"-(?P<split>[^-]+?)(?:-(?P<index>\d{5})-of-(?P<total>\d{5}))?\.parquet$")


@dataclass
class ConfigBuild:
    """What one config produced: its features and, per split, rows, bytes and shard paths."""

    name: str
    features: datasets.Features
    splits: dict[str, datasets.SplitInfo] = field(default_factory=dict)
    files: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class BuildResult:
    source: str
    output: Path
    configs: dict[str, ConfigBuild]
    notes: Notes
    statistics: Statistics


def check_source(source: str, data_dir: str | None = None, subsets=None) -> tuple[Notes, Statistics]:
    """Parse every record as the build would; return the normalization counts and the statistics."""
    builder = registry.get(source)(data_dir=data_dir, subsets=_tuple(subsets))
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
) -> BuildResult:
    """Build ``configs`` (all by default) of ``source`` into ``output``, replacing it only on success."""
    from builders.cards import write_card  # the card module imports Jinja2; keep `check` light

    builder_cls = registry.get(source)
    configs = list(configs or [view.name for view in builder_cls.views()])
    for name in configs:
        builder_cls.view_named(name)  # fail on a misspelt config before any work
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    notes, statistics = check_source(source, data_dir, subsets)
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}.partial-", dir=output.parent))
    try:
        with tempfile.TemporaryDirectory(prefix="convhub-cache-") as cache_dir:
            built = {
                name: _build_config(builder_cls, name, data_dir, subsets, num_proc, cache_dir, staging)
                for name in configs
            }
        result = BuildResult(source, output, built, notes, statistics)
        write_card(result, staging)
        if output.exists():
            shutil.rmtree(output)
        os.replace(staging, output)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return result


def _build_config(builder_cls, name, data_dir, subsets, num_proc, cache_dir, staging: Path) -> ConfigBuild:
    builder = builder_cls(config_name=name, data_dir=data_dir, subsets=_tuple(subsets), cache_dir=cache_dir)
    builder.download_and_prepare(file_format="parquet", num_proc=num_proc)
    built = ConfigBuild(name, builder.info.features)
    shards: dict[str, list[str]] = {}
    for path in glob.glob(os.path.join(builder.cache_dir, "*.parquet")):
        split = SHARD_NAME.search(os.path.basename(path)).group("split")
        shards.setdefault(split, []).append(path)
    (staging / name).mkdir()
    for split, paths in sorted(shards.items()):
        paths.sort()
        built.splits[split] = builder.info.splits[split]
        built.files[split] = []
        for index, path in enumerate(paths):
            relative = f"{name}/{split}-{index:05d}-of-{len(paths):05d}.parquet"
            shutil.move(path, staging / relative)
            built.files[split].append(relative)
    return built


def _tuple(values) -> tuple[str, ...] | None:
    return tuple(values) if values else None
