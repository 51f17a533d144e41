"""Builds on an object store for real: S3's own API (moto's server mode on 127.0.0.1,
``tests/support/s3_server.py``) reached through s3fs, every step through convhub's command line.

S3 has no folders (a "folder" is the objects under a common prefix) and no rename (a "move" copies each object
and deletes it), so what "moving the build into place" means there is tested here, not on a stand-in: a first
build, a rebuild, a failed rebuild (the earlier build intact, nothing left beside it), a killed run's staging
removed by the next build, a source read at ``s3://``, and a build at ``s3://`` pushed to the Hub double and
exported.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from convhub import registry
from convhub.build import build_source
from convhub.cli.main import main
from convhub.storage.staging import MARKER
from tests.support.data_files import tables
from tests.support.hub_double import HUB_TOKEN

LOCOMO_SAMPLE = Path(registry.get("locomo").sample_dir())
REPO = "me/locomo-from-s3"


def s3():
    import s3fs

    fs = s3fs.S3FileSystem()
    fs.invalidate_cache()  # what the store holds now, not what this client listed before
    return fs


def objects(url: str) -> dict[str, bytes]:
    """Every object under ``url``, by its key relative to ``url``."""
    fs, root = s3(), url.removeprefix("s3://").rstrip("/")
    return {path[len(root) + 1 :]: fs.cat_file(path) for path in fs.find(root)}


def names_in(url: str) -> list[str]:
    return sorted(os.path.basename(path.rstrip("/")) for path in s3().ls(url.removeprefix("s3://")))


def upload_sample(bucket: str) -> str:
    """The LoCoMo sample files, uploaded under ``BUCKET/in``: their URL."""
    for path in LOCOMO_SAMPLE.glob("*.json"):
        s3().put(str(path), f"{bucket.removeprefix('s3://')}/in/{path.name}")
    return f"{bucket}/in"


def flags(configs: list[str]) -> list[str]:
    return [flag for name in configs for flag in ("--config", name)]


def one_error_line(capsys) -> str:
    """The run's one error line (the progress lines before it aside), and no traceback."""
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("convhub build: error: ")]
    assert "Traceback" not in err and len(errors) == 1, err
    return errors[0]


@pytest.mark.slow
def test_a_build_from_s3_to_s3_then_rebuilds_replace_it_and_leave_nothing_beside(s3_bucket, tmp_path, capsys):
    data, output = upload_sample(s3_bucket), f"{s3_bucket}/out/lu"
    assert main(["build", "locomo", "--data-dir", data, "--output", output]) == 0
    local = build_source("locomo", tmp_path / "local", str(LOCOMO_SAMPLE))
    first = objects(output)
    assert sorted(first) == sorted(
        path.relative_to(local.output).as_posix() for path in local.output.rglob("*") if path.is_file()
    )
    for key, content in first.items():
        if key.endswith(".parquet"):
            assert pq.read_table(pa.BufferReader(content)).equals(pq.read_table(local.output / key)), key
    assert first["README.md"] == (local.output / "README.md").read_bytes()

    for configs in (["sessions", "turns"], ["qa"]):  # each rebuild: only its own configs are left
        capsys.readouterr()
        assert main(["build", "locomo", "--data-dir", data, "--output", output, *flags(configs)]) == 0, (
            capsys.readouterr().err
        )
        rebuilt = objects(output)
        assert sorted({key.split("/")[0] for key in rebuilt if "/" in key}) == sorted(configs)
        assert {MARKER, "README.md"} <= set(rebuilt)
        assert names_in(f"{s3_bucket}/out") == ["lu"]  # no staging, no old copy beside it
    assert rebuilt["qa/test-00000-of-00001.parquet"] == first["qa/test-00000-of-00001.parquet"]


def test_a_failed_rebuild_on_s3_leaves_the_earlier_build_as_it_was_and_nothing_beside(
    s3_bucket, tmp_path, capsys
):
    output = f"{s3_bucket}/out/lu"
    assert main(["build", "locomo", "--sample", "--config", "sessions", "--output", output]) == 0
    before = objects(output)
    broken = tmp_path / "broken.json"
    broken.write_text('[{"sample_id": "x", "conversation": 3}]', encoding="utf-8")
    capsys.readouterr()
    assert main(["build", "locomo", "--data-dir", str(broken), "--output", output]) == 1
    assert "broken.json, record x, field 'conversation'" in one_error_line(capsys)
    assert objects(output) == before
    assert names_in(f"{s3_bucket}/out") == ["lu"]


def test_a_first_build_on_s3_that_fails_leaves_nothing(s3_bucket, tmp_path, capsys):
    broken = tmp_path / "broken.json"
    broken.write_text('[{"sample_id": "x", "conversation": 3}]', encoding="utf-8")
    assert main(["build", "locomo", "--data-dir", str(broken), "--output", f"{s3_bucket}/out/lu"]) == 1
    one_error_line(capsys)
    assert objects(s3_bucket) == {}


