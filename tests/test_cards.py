"""The card's YAML is what ``datasets`` keys a local folder's cache on: a rebuild must not load stale rows."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import yaml
from huggingface_hub import DatasetCard

from builders import registry
from builders.build import build_source


def _first_turn_text(folder: Path) -> str:
    return datasets.load_dataset(str(folder), "turns")["test"][0]["text"]


def test_rebuild_with_same_length_text_change_loads_the_new_rows(tmp_path):
    sample = next(Path(registry.get("locomo").sample_dir()).glob("*.json"))
    samples = json.loads(sample.read_text(encoding="utf-8"))
    source = tmp_path / "src" / "conversations.json"
    source.parent.mkdir()
    source.write_text(json.dumps(samples), encoding="utf-8")
    folder = tmp_path / "locomo-unified"
    build_source("locomo", folder, data_dir=str(source.parent))
    before = _first_turn_text(folder)

    first_turn = samples[0]["conversation"]["session_1"][0]
    first_turn["text"] = first_turn["text"][::-1]  # same length, same counts: only the content differs
    source.write_text(json.dumps(samples), encoding="utf-8")
    build_source("locomo", folder, data_dir=str(source.parent))

    assert _first_turn_text(folder) == before[::-1]


def test_download_size_is_the_parquet_bytes_of_each_config(sample_builds):
    for result in sample_builds.values():
        card = DatasetCard.load(result.output / "README.md")
        infos = {info["config_name"]: info for info in card.data.to_dict()["dataset_info"]}
        for name, built in result.configs.items():
            files = [path for paths in built.files.values() for path in paths]
            expected = sum((result.output / path).stat().st_size for path in files)
            assert infos[name]["download_size"] == expected, (result.source, name)
        header = yaml.safe_load((result.output / "README.md").read_text(encoding="utf-8").split("---")[1])
        assert header["license"] == registry.get(result.source).LICENSE


def test_rebuild_with_an_unchanged_card_still_loads_the_new_rows(tmp_path):
    """Two builds whose cards are identical (a subset renamed to a name of the same length): the second must
    not be served from the first one's cache, which ``datasets`` keys on the folder's name and card."""
    sample = next(Path(registry.get("locomo").sample_dir()).glob("*.json"))
    folder = tmp_path / "locomo-unified"
    for stem in ("aaaa", "bbbb"):
        source = tmp_path / stem / f"{stem}.json"
        source.parent.mkdir()
        source.write_bytes(sample.read_bytes())
        build_source("locomo", folder, data_dir=source.parent)
        assert set(datasets.load_dataset(str(folder), "turns")["test"]["subset"]) == {stem}


def test_a_pathlib_data_dir_is_accepted_by_every_builder(tmp_path):
    for name in registry.names():
        builder_cls = registry.get(name)
        builder = builder_cls(config_name="sessions", data_dir=Path(builder_cls.sample_dir()))
        assert builder.config.data_dir == builder_cls.sample_dir()
