"""Fixtures of ``convhub score``'s tests, loaded by its test modules as a plugin (``pytest_plugins``): no
conftest.py here, whose module name ``conftest`` would shadow tests/conftest.py for the tests that import it."""

from __future__ import annotations

from pathlib import Path

import judge_double
import pytest
from score_helpers import build


@pytest.fixture(scope="session")
def locomo_sample(tmp_path_factory) -> Path:
    return build("locomo", tmp_path_factory.mktemp("score") / "locomo")


@pytest.fixture(scope="session")
def gigamemory_sample(tmp_path_factory) -> Path:
    return build("gigamemory", tmp_path_factory.mktemp("score") / "gigamemory")


@pytest.fixture
def judge():
    """The judge double serving on 127.0.0.1 (its base URL in ``.url``)."""
    double = judge_double.JudgeDouble()
    server, double.url = judge_double.start(double)
    yield double
    server.shutdown()
    server.server_close()
