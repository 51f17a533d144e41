"""Fixtures of ``convhub score``'s tests, loaded by its test modules as a plugin (``pytest_plugins``): no
conftest.py here, whose module name ``conftest`` would shadow tests/conftest.py for the tests that import it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.score.score_helpers import build

pytest_plugins = ["tests.support.judge_double"]  # the judge fixture, for the modules that load this plugin


@pytest.fixture(scope="session")
def locomo_sample(tmp_path_factory) -> Path:
    return build("locomo", tmp_path_factory.mktemp("score") / "locomo")


@pytest.fixture(scope="session")
def gigamemory_sample(tmp_path_factory) -> Path:
    return build("gigamemory", tmp_path_factory.mktemp("score") / "gigamemory")
