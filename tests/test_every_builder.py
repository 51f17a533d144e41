"""What every source must do, run the same way for each (TFDS's ``DatasetBuilderTestCase`` idea).

The sources are the folders ``registry.names()`` finds under ``builders/``, so a new source is in this file as soon
as its folder exists, and passes it before anything else: its folder holds a builder with sample files and an
export, and ``dataset_cards/`` its card template; it publishes the shared views with exactly the shared features;
every config loads back with ``load_dataset``; its card's YAML agrees with the Parquet files; ``check`` counts what
``build`` wrote; and a build of its export is the same build. Source-specific behaviour lives in ``tests/<source>/``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import datasets
import oracle
import pyarrow.parquet as pq
import pytest
from huggingface_hub import DatasetCard
from hypothesis import given, settings
from hypothesis import strategies as st

from convhub import registry, schema
from convhub.build import build_source, check_source
from convhub.cards import templates_dir
from convhub.export.exporter import export_source, exporter
from convhub.views.definitions import SHARED_VIEWS

SHARED = {view.name: view.features for view in SHARED_VIEWS}


@pytest.mark.parametrize("source", registry.names())
def test_the_source_folder_is_a_whole_source(source):
    builder_cls = registry.get(source)
    assert source == builder_cls.SOURCE
    samples = [path for path in Path(builder_cls.sample_dir()).rglob("*") if path.is_file()]
    assert samples, f"{source} ships no sample files"
    assert (templates_dir() / f"{source}.md").is_file(), f"{source} has no card template"
    assert callable(exporter(source).write_files)


@pytest.mark.parametrize("source", registry.names())
def test_the_cards_yaml_agrees_with_the_parquet_files(sample_builds, source):
    """Each config of the card lists files that hold exactly the rows its ``dataset_info`` counts."""
    output = sample_builds[source].output
    card = DatasetCard.load(output / "README.md").data.to_dict()
    counted = {
        (info["config_name"], split["name"]): split["num_examples"]
        for info in card["dataset_info"]
        for split in info["splits"]
    }
    listed = {}
    for config in card["configs"]:
        for data_files in config["data_files"]:
            files = sorted(output.glob(data_files["path"]))
            assert files, (
                f"{source}: {config['config_name']} lists {data_files['path']}, which matches no file"
            )
            rows = sum(pq.ParquetFile(path).metadata.num_rows for path in files)
            listed[(config["config_name"], data_files["split"])] = rows
    assert listed == counted
    built = {
        (name, split): info.num_examples
        for name, config in sample_builds[source].configs.items()
        for split, info in config.splits.items()
    }
    assert built.items() <= listed.items()


@pytest.mark.parametrize("source", registry.names())
def test_check_counts_what_the_build_wrote(sample_builds, source):
    notes, statistics = check_source(source, registry.get(source).sample_dir())
    assert statistics.sorted() == sample_builds[source].statistics.sorted()
    assert notes and notes.items() <= sample_builds[source].notes.items()  # the build adds its views' notes


@pytest.mark.slow
@pytest.mark.parametrize("source", registry.names())
def test_a_build_of_the_export_is_the_same_build(sample_builds, source, tmp_path):
    """Export gives the source's files back, so building them again gives the same tables and card."""
    exported = export_source(source, sample_builds[source].output, tmp_path / "export").output
    rebuilt = build_source(source, tmp_path / "rebuilt", str(exported))
    differing = [
        name for name, _, same in oracle.compare(sample_builds[source].output, rebuilt.output) if not same
    ]
    assert differing == []


@pytest.mark.parametrize("source", registry.names())
def test_builder_declares_shared_features(source):
    builder_cls = registry.get(source)
    for name, features in SHARED.items():
        builder = builder_cls(config_name=name)
        assert builder.info.features == features, f"{source}/{name} differs from the shared schema"
    assert builder_cls.DEFAULT_CONFIG_NAME == "sessions"


@pytest.mark.slow
@pytest.mark.parametrize("source", registry.names())
def test_every_config_round_trips_through_load_dataset(sample_builds, source):
    result = sample_builds[source]
    for name, built in result.configs.items():
        loaded = datasets.load_dataset(str(result.output), name)
        assert set(loaded) == set(built.splits)
        for split, info in built.splits.items():
            assert loaded[split].features == built.features, f"{source}/{name}/{split}"
            assert loaded[split].num_rows == info.num_examples
    default = datasets.load_dataset(str(result.output))
    first_split = next(iter(default))
    assert default[first_split].features == schema.SESSIONS_FEATURES


@pytest.mark.slow
@pytest.mark.parametrize("view", sorted(SHARED))
def test_shared_views_concatenate_across_sources_without_cast(sample_builds, view):
    parts = []
    for result in sample_builds.values():
        if view not in result.configs:
            continue  # a source with no row in this view (MNBVC has no questions) publishes no such config
        loaded = datasets.load_dataset(str(result.output), view)
        parts.extend(loaded[split] for split in loaded)
    mixed = datasets.concatenate_datasets(parts)
    assert mixed.features == SHARED[view]
    assert mixed.num_rows == sum(part.num_rows for part in parts)
    assert set(mixed["source"]) == {
        source for source, result in sample_builds.items() if view in result.configs
    }


def test_json_columns_keep_strings_that_look_like_numbers():
    """``datasets.Json`` stores a JSON-parsable string as is; schema.to_json keeps "2022" a string."""
    features = datasets.Features({"extra": datasets.Json()})
    ds = datasets.Dataset.from_dict(
        {"extra": [schema.to_json("2022"), schema.to_json({"a": [1, "1"]})]}, features
    )
    assert ds["extra"] == ["2022", {"a": [1, "1"]}]


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()  # beyond 64 bits too: orjson refuses those, json writes them
    | st.floats()  # NaN and infinities: orjson would write null, json writes NaN / Infinity
    | st.text(),  # lone surrogates included
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=12,
)


def _same(a, b) -> bool:
    """Equal as JSON values, NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[key], b[key]) for key in a)
    return type(a) is type(b) and a == b


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_to_json_text_reads_back_as_the_same_value(value):
    text = schema.to_json(value)
    if value is None:
        assert text is None
    else:
        assert _same(json.loads(text), value)


def test_to_json_keeps_what_orjson_cannot_say():
    assert schema.to_json({"n": 2**70}) == '{"n": 1180591620717411303424}'
    assert schema.to_json([float("nan"), None]) == "[NaN, null]"
    assert schema.to_json({1: "a"}) == '{"1": "a"}'
    assert schema.to_json({"a": [1, "é"]}) == '{"a":[1,"é"]}'  # orjson's compact text otherwise
