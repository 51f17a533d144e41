"""What convhub published (``.convhub/published.json``) and what a later push may delete, through the Hub double.

A push deletes a file the new build no longer has only when convhub published it and the Hub still holds the
content convhub published; a file replaced by hand at such a path is refused by name, an older manifest without
digests deletes nothing, and a manifest on the Hub that is not convhub's shape is one line naming it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from huggingface_hub import HfApi

from convhub import registry
from convhub.build import build_source
from convhub.cli.main import main
from convhub.publish.local_files import file_digests
from convhub.publish.push import MANIFEST, PushError, push_folder

REPO = "org/locomo-unified"
HAND_MADE = b"a shard I made by hand\n"


@pytest.fixture
def folder(sample_builds, tmp_path) -> Path:
    copy = tmp_path / "locomo-unified"
    shutil.copytree(sample_builds["locomo"].output, copy)
    return copy


@pytest.fixture
def without_observations(tmp_path) -> Path:
    """The same source built without the ``observations`` config."""
    output = tmp_path / "smaller" / "locomo-unified"
    configs = [c.name for c in registry.get("locomo").BUILDER_CONFIGS if c.name != "observations"]
    build_source("locomo", output, data_dir=registry.get("locomo").sample_dir(), configs=configs)
    return output


def observation_shards(folder: Path) -> list[str]:
    return sorted(
        path.relative_to(folder).as_posix() for path in (folder / "observations").rglob("*.parquet")
    )


def put(path: str, content: bytes) -> None:
    HfApi().upload_file(path_or_fileobj=content, path_in_repo=path, repo_id=REPO, repo_type="dataset")


def test_the_manifest_records_the_digests_of_each_published_file(hub, folder):
    push_folder(folder, REPO, verify=False)

    stored = hub.repo(REPO).head("main").files
    files = json.loads(stored[MANIFEST].content)["files"]
    assert files.pop(MANIFEST) is None
    assert set(files) == set(stored) - {".gitattributes", MANIFEST}
    for path, digests in files.items():
        local = folder / path if path != "README.md" else None
        if local is not None:
            assert (digests["sha256"], digests["git_sha1"]) == file_digests(local)
        assert (
            digests["sha256"] == stored[path].sha256
        )  # what the Hub holds (the card is retargeted: its copy)


def test_a_file_replaced_by_hand_at_a_published_path_is_not_deleted(
    hub, folder, without_observations, capsys
):
    push_folder(folder, REPO, verify=False)
    [shard, *_] = observation_shards(folder)
    put(shard, HAND_MADE)
    head = hub.repo(REPO).head("main")

    code = main(["push", "locomo", "--repo-id", REPO, "--folder", str(without_observations)])

    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1
    assert err.startswith(f"convhub push: error: {REPO}@main: convhub will not delete {shard}: ")
    assert "Traceback" not in err
    after = hub.repo(REPO).head("main")
    assert after.sha == head.sha and after.files[shard].content == HAND_MADE


def test_a_file_still_as_convhub_published_it_is_deleted(hub, folder, without_observations):
    push_folder(folder, REPO, verify=False)

    result = push_folder(without_observations, REPO, verify=False)

    shards = observation_shards(folder)
    assert shards and set(shards) <= set(result.plan.deletions)
    assert not set(shards) & set(hub.repo(REPO).head("main").files)


def test_an_older_manifest_without_digests_deletes_nothing_and_warns(hub, folder, without_observations):
    push_folder(folder, REPO, verify=False)
    stored = hub.repo(REPO).head("main").files
    put(MANIFEST, json.dumps({"files": sorted(set(stored) - {".gitattributes"})}).encode())

    result = push_folder(without_observations, REPO, verify=False)

    shards = observation_shards(folder)
    assert result.plan.deletions == [] and set(shards) <= set(result.plan.unverified)
    assert set(shards) <= set(hub.repo(REPO).head("main").files)
    [warning] = [w for w in result.warnings if "older convhub" in w]
    assert all(shard in warning for shard in shards)


@pytest.mark.slow
@pytest.mark.parametrize(
    "content, what",
    [
        (b'{"files": [["x"]]}', "files[0] is a JSON array, not a path"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (
            b'{"files": {"a.parquet": {"sha256": "x"}}}',
            "files['a.parquet'].sha256 is not 64 lowercase hex digits",
        ),
        (b'{"files": {"a.parquet": 3}}', "files['a.parquet'] is a JSON int, not an object of digests"),
        (b'{"files": 7}', '"files" is a JSON int, not an object of paths'),
        (b'["files"]', 'expected a JSON object with "files"'),
        (b"\xff\xfe", "not valid UTF-8"),
        (b"{", "not valid JSON"),
    ],
)
def test_a_hostile_manifest_on_the_hub_is_one_line_naming_it(hub, folder, content, what, capsys):
    push_folder(folder, REPO, verify=False)
    put(MANIFEST, content)
    head = hub.repo(REPO).head("main").sha

    code = main(["push", "locomo", "--repo-id", REPO, "--folder", str(folder), "--dry-run"])

    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"convhub push: error: {REPO}@main: {MANIFEST} on the Hub is not convhub's list")
    assert what in err
    assert hub.repo(REPO).head("main").sha == head


def test_a_hostile_manifest_raises_push_error_from_the_api(hub, folder):
    push_folder(folder, REPO, verify=False)
    put(MANIFEST, b'{"files": [["x"]]}')

    with pytest.raises(PushError, match=r"files\[0\] is a JSON array"):
        push_folder(folder, REPO, verify=False)


def test_a_push_reads_each_local_file_once_for_its_digests(hub, folder, monkeypatch):
    """A second push of the same build asks for each file's digests twice (is the Hub's copy unchanged? what goes
    in the manifest?): each file is read once; a file written since is read again."""
    from convhub.publish import local_files

    push_folder(folder, REPO, verify=False)
    local_files._local_digests.cache_clear()
    read, reading = [], local_files._read_digests
    monkeypatch.setattr(
        local_files, "_read_digests", lambda path, size: read.append(path) or reading(path, size)
    )
    result = push_folder(folder, REPO, verify=False)
    assert not result.plan.changes  # nothing to upload: every file was compared, and none changed
    shards = sorted(path for path in folder.rglob("*.parquet"))
    assert sorted(path for path in read if path.suffix == ".parquet") == shards  # once each
    shard = shards[0]
    before = file_digests(shard)
    shard.write_bytes(shard.read_bytes()[::-1])  # same size, new content and time
    assert file_digests(shard) != before and read.count(shard) == 2
