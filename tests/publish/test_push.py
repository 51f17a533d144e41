"""``convhub push`` end to end: the real huggingface_hub upload and the real ``load_dataset`` through a Hub double.

``tests/conftest.py`` points ``HF_ENDPOINT`` at the double before anything imports ``huggingface_hub`` (so every
client takes its ordinary, unpatched code path), and the ``hub`` fixture hands each test a clean double.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import datasets
import pytest
from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError

from convhub import registry
from convhub.build import build_source
from convhub.cli.main import main
from convhub.engine.writers.output_shards import shard_path
from convhub.publish.push import MANIFEST, PushError, RetryPolicy, looks_managed, push_folder
from convhub.storage.staging import MARKER
from tests.support.hub_double import HUB_TOKEN

REPO = "org/locomo-unified"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def folder(sample_builds, tmp_path) -> Path:
    """A private copy of the LoCoMo sample build (tests may rebuild or edit it)."""
    copy = tmp_path / "locomo-unified"
    shutil.copytree(sample_builds["locomo"].output, copy)
    return copy


def pushed_files(folder: Path) -> set[str]:
    return {path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file()} - {MARKER}


def built_configs(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir() if path.is_dir())


@pytest.mark.slow
def test_a_card_built_for_one_repo_is_pushed_naming_the_repo_it_goes_to(hub, tmp_path):
    output = tmp_path / "built"
    build_source("gigamemory", output, data_dir=registry.get("gigamemory").sample_dir(), repo_id="me/giga")
    built_card = (output / "README.md").read_text(encoding="utf-8")
    assert 'load_dataset("me/giga", "turns")' in built_card and "ORG/" not in built_card
    push_folder(output, REPO)
    pushed = hub.repo(REPO).commits_on("main")[-1].files["README.md"].content.decode()
    assert 'load_dataset("me/giga"' not in pushed and f'load_dataset("{REPO}", "turns")' in pushed
    assert (output / "README.md").read_text(encoding="utf-8") == built_card  # the folder's own card unchanged
    assert push_folder(output, REPO).created_commit is False  # the same card again: nothing to commit


@pytest.mark.slow
def test_push_makes_one_commit_that_loads_back_row_for_row(hub, folder):
    result = push_folder(folder, REPO)

    repo = hub.repo(REPO)
    history = repo.commits_on("main")
    assert [commit.message for commit in history[:1]] == ["initial commit"]
    assert len(history) == 2 and history[-1].sha == result.commit and result.created_commit
    assert set(history[-1].files) == pushed_files(folder) | {".gitattributes", MANIFEST}
    published = json.loads(history[-1].files[MANIFEST].content)["files"]
    assert list(published) == sorted(pushed_files(folder) | {MANIFEST})
    assert len(hub.calls("commit")) == 1
    for path in pushed_files(folder) - {"README.md"}:
        assert history[-1].files[path].content == (folder / path).read_bytes(), path
    local_card = (folder / "README.md").read_text(encoding="utf-8")
    remote_card = history[-1].files["README.md"].content.decode()
    assert f'load_dataset("{REPO}", "turns")' in remote_card and "ORG/locomo-unified" not in remote_card
    assert remote_card == local_card.replace("ORG/locomo-unified", REPO)  # only the repo id changed
    for config in built_configs(folder):
        remote = datasets.load_dataset(REPO, config)
        local = datasets.load_dataset("parquet", data_dir=str(folder / config))
        assert list(remote) == list(local), config
        for split in remote:
            assert remote[split].features == local[split].features, (config, split)
            assert remote[split].to_list() == local[split].to_list(), (config, split)
    assert set(result.verified) == set(built_configs(folder))
    assert result.verified["turns"] == {"test": sum(1 for _ in local_rows(folder, "turns"))}


def local_rows(folder: Path, config: str):
    return datasets.load_dataset("parquet", data_dir=str(folder / config), split="test")


@pytest.mark.slow
def test_a_folder_at_a_url_is_pushed_as_the_same_folder_would_be_locally(hub, bucket, folder, capsys):
    """A build Spark wrote to HDFS or S3 (here the tests' S3 server): its files are read there, and those
    the plan uploads are copied to a local temporary folder first."""
    remote = bucket / "locomo-unified"
    remote.fs.put(str(folder), remote.path, recursive=True)
    result = push_folder(str(remote), REPO)
    pushed = hub.repo(REPO).commits_on("main")[-1].files
    assert set(pushed) == pushed_files(folder) | {".gitattributes", MANIFEST}
    for path in pushed_files(folder) - {"README.md"}:
        assert pushed[path].content == (folder / path).read_bytes(), path
    assert set(result.verified) == set(built_configs(folder))
    assert main(["push", "locomo", "--folder", str(remote), "--repo-id", REPO]) == 0
    assert f"{REPO}@main: 0 to upload" in capsys.readouterr().out
    assert push_folder(folder, REPO).created_commit is False  # the local folder: the very same files


@pytest.mark.slow
def test_push_again_with_unchanged_data_makes_no_commit(hub, folder):
    first = push_folder(folder, REPO)
    second = push_folder(folder, REPO)

    assert not second.created_commit and second.commit == first.commit
    assert second.plan.uploads == [] and second.plan.deletions == []
    assert len(hub.repo(REPO).commits) == 2
    assert len(hub.calls("commit")) == 1
    assert second.verified == first.verified


@pytest.mark.slow
def test_push_of_fewer_configs_deletes_the_stale_files_in_one_commit(hub, folder, tmp_path):
    push_folder(folder, REPO)
    smaller = tmp_path / "smaller" / "locomo-unified"
    build_source(
        "locomo", smaller, data_dir=registry.get("locomo").sample_dir(), configs=["sessions", "turns"]
    )
    before = len(hub.repo(REPO).commits_on("main"))

    result = push_folder(smaller, REPO)

    history = hub.repo(REPO).commits_on("main")
    assert len(history) == before + 1
    head = history[-1]
    assert set(head.files) == {".gitattributes", MANIFEST, *pushed_files(smaller)}
    kept = ("sessions/", "turns/", "README.md")
    stale = {path for path in pushed_files(folder) if not path.startswith(kept)}
    assert sorted(stale) == result.plan.deletions
    assert "README.md" in result.plan.uploads  # the card lists two configs now
    assert [path for path in result.plan.uploads if path.endswith(".parquet")] == []  # same shards: kept
    assert set(result.verified) == {"sessions", "turns"}
    with pytest.raises(ValueError):
        datasets.load_dataset(REPO, "events")  # the card no longer offers it


@pytest.mark.slow
def test_push_deletes_only_what_convhub_published_never_a_hand_uploaded_shard(hub, folder, tmp_path):
    push_folder(folder, REPO, verify=False)
    api = HfApi()
    by_hand = {"NOTES.txt": b"by hand\n", "events/test-00001-of-00002.parquet": b"my own shard\n"}
    for path, content in by_hand.items():
        api.upload_file(path_or_fileobj=content, path_in_repo=path, repo_id=REPO, repo_type="dataset")
    smaller = tmp_path / "smaller" / "locomo-unified"
    build_source("locomo", smaller, data_dir=registry.get("locomo").sample_dir(), configs=["sessions"])

    result = push_folder(smaller, REPO, verify=False)

    published_before = pushed_files(folder)
    assert result.plan.deletions == sorted(published_before - pushed_files(smaller))
    head = hub.repo(REPO).head("main")
    assert {path: head.files[path].content for path in by_hand} == by_hand
    assert set(head.files) == {".gitattributes", MANIFEST, *by_hand, *pushed_files(smaller)}


def test_a_repo_without_convhubs_list_gets_no_deletion_and_a_warning(hub, folder, tmp_path, caplog):
    """A repo pushed by hand or by an older convhub: nothing tells convhub's files from the user's."""
    push_folder(folder, REPO, verify=False)
    HfApi().delete_file(MANIFEST, repo_id=REPO, repo_type="dataset")
    smaller = tmp_path / "smaller" / "locomo-unified"
    build_source("locomo", smaller, data_dir=registry.get("locomo").sample_dir(), configs=["sessions"])

    with caplog.at_level(logging.WARNING, logger="convhub.publish.push"):
        result = push_folder(smaller, REPO, verify=False)

    stale = sorted(pushed_files(folder) - pushed_files(smaller))
    assert result.plan.deletions == [] and result.plan.left_in_place == stale
    head = hub.repo(REPO).head("main")
    assert set(head.files) == {".gitattributes", MANIFEST, *pushed_files(folder)}
    [warning] = [w for w in result.warnings if MANIFEST in w]
    assert all(path in warning for path in stale) and warning in caplog.text
    again = push_folder(smaller, REPO, verify=False)  # the list is there now, but it never named those files
    assert again.plan.deletions == [] and not again.created_commit


def test_push_knows_every_shard_a_build_writes_by_its_path_and_no_other_file(sample_builds):
    """The layout ``shards.shard_path`` writes is the one ``push`` recognizes as its own (one pattern, beside it)."""
    built = [
        path.relative_to(build.output).as_posix()
        for build in sample_builds.values()
        for path in build.output.rglob("*.parquet")
    ]
    assert any(path.count("/") == 2 for path in built)  # a subset's own folder (<config>/<subset>/<split>-…)
    assert all(looks_managed(path) for path in built)
    assert looks_managed(shard_path("turns/toyhotel", "validation", 3, 12))
    hand_made = [
        "turns/train.parquet",
        "notes/extra/deep/train-00000-of-00001.parquet",
        "train-00000-of-00001.parquet",
    ]
    assert not any(looks_managed(path) for path in hand_made)


def test_dry_run_lists_uploads_and_changes_nothing(hub, folder, capsys):
    assert main(["push", "locomo", "--repo-id", REPO, "--folder", str(folder), "--dry-run"]) == 0

    out = capsys.readouterr().out
    assert f"{REPO}: does not exist; would be created" in out
    for path in pushed_files(folder):
        assert f"would upload  {path}" in out
    assert hub.repos == {}
    assert {call.method for call in hub.calls()} <= {"GET", "HEAD"}
    assert hub.calls("create_repo") == [] and hub.calls("commit") == [] and hub.calls("lfs_upload") == []


def test_dry_run_lists_deletions_against_an_existing_repo(hub, folder, tmp_path, capsys):
    push_folder(folder, REPO, verify=False)
    smaller = tmp_path / "smaller"
    build_source("locomo", smaller, data_dir=registry.get("locomo").sample_dir(), configs=["sessions"])
    commits = len(hub.repo(REPO).commits)

    result = push_folder(smaller, REPO, dry_run=True)

    assert sorted(result.plan.uploads) == [MANIFEST, "README.md"]
    assert result.plan.deletions == sorted(
        p for p in pushed_files(folder) if not p.startswith(("sessions/", "README"))
    )
    assert len(hub.repo(REPO).commits) == commits and result.commit is None


def test_private_makes_a_private_repo_that_needs_the_token(hub, folder):
    result = push_folder(folder, REPO, private=True)

    assert hub.repo(REPO).private
    with pytest.raises(HfHubHTTPError):
        HfApi(token=False).repo_info(REPO, repo_type="dataset")
    assert HfApi().repo_info(REPO, repo_type="dataset").private is True
    assert set(result.verified) == set(built_configs(folder))  # loaded back with the token


@pytest.mark.slow
def test_revision_pushes_to_a_new_branch_and_leaves_main_alone(hub, folder):
    result = push_folder(folder, REPO, revision="convhub-v1")

    repo = hub.repo(REPO)
    assert repo.refs["convhub-v1"] == result.commit
    assert set(repo.head("main").files) == {".gitattributes"}
    assert [call.path for call in hub.calls("create_branch")] == [f"/api/datasets/{REPO}/branch/convhub-v1"]
    assert hub.calls("commit")[0].path == f"/api/datasets/{REPO}/commit/convhub-v1"
    assert set(datasets.load_dataset(REPO, "qa", revision="convhub-v1")) == {"test"}


@pytest.mark.slow
def test_create_pr_opens_a_pull_request_and_leaves_main_alone(hub, folder):
    result = push_folder(folder, REPO, create_pr=True)

    repo = hub.repo(REPO)
    assert hub.calls("commit")[0].query == {"create_pr": ["1"]}
    assert result.pr_url.endswith(f"/datasets/{REPO}/discussions/1")
    assert repo.refs["refs/pr/1"] == result.commit
    assert set(repo.head("main").files) == {".gitattributes"}
    assert set(result.verified) == set(built_configs(folder))  # verified at the pull request's commit


def test_a_concurrent_commit_fails_the_push_instead_of_mixing_builds(hub, folder, monkeypatch):
    """The commit names the head the plan compared against; the double answers 412 when that moved."""
    import convhub.publish.push as push

    push_folder(folder, REPO, verify=False)
    (folder / "README.md").write_text(
        (folder / "README.md").read_text() + "\nedited by the concurrent-commit test\n"
    )
    real_plan = push.plan_push

    def plan_then_someone_commits(local, remote, published=None):
        HfApi().upload_file(path_or_fileobj=b"x", path_in_repo="other.txt", repo_id=REPO, repo_type="dataset")
        return real_plan(local, remote, published)

    monkeypatch.setattr(push, "plan_push", plan_then_someone_commits)
    with pytest.raises(PushError, match="someone else committed") as raised:
        push_folder(folder, REPO, verify=False)
    assert raised.value.kind == "conflict" and raised.value.status == 412
    assert len(hub.calls("commit")) == 3  # ours, the other's, ours again: not retried
    assert (
        "edited by the concurrent-commit test"
        not in hub.repo(REPO).head("main").files["README.md"].content.decode()
    )


@pytest.mark.slow
def test_token_never_leaks(hub, folder, capsys, caplog, monkeypatch):
    caplog.set_level(logging.DEBUG)
    monkeypatch.delenv("HF_TOKEN")  # only --token gives it
    assert main(["push", "locomo", "--repo-id", REPO, "--folder", str(folder), "--token", HUB_TOKEN]) == 0
    assert main(["push", "locomo", "--repo-id", REPO, "--folder", str(folder), "--dry-run"]) == 0

    captured = capsys.readouterr()
    assert hub.calls("commit") and all(call.authorized for call in hub.calls("commit"))
    assert HUB_TOKEN not in captured.out + captured.err
    assert not [record for record in caplog.records if HUB_TOKEN in record.getMessage()]
    for commit in hub.repo(REPO).commits:
        assert all(HUB_TOKEN.encode() not in stored.content for stored in commit.files.values())
    assert all(HUB_TOKEN not in str(call) for call in hub.calls())


def test_push_without_a_token_is_refused_before_anything_is_written(hub, folder, monkeypatch):
    monkeypatch.delenv("HF_TOKEN")
    with pytest.raises(PushError, match="no Hugging Face token"):
        push_folder(folder, REPO)
    assert hub.repos == {}


def test_non_commercial_license_is_warned_about(hub, folder, caplog, capsys):
    assert main(["push", "locomo", "--repo-id", REPO, "--folder", str(folder), "--dry-run"]) == 0
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert any("cc-by-nc-4.0 is non-commercial" in message for message in warnings)


def test_push_refuses_a_folder_built_from_another_source(hub, folder, capsys):
    card = folder / "README.md"
    card.write_text(card.read_text().replace("- locomo\n", "- something-else\n", 1))
    assert main(["push", "locomo", "--repo-id", REPO, "--folder", str(folder)]) == 1
    assert capsys.readouterr().err.startswith(f"convhub push: error: {folder} was not built from locomo")


@pytest.mark.slow
def test_a_failed_commit_leaves_the_repo_untouched_and_the_next_push_lands(hub, folder):
    waits = []
    hub.fail_next("commit", times=4, status=500)
    with pytest.raises(PushError, match="kept failing on the commit") as raised:
        push_folder(folder, REPO, retry=RetryPolicy(sleep=waits.append))
    assert raised.value.status == 500 and waits == [1, 2, 4]
    assert len(hub.repo(REPO).commits) == 1  # only the repo's initial commit
    uploaded = len(hub.calls("lfs_upload"))

    result = push_folder(folder, REPO)

    assert result.created_commit and len(hub.repo(REPO).commits_on("main")) == 2
    assert [call.status for call in hub.calls("commit")] == [500] * 4 + [200]
    assert len(hub.calls("lfs_upload")) == uploaded  # the Hub kept the objects: not sent twice


@pytest.mark.slow
def test_a_dropped_lfs_upload_is_retried_by_the_client(hub, folder):
    hub.fail_next("lfs_upload", drop=True)

    result = push_folder(folder, REPO, verify=False)

    uploads = hub.calls("lfs_upload")
    parquet = [path for path in result.plan.uploads if path.endswith(".parquet")]
    # -1: the double closed that connection without an answer; the client sent the same object again
    assert sorted(call.status for call in uploads) == [-1] + [200] * len(parquet)
    dropped = next(call.path for call in uploads if call.status == -1)
    assert [call.status for call in uploads if call.path == dropped] == [-1, 200]
    assert len(hub.repo(REPO).commits_on("main")) == 2


@pytest.mark.slow
def test_the_push_script_reads_hf_endpoint_from_the_environment(hub, folder):
    """The user's path: a fresh process that finds HF_ENDPOINT and HF_TOKEN in its environment."""
    environment = {**os.environ, "HF_TOKEN": HUB_TOKEN, "PYTHONPATH": str(ROOT)}
    command = [
        sys.executable,
        str(ROOT / "scripts" / "push.py"),
        "locomo",
        "--repo-id",
        REPO,
        "--folder",
        str(folder),
    ]
    finished = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=120)

    assert finished.returncode == 0, finished.stderr
    assert "verified turns" in finished.stdout
    assert "cc-by-nc-4.0 is non-commercial" in finished.stderr
    assert HUB_TOKEN not in finished.stdout + finished.stderr
    assert len(hub.repo(REPO).commits_on("main")) == 2


