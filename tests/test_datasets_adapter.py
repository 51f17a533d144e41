"""convhub's one override of a private ``datasets`` method (``convhub.datasets_adapter``) still fits the installed
``datasets``: a release that renames the method, changes its parameters or stops calling it fails here, by name."""

from __future__ import annotations

import datasets
import pytest
from convhub import datasets_adapter
from convhub.base import ConversationBuilder


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


@pytest.mark.parametrize("name", ["_prepare_split_single", "_write_split"])
def test_only_the_adapter_overrides_it(name):
    """Every builder gets the method from the adapter; no other convhub class defines it."""
    owners = [cls for cls in ConversationBuilder.__mro__ if name in vars(cls)]
    assert owners[0] is datasets_adapter.BatchWriting
    from convhub import registry

    for source in registry.names():
        builder_cls = registry.get(source)
        assert next(cls for cls in builder_cls.__mro__ if name in vars(cls)) is datasets_adapter.BatchWriting


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
    from convhub.build import build_source

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
    from convhub.build import build_source
    from convhub.duplicate_ids import write_shard

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