def test_a_rebuild_on_s3_removes_the_staging_a_killed_build_left_and_only_that(s3_bucket, capsys):
    """A build killed with SIGKILL leaves its ``.lu.partial-*`` objects: the next build removes them when their
    owner file names a process of this host that is gone; not another host's, not a folder with no owner file."""
    output, parent = f"{s3_bucket}/out/lu", f"{s3_bucket}/out".removeprefix("s3://")
    assert main(["build", "locomo", "--sample", "--config", "sessions", "--output", output]) == 0
    fs = s3()
    dead = {"kind": "convhub scratch folder", "host": socket.gethostname(), "pid": 2**22 + 1, "started": "x"}
    elsewhere = {**dead, "host": "another-host.invalid"}
    for name, owner in (("deadbeef", dead), ("cafecafe", elsewhere), ("0000mine", None)):
        fs.pipe_file(f"{parent}/.lu.partial-{name}/sessions/part.parquet", b"killed half-way")
        if owner is not None:
            fs.pipe_file(f"{parent}/.lu.partial-{name}.owner", json.dumps(owner).encode())
    assert main(["build", "locomo", "--sample", "--config", "turns", "--output", output]) == 0
    assert names_in(f"{s3_bucket}/out") == [
        ".lu.partial-0000mine",
        ".lu.partial-cafecafe",
        ".lu.partial-cafecafe.owner",
        "lu",
    ]


@pytest.mark.slow
def test_a_build_at_s3_is_pushed_to_the_hub_and_exported_as_the_local_build_is(
    s3_bucket, hub, tmp_path, capsys
):
    output = f"{s3_bucket}/out/lu"
    assert main(["build", "locomo", "--sample", "--output", output]) == 0
    remote = objects(output)
    assert main(["push", "locomo", "--folder", output, "--repo-id", REPO, "--token", HUB_TOKEN]) == 0
    pushed = hub.repo(REPO).commits_on("main")[-1].files
    for key, content in remote.items():
        if key.endswith(".parquet"):
            assert pushed[key].content == content, key
    assert MARKER not in pushed and "README.md" in pushed

    local = build_source("locomo", tmp_path / "local", str(LOCOMO_SAMPLE)).output
    assert main(["export", "locomo", "--from", output, "--output", str(tmp_path / "from-s3")]) == 0
    assert main(["export", "locomo", "--from", str(local), "--output", str(tmp_path / "from-local")]) == 0
    exported = {
        path.relative_to(tmp_path / "from-local").as_posix(): path.read_bytes()
        for path in (tmp_path / "from-local").rglob("*")
        if path.is_file() and path.name != MARKER
    }
    assert exported and all(
        (tmp_path / "from-s3" / relative).read_bytes() == content for relative, content in exported.items()
    )
    assert tables(tmp_path / "local") == {
        key: pq.read_table(pa.BufferReader(content))
        for key, content in remote.items()
        if key.endswith(".parquet")
    }


@pytest.mark.slow
@pytest.mark.parametrize("input_at", ["local", "s3"])
def test_a_first_build_on_s3_in_two_processes_is_the_local_build(input_at, s3_bucket, tmp_path, capsys):
    """A first build on S3 is written in place, its shards read and its views derived by the engine's workers:
    each worker must reach the store with a client of its own (fsspec's S3 client refuses to be used across a
    fork), whether the input is local or on the store too."""
    data = tmp_path / "in"
    data.mkdir()
    samples = json.loads(next(LOCOMO_SAMPLE.glob("*.json")).read_text(encoding="utf-8"))
    for part in range(2):  # two files: two shards, two derive tasks
        (data / f"locomo{part}.json").write_text(json.dumps(samples[part::2] or samples), encoding="utf-8")
    data_dir = str(data)
    if input_at == "s3":
        data_dir = f"{s3_bucket}/in-two"
        s3().put(str(data), data_dir.removeprefix("s3://"), recursive=True)
    output = f"{s3_bucket}/out/two"
    status = main(["build", "locomo", "--data-dir", data_dir, "--output", output, "--num-proc", "2"])
    assert status == 0, capsys.readouterr().err
    local = tmp_path / "local"
    build_source("locomo", local, str(data), num_proc=2)
    built = objects(output)
    parquet = sorted(path.relative_to(local).as_posix() for path in local.rglob("*.parquet"))
    assert sorted(key for key in built if key.endswith(".parquet")) == parquet
    for key in parquet:
        assert pq.read_table(pa.BufferReader(built[key])).equals(pq.read_table(local / key)), key
