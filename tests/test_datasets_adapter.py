"""convhub's one override of a private ``datasets`` method (``convhub.engine.datasets_adapter``) still fits the installed
``datasets``: a release that renames the method, changes its parameters or stops calling it fails here, by name."""

from __future__ import annotations

import datasets
import pytest

from convhub import registry
from convhub.engine import datasets_adapter


def test_the_installed_datasets_calls_the_method_the_adapter_overrides():
    assert datasets_adapter.problem_with_datasets() is None


def test_a_changed_signature_is_named(monkeypatch):
    def changed(self, gen_kwargs, fpath, file_format, max_shard_size, job_id):  # split_info gone
        yield from ()

    monkeypatch.setattr(datasets.GeneratorBasedBuilder, "_prepare_split_single", changed)
    problem = datasets_adapter.problem_with_datasets()
    assert problem is not None and f"datasets {datasets.__version__}" in problem and "split_info" in problem


def test_a_removed_method_is_named(monkeypatch):
    monkeypatch.delattr(datasets.GeneratorBasedBuilder, "_prepare_split_single")
    assert "has no GeneratorBasedBuilder._prepare_split_single" in datasets_adapter.problem_with_datasets()


#: The hooks ``datasets`` documents for a builder to define (its own are empty or abstract).
DOCUMENTED_HOOKS = {"_info", "_split_generators", "_generate_examples"}


@pytest.mark.parametrize("source", registry.names())
def test_no_builder_overrides_a_private_method_but_the_adapter(source):
    """Every private name of ``datasets``' builders that a convhub builder defines, but the documented hooks,
    comes from the adapter: the one module whose test says when a ``datasets`` release changes them."""
    private = {name for cls in datasets.GeneratorBasedBuilder.__mro__ for name in vars(cls)}
    private = {name for name in private if name.startswith("_") and not name.startswith("__")}
    overridden = {
        (name, cls.__module__)
        for cls in registry.get(source).__mro__
        if cls.__module__.split(".")[0] == "convhub"
        for name in vars(cls)
        if name in private - DOCUMENTED_HOOKS
    }
    assert overridden == {
        ("_prepare_split_single", datasets_adapter.__name__),
        ("_prepare_split", datasets_adapter.__name__),
    }


@pytest.mark.parametrize("name", ["_prepare_split_single", "_write_split", "_prepare_split"])
def test_every_builder_gets_the_adapters_method(name):
    for source in registry.names():
        builder_cls = registry.get(source)
        assert next(cls for cls in builder_cls.__mro__ if name in vars(cls)) is datasets_adapter.BatchWriting


def test_a_split_preparation_that_no_longer_makes_its_bar_with_hf_tqdm_is_named(monkeypatch):
    def changed(
        self,
        split_generator,
        check_duplicate_keys=True,
        file_format="arrow",
        num_proc=None,
        max_shard_size=None,
    ):
        return self._prepare_split_single  # calls no bar

    monkeypatch.setattr(datasets.GeneratorBasedBuilder, "_prepare_split", changed)
    assert "no longer makes its bar with builder.hf_tqdm" in datasets_adapter.problem_with_datasets()


def test_a_build_that_no_longer_prepares_splits_by_the_method_is_named(monkeypatch):
    def changed(self, dl_manager, verification_mode, **prepare_splits_kwargs):
        return self._prepare_splits(dl_manager)

    monkeypatch.setattr(datasets.DatasetBuilder, "_download_and_prepare", changed)
    assert "_download_and_prepare no longer calls _prepare_split" in datasets_adapter.problem_with_datasets()


def test_a_changed_parquet_writer_is_named(monkeypatch):
    """convhub's ParquetWriter copies datasets' ``_build_writer``: a release that changes it fails here, by name."""
    from datasets import arrow_writer

    def changed(self, inferred_schema):
        self._schema, self._features = self._build_schema(inferred_schema)

    monkeypatch.setattr(arrow_writer.ParquetWriter, "_build_writer", changed)
    problem = datasets_adapter.problem_with_datasets()
    assert problem is not None and "ParquetWriter._build_writer" in problem


def _column_chunks(path):
    """(leaf path, has min/max statistics, dictionary-encoded) of every column chunk of a Parquet file."""
    import pyarrow.parquet as pq

    metadata = pq.ParquetFile(path).metadata
    for group in range(metadata.num_row_groups):
        for index in range(metadata.num_columns):
            chunk = metadata.row_group(group).column(index)
            statistics = chunk.statistics
            yield (
                chunk.path_in_schema,
                statistics is not None and statistics.has_min_max,
                chunk.dictionary_page_offset is not None,
            )


@pytest.mark.parametrize("config", ["sessions", "turns", "messages"])
def test_free_text_columns_have_neither_statistics_nor_dictionary(config, tmp_path):
    """Written by the batch writer (sessions) and by the derived views (turns, messages): free text
    (``schema.FREE_TEXT``) without statistics or dictionary, ids and numbers with statistics."""
    from convhub import registry, schema
    from convhub.engine.build import build_source

    build_source("locomo", tmp_path / "out", registry.get("locomo").sample_dir(), [config], None)
    [path] = sorted((tmp_path / "out" / config).glob("*.parquet"))
    chunks = {leaf: (stats, dictionary) for leaf, stats, dictionary in _column_chunks(path)}
    free = [leaf for leaf in chunks if leaf.rsplit(".", 1)[-1] in schema.FREE_TEXT]
    assert free and all(chunks[leaf] == (False, False) for leaf in free)
    assert chunks["conversation_id"] == (True, True) and chunks["source"] == (True, True)
    numbers = [leaf for leaf in chunks if leaf.endswith(("session_index", "turn_index", "timestamp"))]
    assert all(chunks[leaf][0] for leaf in numbers)


def test_a_shard_rewritten_without_duplicates_is_written_like_every_shard(tmp_path):
    """``duplicate_ids.write_shard`` (rows dropped under ``skip``) keeps the rows, the ``datasets`` metadata and
    the free-text column options of the writer, not pyarrow's defaults."""
    import pyarrow.parquet as pq

    from convhub import registry
    from convhub.engine.build import build_source
    from convhub.engine.duplicate_ids import write_shard

    build_source("locomo", tmp_path / "out", registry.get("locomo").sample_dir(), ["sessions"], None)
    [built] = sorted((tmp_path / "out" / "sessions").glob("*.parquet"))
    table = pq.read_table(built)
    write_shard(tmp_path / "rewritten.parquet", table.slice(1))
    rewritten = pq.read_table(tmp_path / "rewritten.parquet")
    assert rewritten.equals(table.slice(1), check_metadata=True)
    chunks = {
        leaf: (stats, dictionary)
        for leaf, stats, dictionary in _column_chunks(tmp_path / "rewritten.parquet")
    }
    assert chunks["sessions.list.element.turns.list.element.text"] == (False, False)
    assert chunks["conversation_id"] == (True, True)
