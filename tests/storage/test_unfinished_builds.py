"""A build whose run stopped while writing it (an object store's first build is written in place, a rebuild's
objects copied in one by one) holds ``.convhub-writing``: ``export``, ``push``, ``mix`` and ``score --data`` each
refuse it in one line saying the build was never finished and how to redo it, rather than read part of a build
as a whole one. Each command runs as a real ``convhub`` process (``tests/support/running_commands.py``)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from convhub.export.exporter import ExportError, open_build
from convhub.storage.abandoned import owner_record
from convhub.storage.staging import WRITING, unfinished_build
from tests.support.running_commands import command_env


def _dead_run_record() -> dict:
    """The owner record of a convhub run that has ended (a process of this host, gone)."""
    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    return owner_record(int(ended.stdout))


@pytest.fixture
def unfinished(sample_builds, tmp_path) -> Path:
    """A copy of the LoCoMo sample build that a killed run left holding ``.convhub-writing``."""
    folder = tmp_path / "locomo-unified"
    shutil.copytree(sample_builds["locomo"].output, folder)
    (folder / WRITING).write_text(json.dumps(_dead_run_record()), encoding="utf-8")
    return folder


def _convhub(tmp_path: Path, *args: str) -> tuple[int, str]:
    """``convhub ARGS`` as a process in ``tmp_path``, a Hub that does not answer (nothing may reach it): its
    exit status and stderr."""
    env = command_env(HF_ENDPOINT="http://127.0.0.1:9", HF_HUB_OFFLINE="0", HF_TOKEN="hf_unused")
    done = subprocess.run(
        [sys.executable, "-m", "convhub.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    return done.returncode, done.stderr


def _refused_as_unfinished(status: int, err: str, command: str, folder: str) -> None:
    assert status == 1, err
    assert "Traceback" not in err
    [line] = err.strip().splitlines()
    assert line.startswith(f"convhub {command}: error: ")
    assert f"{folder} holds a build that was never finished" in line
    assert f"build it again with `convhub build SOURCE --output {folder}`" in line


@pytest.mark.slow
def test_export_refuses_an_unfinished_build(unfinished, tmp_path):
    status, err = _convhub(tmp_path, "export", "locomo", "--from", str(unfinished), "--output", "again")
    _refused_as_unfinished(status, err, "export", str(unfinished))
    assert not (tmp_path / "again").exists()


@pytest.mark.slow
def test_push_refuses_an_unfinished_build(unfinished, tmp_path):
    status, err = _convhub(
        tmp_path, "push", "locomo", "--repo-id", "org/locomo", "--folder", str(unfinished), "--dry-run"
    )
    _refused_as_unfinished(status, err, "push", str(unfinished))


@pytest.mark.slow
def test_mix_refuses_an_unfinished_build(unfinished, tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        f"name: m\nconfig: messages\nsplit: test\nsources:\n  - name: locomo\n    path: {unfinished}\n",
        encoding="utf-8",
    )
    status, err = _convhub(tmp_path, "mix", str(recipe), "--output", "mixed")
    _refused_as_unfinished(status, err, "mix", str(unfinished))
    assert "sources[0].path" in err
    assert not (tmp_path / "mixed").exists()


@pytest.mark.slow
def test_score_refuses_an_unfinished_build(unfinished, tmp_path):
    predictions = tmp_path / "answers.jsonl"
    predictions.write_text('{"question_id": "q", "prediction": "p"}\n', encoding="utf-8")
    status, err = _convhub(
        tmp_path,
        "score",
        "locomo",
        "--data",
        str(unfinished),
        "--predictions",
        str(predictions),
        "--output",
        "r.json",
    )
    _refused_as_unfinished(status, err, "score", str(unfinished))
    assert not (tmp_path / "r.json").exists()


def test_a_build_its_run_still_writes_is_named_as_such(unfinished):
    (unfinished / WRITING).write_text(json.dumps(owner_record()), encoding="utf-8")  # this process: running
    with pytest.raises(ExportError, match=r"is still being written by a convhub run \(pid \d+\)"):
        open_build(unfinished)


def test_a_build_a_run_of_another_host_holds_is_named_with_that_host(unfinished):
    """The build refuses to write beside such a run (``_check_not_being_written``); a reader names it too, not
    "never finished", which its own host alone can tell."""
    record = {**_dead_run_record(), "host": "worker-7.cluster.example"}
    (unfinished / WRITING).write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(ExportError) as refused:
        open_build(unfinished)
    line = str(refused.value)
    assert (
        f"is being written by a convhub run on another host (pid {record['pid']} on worker-7.cluster.example)"
        in line
    )
    assert f"build it again with `convhub build SOURCE --output {unfinished}`" in line


def test_a_finished_build_is_read(sample_builds):
    assert unfinished_build(sample_builds["locomo"].output) is None
    assert "qa" in open_build(sample_builds["locomo"].output).configs()


def test_export_refuses_an_unfinished_build_on_the_object_store(unfinished, bucket, tmp_path):
    """A first build on S3 killed part-way: its objects under the prefix, ``.convhub-writing`` among them."""
    remote = bucket / "locomo-unified"
    remote.fs.put(str(unfinished), remote.path, recursive=True)
    assert (remote / WRITING).exists()
    url = str(remote)
    status, err = _convhub(tmp_path, "export", "locomo", "--from", url, "--output", "again")
    _refused_as_unfinished(status, err, "export", url)
    assert not (tmp_path / "again").exists()
