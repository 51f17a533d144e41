"""convhub overrides no private method of ``datasets``: no class in ``convhub`` or ``builders`` defines a method that
a ``datasets`` class it extends defines with a private name (``_``-prefixed, not a dunder), but the hooks
``datasets`` documents for a builder to define. A ``datasets`` release may change its private methods freely; the
local build (``convhub.engine.runners.local``) and the writer (``convhub.engine.writers.parquet_writer``) call none.

Then the files that writer makes: free text without statistics or dictionary, every other column with both.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import convhub
from convhub import builders

#: The hooks ``datasets`` documents for a builder to define (its own are empty or abstract).
DOCUMENTED_HOOKS = frozenset({"_info", "_split_generators", "_generate_examples"})


def _classes_of(package) -> list[type]:
    """Every class defined in a module of ``package`` (its subpackages too), each once."""
    found = {}
    for module_info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        try:
            module = importlib.import_module(module_info.name)
        except ImportError:  # an extra that is not installed (PySpark): its module defines nothing to check
            continue
        for _, value in inspect.getmembers(module, inspect.isclass):
            if value.__module__ == module.__name__:
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return list(found.values())


def _is_datasets_class(cls: type) -> bool:
    return cls.__module__.split(".")[0] == "datasets"


def _private_overrides(cls: type) -> set[tuple[str, str, str]]:
    """(overriding class, method, ``datasets`` class) for each private ``datasets`` method a class of ``cls``'s MRO
    outside ``datasets`` defines again, but the documented hooks."""
    mro = cls.__mro__
    found = set()
    for index, own in enumerate(mro):
        if _is_datasets_class(own) or own is object:
            continue
        for name, value in vars(own).items():
            if not name.startswith("_") or name.startswith("__") or name in DOCUMENTED_HOOKS:
                continue
            if not callable(value) and not isinstance(value, (staticmethod, classmethod, property)):
                continue
            for base in mro[index + 1 :]:
                if _is_datasets_class(base) and name in vars(base):
                    found.add((own.__qualname__, name, f"{base.__module__}.{base.__qualname__}"))
    return found


def test_the_walk_finds_every_builder():
    """The check below sees the builders (a walk that found nothing would pass)."""
    from convhub import registry
    from convhub.builder import ConversationBuilder

    classes = set(_classes_of(convhub)) | set(_classes_of(builders))
    assert ConversationBuilder in classes
    assert {registry.get(source) for source in registry.names()} <= classes


def test_the_check_names_a_private_override():
    import datasets

    class Overriding(datasets.GeneratorBasedBuilder):
        def _info(self):  # a documented hook: allowed
            return datasets.DatasetInfo()

        def _prepare_split_single(self, *args, **kwargs):
            yield from ()

    assert _private_overrides(Overriding) == {
        (
            "test_the_check_names_a_private_override.<locals>.Overriding",
            "_prepare_split_single",
            "datasets.builder.GeneratorBasedBuilder",
        ),
    }


@pytest.mark.parametrize("package", [convhub, builders], ids=["convhub", "builders"])
def test_no_class_overrides_a_private_datasets_method(package):
    overrides = {found for cls in _classes_of(package) for found in _private_overrides(cls)}
    assert overrides == set()


def test_pyproject_does_not_cap_datasets():
    """No upper bound on ``datasets``: nothing convhub does depends on its private methods."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8")
    [line] = [line for line in text.splitlines() if line.strip().startswith('"datasets')]
    assert "<" not in line and ">=5.1" in line


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
    from convhub.engine.checks.duplicate_ids import write_shard

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
