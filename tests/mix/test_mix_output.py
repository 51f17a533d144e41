"""``convhub mix``'s output: the mixture folder (card, shares, license, shards), written as builds are; a mix of
every registered source's sample build; sources from Hub repos and the mixture pushed (``tests/support/hub_double.py``).
"""

from __future__ import annotations

import collections
from pathlib import Path

import datasets
import pytest
import yaml
from huggingface_hub import DatasetCard

from convhub import mix, schema
from convhub.cli import main as cli
from convhub.storage.staging import MARKER
from tests.support.mix_sources import (  # noqa: F401 (short_arrow_shutdown_pause: an autouse fixture)
    ids,
    numbered,
    recipe,
    short_arrow_shutdown_pause,
    write_source,
)

# -- the mixture folder ---------------------------------------------------------------------------


def test_written_folder_loads_back_with_card_shares_and_license_warning(tmp_path):
    write_source(tmp_path / "free", numbered("f", 30), license="apache-2.0")
    write_source(tmp_path / "nc", numbered("n", 10, words=6), license="cc-by-nc-4.0")
    parsed = recipe(
        tmp_path,
        """
        name: demo-mix
        sources:
          - {path: free}
          - {path: nc, budget: {tokens: 60}}
        """,
    )
    result = mix.write_mixture(parsed, tmp_path / "out", repo_id="org/demo-mix")
    assert result.files == ["messages/train-00000-of-00001.parquet"]
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == [MARKER, "README.md", "messages"]
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".")] == []  # no staging left

    loaded = datasets.load_dataset(str(tmp_path / "out"), split="train")
    assert loaded.features == schema.MESSAGES_FEATURES
    assert ids(loaded)[:30] == [f"f-{i}" for i in range(30)]
    drawn = ids(loaded)[30:]
    assert len(drawn) == 5 and drawn == sorted(drawn, key=lambda row_id: int(row_id[2:]))  # 5 of 10, in order

    free, nc = result.reports
    assert (free.rows, free.tokens, nc.rows, nc.tokens) == (30, 180, 5, 60)
    assert result.warnings() == ["nc: license cc-by-nc-4.0 does not allow commercial use"]

    card = DatasetCard.load(tmp_path / "out" / "README.md")
    assert card.data.license == ["apache-2.0", "cc-by-nc-4.0"]
    assert card.data.pretty_name == "demo-mix" and "mixture" in card.data.tags
    assert card.data.configs == [
        {
            "config_name": "messages",
            "data_files": [{"split": "train", "path": "messages/train-*"}],
            "default": True,
        }
    ]
    assert card.data.dataset_info["splits"] == [
        {"name": "train", "num_bytes": result.num_bytes, "num_examples": 35}
    ]
    assert (
        "| free | `free` (local) | free | apache-2.0 | – (concatenated) | 30 | 30 | 1 | 85.7% | 180 | 75.0% |"
        in card.text
    )
    assert (
        "| nc | `nc` (local) | nc | cc-by-nc-4.0 ⚠ non-commercial | – (concatenated) | 5 | 5 | 1 | 14.3% | 60 | 25.0% |"
        in (card.text)
    )
    assert "**License warning.**" in card.text and "does not allow commercial use" in card.text
    assert 'load_dataset("org/demo-mix", split="train")' in card.text
    assert yaml.safe_load(card.text.split("```yaml\n")[1].split("```")[0])["name"] == "demo-mix"


def test_a_mixture_is_written_as_builds_are_free_text_without_statistics(tmp_path):
    """The mixture's shards come from convhub's writer, like every build's: a message's text has neither min/max
    statistics nor a dictionary (a very long message is not copied for them), ids keep their statistics."""
    import pyarrow.parquet as pq

    write_source(tmp_path / "a", numbered("a", 30))
    write_source(tmp_path / "b", numbered("b", 30, words=1))
    parsed = recipe(tmp_path, "seed: 5\nsources: [{path: a, probability: 0.5}, {path: b, probability: 0.5}]")
    result = mix.write_mixture(parsed, tmp_path / "out")
    [path] = sorted((tmp_path / "out").rglob("*.parquet"))
    metadata = pq.ParquetFile(path).metadata
    chunks = {
        chunk.path_in_schema: (
            chunk.statistics is not None and chunk.statistics.has_min_max,
            chunk.dictionary_page_offset is not None,
        )
        for chunk in (metadata.row_group(0).column(index) for index in range(metadata.num_columns))
    }
    assert chunks["messages.list.element.content"] == (False, False)
    assert chunks["conversation_id"][0]
    assert b"huggingface" in pq.read_schema(path).metadata
    loaded = datasets.load_dataset(str(tmp_path / "out"), split="train")
    assert len(loaded) == result.rows and sorted(set(ids(loaded))) == sorted(set(ids(mix.mixture(parsed))))


