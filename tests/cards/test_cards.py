"""The card's YAML is what ``datasets`` keys a local folder's cache on: a rebuild must not load stale rows."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pyarrow.parquet as pq
import yaml
from huggingface_hub import DatasetCard

from convhub import registry
from convhub.engine.build import build_source


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
        subsets = sorted({subset for _, subset in result.statistics.by_split_subset})
        assert header["license"] == registry.get(result.source).card_license(subsets)["license"]


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


# --- metadata and sections generated from the data --------------------------------------------------------


def _card(result) -> DatasetCard:
    return DatasetCard.load(result.output / "README.md")


def _languages_of_rows(result) -> set[str]:
    table = pq.read_table(result.output / "sessions", columns=["language"])
    return set(table.column("language").to_pylist())


def test_language_lists_exactly_the_languages_of_the_rows(sample_builds):
    for source, result in sample_builds.items():
        assert set(_card(result).data.language) == _languages_of_rows(result), source
    assert "ja" in _card(sample_builds["mnbvc"]).data.language  # the sample's one Japanese row
    assert _card(sample_builds["convlab"]).data.language == ["en"]  # no CrossWOZ in the sample


def test_task_categories_follow_the_configs_that_were_built(sample_builds, tmp_path):
    for source, result in sample_builds.items():
        tasks = _card(result).data.task_categories
        assert ("question-answering" in tasks) == ("qa" in result.configs), source
        assert "text-generation" in tasks
    only_qa = build_source(
        "locomo", tmp_path / "qa", data_dir=registry.get("locomo").sample_dir(), configs=["qa"]
    )
    assert _card(only_qa).data.task_categories == ["question-answering"]


def test_sizes_sources_and_licenses_are_the_hub_metadata_fields(sample_builds):
    for source, result in sample_builds.items():
        data = _card(result).data
        assert isinstance(data.size_categories, list) and len(data.size_categories) == 1, source
        assert data.source_datasets and all(name.startswith("extended|") for name in data.source_datasets)
        if data.license == "other":
            assert data.license_name and data.license_link.startswith("https://"), source
    assert _card(sample_builds["mnbvc"]).data.source_datasets == ["extended|liwu/MNBVC"]


def test_a_convlab_card_says_each_subsets_license_and_one_license_only_when_they_share_it():
    from convhub.builders.convlab.builder import ConvLabBuilder

    assert ConvLabBuilder.card_license(["camrest", "tm1"]) == {"license": "cc-by-4.0"}
    mixed = ConvLabBuilder.card_license(["camrest", "woz"])
    assert mixed["license"] == "other" and mixed["license_link"].startswith("https://github.com/ConvLab/")
    assert ConvLabBuilder.card_license(["metalwoz"])["license"] == "other"  # MSR's license has no Hub id
    assert ConvLabBuilder.card_source_datasets(["woz", "mine"]) == [
        "extended|ConvLab/woz",
        "extended|other-mine",
    ]


def test_every_card_shows_an_example_row_of_each_config_and_its_limitations(sample_builds):
    for source, result in sample_builds.items():
        text = (result.output / "README.md").read_text(encoding="utf-8")
        for config in result.configs:
            summary = f"<summary><code>{config}</code>"
            assert summary in text, (source, config)
            example = text.split(summary, 1)[1].split("```json\n", 1)[1].split("\n```", 1)[0]
            row = json.loads(example)
            assert set(row) == set(result.configs[config].features), (source, config)
        assert "\n## Limitations and biases\n" in text, source
        assert "\n\n\n" not in text, source
        assert "avg characters/turn" in text and "tokens/turn" not in text, source


def test_an_example_row_cuts_long_text_and_lists_and_says_so():
    from convhub.cards import shorten

    row = shorten({"text": "字" * 500, "turns": list(range(10)), "nested": [{"a": "b" * 161}]})
    assert row["text"] == "字" * 160 + "… (340 more characters)"
    assert row["turns"] == [0, 1, 2, "… (7 more)"]
    assert row["nested"] == [{"a": "b" * 160 + "… (1 more characters)"}]


def test_combined_convlab_configs_list_patterns_that_match_exactly_their_files(sample_builds):
    result = sample_builds["convlab"]
    configs = {entry["config_name"]: entry for entry in _card(result).data.configs}
    for name, built in result.configs.items():
        for split, files in built.files.items():
            [entry] = [e for e in configs[name]["data_files"] if e["split"] == split]
            assert isinstance(entry["path"], str) and "*" in entry["path"], (name, split, entry)
            matched = sorted(
                p.relative_to(result.output).as_posix() for p in result.output.glob(entry["path"])
            )
            assert matched == sorted(files), (name, split)
    assert configs["turns"]["data_files"][1] == {"split": "train", "path": "turns/*/train-*"}
    assert configs["turns-toyhotel"]["data_files"][1] == {"split": "train", "path": "turns/toyhotel/train-*"}


def test_build_repo_id_names_the_repo_in_the_card_code(tmp_path, capsys):
    from convhub.cli.main import main

    sample = registry.get("locomo").sample_dir()
    result = build_source(
        "locomo", tmp_path / "a", data_dir=sample, configs=["qa"], repo_id="my-org/memories"
    )
    text = (result.output / "README.md").read_text(encoding="utf-8")
    assert 'load_dataset("my-org/memories", "qa")' in text and "ORG/" not in text
    assert main(["build", "locomo", "--sample", "--output", str(tmp_path / "b"), "--repo-id", "bad id"]) != 0
    assert "bad id" in capsys.readouterr().err and not (tmp_path / "b").exists()


def test_a_card_credits_only_what_convhubs_metadata_declares(sample_builds):
    """No card links an address the project does not publish; each names the convhub version that made it."""
    from importlib import metadata

    version = metadata.version("convhub")
    declared = metadata.metadata("convhub").get_all("Project-URL") or []
    for result in sample_builds.values():
        text = (result.output / "README.md").read_text(encoding="utf-8")
        assert "github.com/convhub" not in text, result.source
        assert f"produced by convhub {version}" in text or declared, result.source


def test_the_turns_role_is_described_as_mapped_not_as_the_chat_role(sample_builds):
    """LoCoMo's `messages` gives roles per session: the schema must not call `turns.role` the chat role."""
    text = (sample_builds["locomo"].output / "README.md").read_text(encoding="utf-8")
    assert "the chat role)" not in text
    assert "as the Role mapping section maps it" in text
    assert "In `messages` the speaker who opens each session is the `user`" in text


