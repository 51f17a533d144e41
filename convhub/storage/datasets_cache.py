"""``datasets``' cached copies of a build folder: which configs an earlier build's card listed, and forgetting
exactly those copies after a rebuild (``load_dataset(folder)`` would else load the previous build's rows)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import datasets
import datasets.config
from huggingface_hub import DatasetCard

from convhub.storage.folders import Folder, is_url


def card_configs(folder: Folder) -> set[str]:
    """The config names an earlier build's card lists (none when ``folder`` is no build, or is at a URL:
    ``datasets`` caches local folders only)."""
    if is_url(folder):
        return set()
    card = folder / "README.md"
    if not card.is_file():
        return set()
    try:
        data = DatasetCard.load(card).data.to_dict()
    except Exception:  # a user's README is no card of ours: nothing of ours is cached for it
        return set()
    return {entry["config_name"] for entry in data.get("configs") or [] if "config_name" in entry}


def forget_cached_copies(folder: Folder, configs: set[str]) -> None:
    """Drop ``datasets``' cached copies of ``folder``'s ``configs``, and nothing else.

    ``load_dataset(folder)`` caches a local folder under its *name* and a hash of its card's YAML, not of
    its files: after a rebuild whose YAML is unchanged (a same-length fix of one value), it would load the
    previous build's rows. A cached config is ``<cache>/<folder name>/<config>/``; only those whose
    ``dataset_info.json`` says they were made by the ``parquet`` module from a folder of this name are
    removed, so ``load_dataset("json")``'s cache survives a build into ``x/json``. ``datasets`` regenerates a
    removed cache from the new files on the next load.
    """
    if is_url(folder):
        return
    named = Path(datasets.config.HF_DATASETS_CACHE) / folder.name
    for config in sorted(configs):
        cached = named / config
        infos = list(cached.glob("*/*/dataset_info.json"))
        if infos and all(_cached_from_folder(info, folder.name) for info in infos):
            shutil.rmtree(cached, ignore_errors=True)


def _cached_from_folder(info: Path, name: str) -> bool:
    try:
        recorded = json.loads(info.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return recorded.get("builder_name") == "parquet" and recorded.get("dataset_name") == name