def test_streamed_and_in_memory_folders_are_identical(tmp_path):
    write_source(tmp_path / "a", numbered("a", 20))
    write_source(tmp_path / "b", numbered("b", 20, words=1))
    parsed = recipe(tmp_path, "seed: 5\nsources: [{path: a, probability: 0.5}, {path: b, probability: 0.5}]")
    in_memory = mix.write_mixture(parsed, tmp_path / "memory")
    streamed = mix.write_mixture(parsed, tmp_path / "streamed", streaming=True)
    assert [(r.rows, r.tokens) for r in in_memory.reports] == [(r.rows, r.tokens) for r in streamed.reports]
    assert in_memory.rows == streamed.rows > 0
    load = datasets.load_dataset
    assert (
        load(str(tmp_path / "memory"), split="train").to_list()
        == load(str(tmp_path / "streamed"), split="train").to_list()
    )
    assert (
        "| a | messages/train | none | none | – | – | – | 0 |"
        in (tmp_path / "streamed" / "README.md").read_text()
    )


def test_shards_split_by_size(tmp_path):
    write_source(tmp_path / "a", numbered("a", 200, words=20))
    result = mix.write_mixture(
        recipe(tmp_path, "sources: [{path: a}]"), tmp_path / "out", max_shard_size="20KB"
    )
    assert len(result.files) > 1
    assert (
        result.files[-1] == f"messages/train-{len(result.files) - 1:05d}-of-{len(result.files):05d}.parquet"
    )
    assert len(datasets.load_dataset(str(tmp_path / "out"), split="train")) == 200


def test_a_failed_mix_leaves_the_previous_output(tmp_path):
    write_source(tmp_path / "a", numbered("a", 2))
    mix.write_mixture(recipe(tmp_path, "sources: [{path: a}]"), tmp_path / "out")
    before = (tmp_path / "out" / "README.md").read_text()
    with pytest.raises(mix.RecipeError):
        mix.write_mixture(recipe(tmp_path, "sources: [{path: a, split: validation}]"), tmp_path / "out")
    assert (tmp_path / "out" / "README.md").read_text() == before
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".")] == []


def test_cli_mix(tmp_path, capsys):
    write_source(tmp_path / "a", numbered("a", 4), license="cc-by-nc-sa-4.0")
    (tmp_path / "recipe.yaml").write_text("name: cli-mix\nsources: [{path: a}]\n")
    assert cli.main(["mix", str(tmp_path / "recipe.yaml"), "--output", str(tmp_path / "out")]) == 0
    out, err = capsys.readouterr()
    assert "cli-mix:" in out and "4 rows" in out and "24 tokens" in out
    assert "warning: a: license cc-by-nc-sa-4.0 does not allow commercial use" in err
    (tmp_path / "bad.yaml").write_text("sources: [{path: a, weight: 1, filters: {max_turn: 3}}]\n")
    assert cli.main(["mix", str(tmp_path / "bad.yaml"), "--output", str(tmp_path / "bad")]) == 1
    assert "recipe key 'sources[0].filters.max_turn': unknown key" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()


# -- real builds ----------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("config", ["messages", "sessions"])
def test_mixing_the_sample_build_of_every_registered_source(sample_builds, tmp_path, config):
    """Whatever sources are registered, their sample builds mix with no cast, each source's rows all there."""
    sources = [
        {"path": str(result.output), "split": sorted(result.configs[config].splits)}
        for result in sample_builds.values()
    ]
    parsed = mix.parse_recipe({"config": config, "deduplicate": False, "sources": sources})
    result = mix.write_mixture(parsed, tmp_path / "out")
    loaded = datasets.load_dataset(str(tmp_path / "out"), config, split="train")
    assert loaded.features == mix.CONFIG_FEATURES[config]
    expected = {
        name: sum(s.num_examples for s in build.configs[config].splits.values())
        for name, build in sample_builds.items()
    }
    assert collections.Counter(loaded["source"]) == expected
    assert [report.license for report in result.reports] == [
        DatasetCard.load(build.output / "README.md").data.license for build in sample_builds.values()
    ]


# -- the Hub (tests/support/hub_double.py) ----------------------------------------------------------------