def test_the_example_row_made_from_arrow_equals_the_whole_row_shortened(sample_builds):
    """``shortened`` makes Python objects only for what the example keeps; what it keeps is ``shorten``'s, and
    ``shortened_first_row`` (the card's: a small first row group in one read, a large one a Parquet column at a
    time) gives the same, its keys in the same order."""
    from convhub.cards import shorten, shortened, shortened_first_row
    from convhub.engine.runners.memory import LARGE_TABLE_BYTES
    from convhub.storage.folders import parquet_file

    compared = 0
    for result in sample_builds.values():
        for built in result.configs.values():
            for relative in (path for paths in built.files.values() for path in paths):
                parquet = parquet_file(result.output / relative)
                if parquet.metadata.num_rows:
                    batch = next(parquet.iter_batches(batch_size=1))
                    whole = shorten(batch.to_pylist()[0])
                    assert {name: shortened(batch.column(name)[0]) for name in batch.schema.names} == whole
                    assert parquet.metadata.row_group(0).total_byte_size <= LARGE_TABLE_BYTES
                    for budget, reads in ((None, 1), (0, parquet.metadata.num_columns)):
                        made = _counting_reads(parquet)
                        example = shortened_first_row(parquet, budget)
                        assert json.dumps(example, default=str) == json.dumps(whole, default=str)
                        assert len(made) == reads
                    compared += 1
    assert compared >= 30


def _counting_reads(parquet: pq.ParquetFile) -> list[tuple]:
    """Makes ``parquet`` note each read (``iter_batches`` call) in the list returned: its arguments."""
    reads = parquet.iter_batches
    made: list[tuple] = []

    def noted(*args, **kwargs):
        made.append((args, kwargs))
        return reads(*args, **kwargs)

    parquet.iter_batches = noted
    return made
