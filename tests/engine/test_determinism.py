"""The same input builds to byte-identical files (every Parquet shard and the card), so a second push is a no-op.

The first build is the session's ``sample_builds``; the second is made elsewhere: from a copy of the sample
at another path, in another process with another hash seed (set order), or with the same ``num_proc`` twice.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from convhub import registry
from convhub.build import build_source
from convhub.publish.push import push_folder

ROOT = Path(__file__).resolve().parents[2]
SOURCES = registry.names()


def file_bytes(folder: Path) -> dict[str, bytes]:
    """Every file of a build folder, by its path inside the folder."""
    return {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def assert_identical(first: Path, second: Path) -> None:
    one, two = file_bytes(first), file_bytes(second)
    assert sorted(one) == sorted(two)
    assert "README.md" in one and any(path.endswith(".parquet") for path in one)
    differing = sorted(path for path in one if one[path] != two[path])
    assert differing == [], f"{first.name}: these files differ between two builds of the same input"


@pytest.mark.slow
@pytest.mark.parametrize("source", SOURCES)
def test_a_second_build_from_a_copy_of_the_input_is_byte_identical(source, sample_builds, tmp_path):
    builder_cls = registry.get(source)
    copy = tmp_path / "elsewhere" / "sample"
    shutil.copytree(builder_cls.sample_dir(), copy)

    second = build_source(source, tmp_path / "second" / builder_cls.HUB_NAME, data_dir=str(copy))

    assert_identical(sample_builds[source].output, second.output)


@pytest.mark.slow
def test_a_build_in_another_process_with_another_hash_seed_is_byte_identical(sample_builds, tmp_path):
    seed = "4242" if os.environ.get("PYTHONHASHSEED") != "4242" else "2424"
    environment = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
    command = [
        sys.executable,
        "-m",
        "convhub.cli.main",
        "build",
        "--all",
        "--sample",
        "--output",
        str(tmp_path),
    ]
    finished = subprocess.run(command, capture_output=True, text=True, env=environment, cwd=ROOT, timeout=300)
    assert finished.returncode == 0, finished.stderr

    for source in SOURCES:
        assert_identical(sample_builds[source].output, tmp_path / registry.get(source).HUB_NAME)


@pytest.mark.slow
@pytest.mark.parametrize("source", ["gigamemory", "mnbvc"])
def test_two_builds_with_the_same_num_proc_are_byte_identical(source, tmp_path):
    """Worker processes finish in any order; the shards they write must not depend on it."""
    if source not in SOURCES:
        pytest.skip(f"{source} is not registered")
    sample = registry.get(source).sample_dir()
    first = build_source(source, tmp_path / "first" / "out", data_dir=sample, num_proc=2)
    second = build_source(source, tmp_path / "second" / "out", data_dir=sample, num_proc=2)

    assert sum(len(files) for built in first.configs.values() for files in built.files.values()) > len(
        first.configs
    )
    assert_identical(first.output, second.output)


@pytest.mark.slow
@pytest.mark.parametrize("source", SOURCES)
def test_pushing_a_second_build_of_the_same_input_makes_no_commit(source, hub, sample_builds, tmp_path):
    builder_cls = registry.get(source)
    repo_id = f"org/{builder_cls.HUB_NAME}"
    first = push_folder(sample_builds[source].output, repo_id, verify=False)
    second_build = build_source(source, tmp_path / builder_cls.HUB_NAME, data_dir=builder_cls.sample_dir())
    requests_before = len(hub.calls())

    second = push_folder(second_build.output, repo_id, verify=False)

    assert first.created_commit and not second.created_commit
    assert second.commit == first.commit and second.plan.uploads == [] and second.plan.deletions == []
    assert len(hub.repo(repo_id).commits) == 2  # the repo's initial commit and the first push
    later = hub.calls()[requests_before:]
    assert {call.route for call in later} <= {
        "repo_info",
        "tree",
        "resolve",
        "agent_harnesses",
    }  # read (with the list of what convhub published), compared, done
