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
