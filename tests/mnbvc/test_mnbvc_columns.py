"""MNBVC's 多轮对话 keyed on columns (``MnbvcBuilder.keyed_batches``, ``multiturn_columns``) equals the reference
(``keyed_columns.python_batch`` of ``keyed_rows``) row for row on every fixture the MNBVC tests write, the
built-in sample and a synthetic input: each row either the reference's with its values (converted on columns) or
the reference's without them (left to Python), rejections and errors the same."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from keyed_equivalence import compare_file, paths_taken, shard_of

from builders.mnbvc.builder import MnbvcBuilder

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import mnbvc_synthetic  # noqa: E402

HERE = Path(__file__).resolve().parent
#: The MNBVC test modules whose fixtures are captured (not this one's, nor the slow memory test's).
OWN = ("test_mnbvc_columns",)


def test_every_fixture_the_mnbvc_tests_write(tmp_path):
    """The MNBVC tests run with ``fixture_capture``; each JSON Lines file they left is compared."""
    captured = tmp_path / "captured"
    captured.mkdir()
    modules = sorted(p.name for p in HERE.glob("test_mnbvc_*.py") if not p.stem.startswith(OWN))
    environment = dict(os.environ, CONVHUB_FIXTURE_CAPTURE=str(captured))
    environment["PYTHONPATH"] = os.pathsep.join([str(HERE), str(ROOT), environment.get("PYTHONPATH", "")])
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "fixture_capture"]
    command += ["-k", "not many_tiny_turns", *(str(HERE / name) for name in modules)]
    finished = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True)
    assert finished.returncode == 0, finished.stdout[-3000:]
    files = sorted(captured.iterdir())
    assert len(files) > 40
    taken = Counter()
    for path in files:
        shard = shard_of([path])
        for _, route in compare_file(shard, 0)[0]:
            taken[route] += 1
    assert taken["values"] > 100 and taken["payload"] > 50


def test_the_built_in_sample():
    paths = sorted(Path(MnbvcBuilder.sample_dir(), "multiturn").glob("*.jsonl*"))
    assert len(paths) == 2 and any(path.name.endswith(".gz") for path in paths)
    taken = Counter(paths_taken(paths))
    assert taken["values"] > 0 and taken["payload"] > 0


@pytest.mark.parametrize("gzip", [False, True], ids=["plain", "gzip"])
def test_a_synthetic_input(tmp_path, gzip):
    made = mnbvc_synthetic.generate(tmp_path, 2, 2, gzip, 0)
    paths = sorted(tmp_path.glob("multiturn-*"))
    taken = Counter(paths_taken(paths))
    assert sum(taken.values()) == made["rows"]
    # the unquoted and empty-会话 扩展字段 of the generator (about 15% of conversations) are Python's
    assert 0.7 < taken["values"] / made["rows"] < 0.95
