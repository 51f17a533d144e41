"""A pytest plugin (``-p fixture_capture``) that copies every JSON Lines file a test left in its ``tmp_path``
into ``$CONVHUB_FIXTURE_CAPTURE``: the fixtures the MNBVC tests write, for the columnar conversion's
equivalence test to read each (no test module imports another)."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    folder = item.funcargs.get("tmp_path") if hasattr(item, "funcargs") else None
    target = os.environ.get("CONVHUB_FIXTURE_CAPTURE")
    if folder is not None and target:
        prefix = hashlib.sha256(item.nodeid.encode()).hexdigest()[:12]
        for path in sorted(Path(folder).rglob("*.jsonl*")):
            if path.is_file() and path.name.endswith((".jsonl", ".jsonl.gz")):
                relative = "--".join(path.relative_to(folder).parts)
                shutil.copyfile(path, Path(target) / f"{prefix}--{relative}")
    yield