@pytest.mark.slow
def test_sources_from_hub_repos_streamed_and_the_mixture_pushed(hub, tmp_path):
    from convhub.publish.push import push_folder

    push_folder(write_source(tmp_path / "a", numbered("a", 30)), "org/a-unified")
    push_folder(write_source(tmp_path / "b", numbered("b", 20), license="cc-by-nc-4.0"), "org/b-unified")
    text = """
        name: hub-mix
        seed: 1
        sources:
          - {repo: org/a-unified, weight: 1, budget: {tokens: 60}}
          - {repo: org/b-unified, weight: 1}
        """
    parsed = recipe(tmp_path, text)
    streamed = list(mix.mixture(parsed, streaming=True))
    assert streamed == list(mix.mixture(parsed, streaming=True))  # seeded: the same draw again
    drawn = [row["conversation_id"] for row in streamed if row["conversation_id"].startswith("a-")]
    assert len(drawn) == len(set(drawn)) == 10  # 60 tokens of 6-token rows, drawn from a shuffle buffer
    result = mix.write_mixture(parsed, tmp_path / "out", streaming=True)
    assert [report.license for report in result.reports] == ["apache-2.0", "cc-by-nc-4.0"]
    push_folder(tmp_path / "out", "org/hub-mix")
    assert datasets.load_dataset("org/hub-mix", split="train").to_list() == streamed


def test_cli_mix_push(hub, tmp_path, capsys):
    write_source(tmp_path / "a", numbered("a", 5))
    (tmp_path / "recipe.yaml").write_text("name: cli-mix\nsources: [{path: a}]\n")
    arguments = ["mix", str(tmp_path / "recipe.yaml"), "--output", str(tmp_path / "out"), "--push"]
    assert cli.main(arguments) == 2  # a usage error
    assert "--push needs --repo-id" in capsys.readouterr().err and not (tmp_path / "out").exists()
    assert cli.main([*arguments, "--repo-id", "org/cli-mix"]) == 0
    assert ids(datasets.load_dataset("org/cli-mix", split="train")) == [f"a-{i}" for i in range(5)]
    assert (
        'load_dataset("org/cli-mix", split="train")'
        in hub.repo("org/cli-mix").head().files["README.md"].content.decode()
    )


def test_example_recipe_names_the_sample_build_of_registered_sources():
    from convhub import registry

    example = Path(__file__).resolve().parents[2] / "examples" / "recipe.yaml"
    parsed = mix.load_recipe(example)
    hub_names = {registry.get(name).HUB_NAME for name in registry.names()}
    assert parsed.interleaved and parsed.stopping_strategy == "all_exhausted_without_replacement"
    for entry in parsed.sources:
        assert entry.path.parent == (example.parent.parent / "out").resolve()
        assert entry.path.name in hub_names, entry


def test_the_example_recipe_mixes_the_sample_builds_with_no_row_repeated(sample_builds, tmp_path):
    """Under ``all_exhausted`` the example drew ConvLab-3's 2 sample dialogues again and again (40% of the
    mixture, with ``deduplicate: true``); every row is now in the mixture once, and nothing is oversampled."""
    example = Path(__file__).resolve().parents[2] / "examples" / "recipe.yaml"
    document = yaml.safe_load(example.read_text(encoding="utf-8"))
    builds = {build.output.name: build.output for build in sample_builds.values()}
    for source in document["sources"]:
        source["path"] = str(builds[Path(source["path"]).name])
    result = mix.write_mixture(mix.parse_recipe(document), tmp_path / "out")
    assert result.oversampling_warnings() == []
    assert all(report.rows == report.distinct_rows == report.rows_after_budget for report in result.reports)
    assert result.rows == sum(report.rows for report in result.reports) > 0


@pytest.mark.slow
def test_convhub_push_publishes_a_mixture_folder_without_a_source(hub, tmp_path, capsys):
    write_source(tmp_path / "a", numbered("a", 4))
    (tmp_path / "recipe.yaml").write_text("name: pushed-mix\nsources: [{path: a}]\n")
    assert cli.main(["mix", str(tmp_path / "recipe.yaml"), "--output", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    assert cli.main(["push", "--repo-id", "org/pushed-mix"]) == 2  # a usage error, on one line
    assert "--folder for a mixture" in capsys.readouterr().err
    assert cli.main(["push", "--repo-id", "org/pushed-mix", "--folder", str(tmp_path / "out")]) == 0
    assert ids(datasets.load_dataset("org/pushed-mix", split="train")) == [f"a-{i}" for i in range(4)]
