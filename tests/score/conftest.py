"""Fixtures of ``convhub score``'s tests: sample builds made once, and the judge double on 127.0.0.1."""

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
    double = judge_double.JudgeDouble()
    server, url = judge_double.start(double)
    double.url = url
    yield double
    server.shutdown()
    server.server_close()