def test_a_card_whose_row_counts_disagree_with_its_parquet_is_refused_before_any_commit(hub, folder, capsys):
    card = folder / "README.md"
    text = card.read_text()
    qa = text.index("config_name: qa\n  features:")
    rows = text.index("num_examples: ", qa)
    card.write_text(text[:rows] + "num_examples: 999" + text[text.index("\n", rows) :])

    assert main(["push", "locomo", "--repo-id", REPO, "--folder", str(folder)]) == 1

    err = capsys.readouterr().err
    assert "config qa split test: the card says 999 rows, its 1 Parquet file holds 13" in err
    assert len(err.strip().splitlines()) == 1
    assert hub.repos == {} and hub.calls("commit") == []


def test_a_load_back_failure_after_the_commit_says_which_commit_landed(hub, folder, monkeypatch, capsys):
    import convhub.publish.push as push

    monkeypatch.setattr(push, "_load_back", lambda *args: {"test": 0})

    assert main(["push", "locomo", "--repo-id", REPO, "--folder", str(folder)]) == 1

    head = hub.repo(REPO).head("main")
    err = capsys.readouterr().err
    assert f"the commit landed ({head.sha}, " in err and "loaded {'test': 0}" in err
    assert len(hub.repo(REPO).commits) == 2


@pytest.mark.slow
def test_a_hub_error_is_reported_on_stderr_with_exit_status_1(hub, folder, capsys, monkeypatch):
    import convhub.publish.push as push

    waits = []
    monkeypatch.setattr(push, "DEFAULT_RETRY", RetryPolicy(sleep=waits.append))
    hub.fail_next("commit", times=4, status=500)

    assert main(["push", "locomo", "--repo-id", REPO, "--folder", str(folder)]) == 1
    assert waits == [1, 2, 4]  # the command retried through the policy patched in (else it would sleep them)

    err = capsys.readouterr().err
    assert err.startswith(f"convhub push: error: {REPO}@main: the Hub kept failing on the commit")
    assert "(500 Internal Server Error: injected fault) after 4 attempts" in err  # the Hub's own message
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_push_of_fewer_subsets_deletes_the_stale_subset_shards(hub, tmp_path):
    """Per-subset shards (``<config>/<subset>/<split>-…``) are the build's too: a narrower build deletes them."""
    sample = registry.get("convlab").sample_dir()
    both = build_source("convlab", tmp_path / "both" / "convlab-unified", data_dir=sample)
    subsets = sorted({subset for built in both.configs.values() for subset in built.subsets})
    assert len(subsets) >= 2
    push_folder(both.output, "org/convlab-unified")
    one = build_source("convlab", tmp_path / "one" / "convlab-unified", data_dir=sample, subsets=subsets[:1])

    result = push_folder(one.output, "org/convlab-unified")

    head = hub.repo("org/convlab-unified").commits_on("main")[-1]
    assert set(head.files) == {".gitattributes", MANIFEST, *pushed_files(one.output)}
    dropped = [path for path in result.plan.deletions if f"/{subsets[1]}/" in path]
    assert dropped and all(path.endswith(".parquet") for path in dropped)


