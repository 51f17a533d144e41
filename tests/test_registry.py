"""The registry finds the sources by looking at ``builders/``: a folder with a ``builder`` module is a source, sorted
by name, and its one ConversationBuilder subclass is the builder; nothing else names a source."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from convhub import builders, registry

ROOT = Path(__file__).resolve().parents[1]

BUILDER = """
from convhub.builder import ConversationBuilder


class ToyBuilder(ConversationBuilder):
    SOURCE = "toy_discovered"
"""


@pytest.fixture
def more_sources(tmp_path, monkeypatch):
    """A second folder of sources on ``convhub.builders``' path; the registry's cache forgotten before and after."""
    monkeypatch.setattr(builders, "__path__", [*builders.__path__, str(tmp_path)])
    registry._found.cache_clear()
    registry._builder_class.cache_clear()
    yield tmp_path
    registry._found.cache_clear()
    registry._builder_class.cache_clear()
    for name in [name for name in sys.modules if name.startswith("convhub.builders.toy_discovered")]:
        del sys.modules[name]


def source_folder(root: Path, name: str, builder: str | None) -> None:
    (root / name).mkdir()
    (root / name / "__init__.py").write_text("", encoding="utf-8")
    if builder is not None:
        (root / name / "builder.py").write_text(textwrap.dedent(builder), encoding="utf-8")


def test_the_sources_are_the_folders_with_a_builder_sorted_by_name():
    folders = sorted(path.parent.name for path in (ROOT / "builders").glob("*/builder.py"))
    assert registry.names() == folders
    assert [registry.get(name).SOURCE for name in folders] == folders


def test_a_new_folder_is_a_new_source(more_sources):
    source_folder(more_sources, "toy_discovered", BUILDER)
    source_folder(
        more_sources, "toy_discovered_helpers", None
    )  # a package without a builder module is no source
    source_folder(more_sources, "_toy_discovered_private", BUILDER)  # nor is a private one
    assert "toy_discovered" in registry.names() and registry.names() == sorted(registry.names())
    assert not {"toy_discovered_helpers", "_toy_discovered_private"} & set(registry.names())
    assert registry.get("toy_discovered").__name__ == "ToyBuilder"
    assert registry.get("toy_discovered").__module__ == "convhub.builders.toy_discovered.builder"


def test_a_builder_module_defines_one_builder_class(more_sources):
    """Classes a builder module imports (a base class) do not count; two of its own are an error naming both."""
    source_folder(
        more_sources,
        "toy_discovered",
        BUILDER + "\n\nclass OtherBuilder(ToyBuilder):\n    SOURCE = 'other'\n",
    )
    with pytest.raises(
        TypeError, match=r"exactly one ConversationBuilder subclass.*OtherBuilder, ToyBuilder"
    ):
        registry.get("toy_discovered")


def test_an_unknown_source_names_the_known_ones():
    with pytest.raises(KeyError, match=f"unknown source 'nope'; known: {', '.join(registry.names())}"):
        registry.get("nope")
