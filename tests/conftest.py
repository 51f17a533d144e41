"""Shared fixtures: where the real source files are, and sample builds made once per test session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from builders import registry
from builders.build import build_source

SHARED_DATA = Path(os.environ.get("CONVHUB_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def shared_data(*parts: str) -> Path:
    """A real source file under ../shared/data, or skip the test (with the reason) when it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"real source data not available: {path} is absent (../shared/data is not beside this checkout)")
    return path


@pytest.fixture(scope="session")
def sample_builds(tmp_path_factory) -> dict:
    """Every registered source built from its packaged sample files, once per test session."""
    root = tmp_path_factory.mktemp("sample-builds")
    results = {}
    for name in registry.names():
        builder_cls = registry.get(name)
        results[name] = build_source(name, root / builder_cls.HUB_NAME, data_dir=builder_cls.sample_dir())
    return results