# -- licenses ------------------------------------------------------------------------------------------------
def card_with_license(folder: Path, line: str | None) -> None:
    card = folder / "README.md"
    text = card.read_text()
    start = text.index("\nlicense:") + 1
    end = text.index("\n", start) + 1
    card.write_text(text[:start] + (f"{line}\n" if line else "") + text[end:])


@pytest.mark.parametrize("line", [None, "license: ''", "license: none", "license: []"])
def test_a_card_without_a_license_is_refused_before_anything_is_sent(hub, folder, line, capsys):
    card_with_license(folder, line)

    assert main(["push", "locomo", "--repo-id", REPO, "--folder", str(folder)]) == 1
    assert main(["push", "locomo", "--repo-id", REPO, "--folder", str(folder), "--dry-run"]) == 1

    err = capsys.readouterr().err
    assert "convhub push: error: the card names no license: set `license:` in its YAML" in err
    assert hub.calls() == [] and hub.repos == {}
    with pytest.raises(PushError) as raised:
        push_folder(folder, REPO)
    assert raised.value.kind == "license"


def test_an_unknown_license_is_pushed_with_a_warning(hub, folder, caplog):
    card_with_license(folder, "license: unknown")

    result = push_folder(folder, REPO, verify=False)

    assert result.created_commit
    assert result.warnings == ["license unknown: users must check the source's terms before using the data"]
    assert any("license unknown" in record.getMessage() for record in caplog.records)


def test_a_non_commercial_license_is_pushed_with_a_warning(hub, folder):
    result = push_folder(folder, REPO, verify=False)

    assert result.created_commit
    assert result.warnings == [
        "license cc-by-nc-4.0 is non-commercial: the dataset may not be used for commercial purposes"
    ]
