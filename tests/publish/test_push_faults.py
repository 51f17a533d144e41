"""Publishing faults through the Hub double: each push lands as exactly one commit carrying everything, or fails
with one clear line while the head stays the previous commit with its files unchanged.

Every test pushes a first build (``v1``: two configs) and then the full build (``v2``: new Parquet shards and a
new card) with a fault injected. ``huggingface_hub``'s own retry waits (``http_backoff`` sleeps 1, 2, 4, 8, 8 s)
and convhub's (``RetryPolicy.sleep``) are both recorded instead of slept, which also measures which layer
retried what.
"""

from __future__ import annotations

import logging
import shutil
import types
from pathlib import Path

import pytest
from huggingface_hub import HfApi
from huggingface_hub.utils import _http

import convhub.publish.push as push
from convhub import registry
from convhub.build import build_source
from convhub.cli.main import main
from convhub.publish.push import MANIFEST, PushError, RetryPolicy, push_folder
from convhub.storage.staging import MARKER
from tests.support.hub_double import HUB_TOKEN

REPO = "org/locomo-unified"


@pytest.fixture(scope="module")
def v1(tmp_path_factory) -> Path:
    """The previous build: two configs only."""
    output = tmp_path_factory.mktemp("v1") / "locomo-unified"
    sample = registry.get("locomo").sample_dir()
    build_source("locomo", output, data_dir=sample, configs=["sessions", "turns"], repo_id=REPO)
    return output


@pytest.fixture(scope="module")
def v2_build(tmp_path_factory) -> Path:
    output = tmp_path_factory.mktemp("v2") / "locomo-unified"
    build_source("locomo", output, data_dir=registry.get("locomo").sample_dir(), repo_id=REPO)
    return output


@pytest.fixture
def v2(v2_build, tmp_path) -> Path:
    """The new build: every config (new shards to upload through LFS, a new card), its card written for REPO."""
    copy = tmp_path / "locomo-unified"
    shutil.copytree(v2_build, copy)
    return copy


@pytest.fixture
def client_waits(monkeypatch) -> list[float]:
    """The waits huggingface_hub's ``http_backoff`` asks for, recorded instead of slept."""
    waits: list[float] = []
    monkeypatch.setattr(_http, "time", types.SimpleNamespace(sleep=waits.append))
    return waits


@pytest.fixture
def our_waits() -> list[float]:
    return []


@pytest.fixture
def retry(our_waits) -> RetryPolicy:
    return RetryPolicy(sleep=our_waits.append)


@pytest.fixture
def previous(hub, v1, client_waits):
    """v1 pushed; the test's faults start after it. Returns the head commit v1 made."""
    push_folder(v1, REPO, verify=False)
    head = hub.repo(REPO).head("main")
    hub.requests.clear()
    return head


def files_of(folder: Path) -> dict[str, bytes]:
    return {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in folder.rglob("*")
        if path.is_file() and path.name != MARKER
    }


def assert_untouched(hub, previous) -> None:
    """The head is still the previous commit, its files unchanged, and no other commit was made."""
    repo = hub.repo(REPO)
    assert repo.head("main").sha == previous.sha
    assert {path: stored.content for path, stored in repo.head("main").files.items()} == {
        path: stored.content for path, stored in previous.files.items()
    }
    assert [commit.sha for commit in repo.commits_on("main")][-1] == previous.sha
    assert len(repo.commits) == 2  # the repo's initial commit and v1's


def assert_landed_once(hub, previous, folder: Path, result) -> None:
    """Exactly one new commit, child of the previous one, carrying every file of ``folder``."""
    history = hub.repo(REPO).commits_on("main")
    assert [commit.sha for commit in history[-2:]] == [previous.sha, result.commit]
    assert len(hub.repo(REPO).commits) == 3 and result.created_commit
    head = history[-1]
    assert {
        path: stored.content
        for path, stored in head.files.items()
        if path not in (".gitattributes", MANIFEST)
    } == files_of(folder)


# -- which layer retries what (measured) ---------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("route", ["preupload", "lfs_batch", "lfs_upload", "tree"])
def test_the_client_retries_these_itself_and_convhub_does_not_again(
    hub, previous, v2, route, client_waits, our_waits, retry
):
    hub.fail_next(route, status=503)

    result = push_folder(v2, REPO, verify=False, retry=retry)

    assert_landed_once(hub, previous, v2, result)
    assert [call.status for call in hub.calls(route)][:2] == [503, 200]
    assert client_waits == [1] and our_waits == []  # http_backoff waited once; convhub added nothing


@pytest.mark.slow
@pytest.mark.parametrize("route", ["repo_info", "validate_yaml", "commit"])
def test_convhub_retries_what_the_client_sends_once(hub, previous, v2, route, client_waits, our_waits, retry):
    hub.fail_next(route, status=503)

    result = push_folder(v2, REPO, verify=False, retry=retry)

    assert_landed_once(hub, previous, v2, result)
    assert [call.status for call in hub.calls(route)][:2] == [503, 200]
    assert our_waits == [1] and client_waits == []
    assert len([call for call in hub.calls("commit") if call.status == 200]) == 1


@pytest.mark.parametrize("route", ["create_repo", "create_branch"])
def test_creating_the_repo_or_branch_is_retried_even_when_it_had_taken_effect(
    hub, v2, route, client_waits, our_waits, retry
):
    """A lost answer to a creation: the retry meets "already exists", which ``exist_ok`` accepts."""
    hub.fail_next(route, drop="after-handling")

    result = push_folder(
        v2, REPO, revision="v2" if route == "create_branch" else None, verify=False, retry=retry
    )

    assert [call.status for call in hub.calls(route)] == [-1, 409]
    assert our_waits == [1]
    repo = hub.repo(REPO)
    assert repo.refs[result.revision] == result.commit and len(repo.commits) == 2
    assert set(repo.resolve(result.commit).files) == {".gitattributes", MANIFEST, *files_of(v2)}


# -- dropped connections -------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_connection_dropped_mid_upload_is_resent_and_lands_once(hub, previous, v2, client_waits, retry):
    hub.fail_next("lfs_upload", drop="mid-body")

    result = push_folder(v2, REPO, retry=retry)

    assert_landed_once(hub, previous, v2, result)
    uploads = hub.calls("lfs_upload")
    dropped = next(call.path for call in uploads if call.status == -1)
    assert [call.status for call in uploads if call.path == dropped] == [-1, 200]
    assert client_waits == [1]
    assert result.verified["events"]  # the re-sent shard loads back


def test_a_commit_whose_answer_was_lost_is_recognised_and_not_made_twice(
    hub, previous, v2, our_waits, retry, caplog
):
    """The commit took effect, the connection closed before the answer: the head now carries exactly this push."""
    hub.fail_next("commit", drop="after-handling")

    result = push_folder(v2, REPO, retry=retry)

    assert_landed_once(hub, previous, v2, result)
    assert [call.status for call in hub.calls("commit")] == [-1]  # not sent again
    assert our_waits == []
    assert result.commit_url.endswith(f"/datasets/{REPO}/commit/{result.commit}")
    assert set(result.verified) == {path.name for path in v2.iterdir() if path.is_dir()}
    assert any("answer was lost" in record.getMessage() for record in caplog.records)


def test_a_commit_dropped_before_it_took_effect_is_retried(hub, previous, v2, our_waits, retry):
    hub.fail_next("commit", drop=True)

    result = push_folder(v2, REPO, verify=False, retry=retry)

    assert_landed_once(hub, previous, v2, result)
    assert [call.status for call in hub.calls("commit")] == [-1, 200] and our_waits == [1]


def test_a_connection_that_keeps_dropping_fails_clearly(hub, previous, v2, our_waits, retry):
    hub.fail_next("commit", times=10, drop=True)

    with pytest.raises(PushError) as raised:
        push_folder(v2, REPO, verify=False, retry=retry)

    message = str(raised.value)
    assert raised.value.kind == "dropped"
    assert message.startswith(f"{REPO}@main: the connection to the Hub dropped on the commit (")
    assert (
        "after 4 attempts" in message and f"still at {previous.sha[:12]}" in message and "Re-run" in message
    )
    assert our_waits == [1, 2, 4] and len(hub.calls("commit")) == 4
    assert_untouched(hub, previous)


def test_uploads_that_keep_failing_fail_after_the_clients_retries_only(
    hub, previous, v2, client_waits, our_waits, retry
):
    hub.fail_next("lfs_upload", times=100, status=502)

    with pytest.raises(PushError) as raised:
        push_folder(v2, REPO, verify=False, retry=retry)

    assert raised.value.kind == "server" and raised.value.status == 502
    assert "the Hub kept failing on uploading the files (502 Bad Gateway" in str(raised.value)
    assert "after the client's own retries" in str(raised.value)
    attempts = {}
    for call in hub.calls("lfs_upload"):
        attempts[call.path] = attempts.get(call.path, 0) + 1
    assert set(attempts.values()) == {6}  # each object: the client's 6 attempts (in parallel), nothing more
    assert sorted(client_waits) == sorted([1, 2, 4, 8, 8] * len(attempts)) and our_waits == []
    assert hub.calls("commit") == []
    assert_untouched(hub, previous)


# -- server errors -------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_commit_that_keeps_failing_with_5xx_fails_and_changes_nothing(hub, previous, v2, our_waits, retry):
    hub.fail_next("commit", times=4, status=503)

    with pytest.raises(PushError) as raised:
        push_folder(v2, REPO, verify=False, retry=retry)

    assert str(raised.value) == (
        f"{REPO}@main: the Hub kept failing on the commit (503 Service Unavailable: injected fault) after 4 attempts; "
        f"nothing of this push was committed ({REPO}@main is still at {previous.sha[:12]}). Re-run later (files "
        "already uploaded are not sent again)"
    )
    assert our_waits == [1, 2, 4]
    assert_untouched(hub, previous)
    uploaded = len(hub.calls("lfs_upload"))

    result = push_folder(v2, REPO, verify=False, retry=retry)  # the re-run

    assert_landed_once(hub, previous, v2, result)
    assert len(hub.calls("lfs_upload")) == uploaded


def test_the_waits_are_bounded_and_double(our_waits):
    policy = RetryPolicy(attempts=7, first_delay=0.5, max_delay=3)
    assert [policy.delay(attempt) for attempt in range(1, 7)] == [0.5, 1, 2, 3, 3, 3]


# -- conflicts -----------------------------------------------------------------------------------------------
def test_a_409_from_a_commit_in_progress_is_not_retried(hub, previous, v2, our_waits, retry):
    hub.fail_next("commit", status=409)

    with pytest.raises(PushError) as raised:
        push_folder(v2, REPO, verify=False, retry=retry)

    assert raised.value.kind == "conflict" and raised.value.status == 409
    assert "someone else is committing to" in str(raised.value)
    assert "Check what changed on the Hub, then re-run `convhub push`" in str(raised.value)
    assert len(hub.calls("commit")) == 1 and our_waits == []
    assert_untouched(hub, previous)


def test_someone_elses_commit_during_the_push_fails_it_and_keeps_theirs(
    hub, previous, v2, monkeypatch, retry
):
    real_plan = push.plan_push

    def plan_then_someone_commits(local, remote, published=None):
        plan = real_plan(local, remote, published)
        HfApi().upload_file(
            path_or_fileobj=b"theirs\n", path_in_repo="NOTES.md", repo_id=REPO, repo_type="dataset"
        )
        return plan

    monkeypatch.setattr(push, "plan_push", plan_then_someone_commits)

    with pytest.raises(PushError) as raised:
        push_folder(v2, REPO, verify=False, retry=retry)

    head = hub.repo(REPO).head("main")
    assert raised.value.kind == "conflict" and raised.value.status == 412
    assert f"the head is now {head.sha[:12]}, this push was planned against {previous.sha[:12]}" in str(
        raised.value
    )
    assert head.parent == previous.sha and head.files["NOTES.md"].content == b"theirs\n"
    assert {path: stored.content for path, stored in head.files.items() if path != "NOTES.md"} == {
        path: stored.content for path, stored in previous.files.items()
    }  # theirs only: nothing of this push


def test_a_lost_answer_then_someone_elses_commit_is_a_conflict_not_a_success(
    hub, previous, v2, monkeypatch, retry
):
    """The head moved, but not to this push's tree: the push must not claim it landed."""
    hub.fail_next("commit", drop=True)
    real_state = push.remote_state
    calls = []

    def state_after_someone_commits(session):
        calls.append(session)
        if len(calls) == 2:  # the read-back after the failed commit
            HfApi().upload_file(
                path_or_fileobj=b"x", path_in_repo="other.txt", repo_id=REPO, repo_type="dataset"
            )
        return real_state(session)

    monkeypatch.setattr(push, "remote_state", state_after_someone_commits)

    with pytest.raises(PushError, match="someone else committed while this push ran"):
        push_folder(v2, REPO, verify=False, retry=retry)
    assert "README.md" in hub.repo(REPO).head("main").files
    assert hub.repo(REPO).head("main").files["README.md"].content == previous.files["README.md"].content


def test_when_the_head_cannot_be_read_back_the_message_says_the_commit_may_have_landed(
    hub, previous, v2, monkeypatch, retry
):
    real_plan = push.plan_push

    def plan_then_break_the_read_back(local, remote, published=None):
        hub.fail_next("commit", drop="after-handling")
        hub.fail_next("repo_info", times=4, status=503)
        return real_plan(local, remote, published)

    monkeypatch.setattr(push, "plan_push", plan_then_break_the_read_back)

    with pytest.raises(PushError) as raised:
        push_folder(v2, REPO, verify=False, retry=retry)

    assert raised.value.kind == "unknown-landing"
    assert "the commit may or may not have landed" in str(raised.value)
    assert "Re-run `convhub push`: it compares files with the repo" in str(raised.value)
    monkeypatch.setattr(push, "plan_push", real_plan)
    again = push_folder(v2, REPO, verify=False, retry=retry)  # it had landed: the re-run finds nothing to do
    assert not again.created_commit and again.plan.uploads == [] and len(hub.repo(REPO).commits) == 3


def test_a_failed_pull_request_is_not_retried(hub, previous, v2, our_waits, retry):
    hub.fail_next("commit", status=503)

    with pytest.raises(PushError, match="may or may not have been opened") as raised:
        push_folder(v2, REPO, create_pr=True, verify=False, retry=retry)

    assert raised.value.kind == "unknown-landing" and len(hub.calls("commit")) == 1 and our_waits == []
    assert_untouched(hub, previous)


# -- the token -----------------------------------------------------------------------------------------------
def test_an_expired_token_fails_before_anything_is_sent(hub, previous, v2, our_waits, retry):
    hub.expire_token()

    with pytest.raises(PushError) as raised:
        push_folder(v2, REPO, verify=False, retry=retry)

    message = str(raised.value)
    assert raised.value.kind == "auth" and raised.value.status == 401
    assert "the Hub refused the token on reading the repo (401 Unauthorized" in message
    assert "it is expired, revoked or has no write access" in message and "hf auth login" in message
    assert HUB_TOKEN not in message and our_waits == []
    assert {call.route for call in hub.calls()} <= {"repo_info", "agent_harnesses"}
    assert_untouched(hub, previous)


@pytest.mark.parametrize(
    ("route", "status", "step"),
    [
        ("preupload", 403, "uploading the files"),
        ("lfs_upload", 401, "uploading the files"),
        ("validate_yaml", 401, "the commit"),
        ("commit", 401, "the commit"),
    ],
)
def test_a_token_refused_mid_push_fails_clearly_and_is_not_retried(
    hub, previous, v2, route, status, step, our_waits, client_waits, retry
):
    hub.fail_next(route, status=status, echo_headers=True)

    with pytest.raises(PushError) as raised:
        push_folder(v2, REPO, verify=False, retry=retry)

    message = str(raised.value)
    assert raised.value.kind == "auth" and raised.value.status == status
    assert f"the Hub refused the token on {step} ({status} " in message
    assert HUB_TOKEN not in message
    if route != "lfs_upload":  # the LFS PUT goes to storage without the token
        assert "authorization: bearer ***;" in message.lower()  # the echoed header, redacted
    assert our_waits == [] and client_waits == []
    assert len([call for call in hub.calls(route) if call.status == status]) == 1
    assert_untouched(hub, previous)


@pytest.mark.slow
@pytest.mark.parametrize(
    "fault",
    [
        {"route": "commit", "times": 4, "status": 503, "echo_headers": True},
        {"route": "commit", "status": 401, "echo_headers": True},
        {"route": "repo_info", "status": 403, "echo_headers": True},
        {"route": "commit", "times": 4, "drop": True},
        {"route": "lfs_upload", "drop": "mid-body"},
    ],
)
def test_the_token_never_leaks_in_a_fault_path(
    hub, v1, v2, fault, monkeypatch, capsys, caplog, client_waits, our_waits, retry
):
    """The command's output, every log record, every request the Hub saw and every file in the repo."""
    caplog.set_level(logging.DEBUG)
    monkeypatch.setattr(push, "DEFAULT_RETRY", retry)
    retried_by_convhub = fault["route"] == "commit" and fault.get("times", 1) > 1
    monkeypatch.delenv("HF_TOKEN")  # only --token gives it
    command = ["push", "locomo", "--repo-id", REPO, "--token", HUB_TOKEN]
    assert main([*command, "--folder", str(v1)]) == 0
    hub.fail_next(fault.pop("route"), **fault)

    status = main([*command, "--folder", str(v2)])

    assert our_waits == ([1, 2, 4] if retried_by_convhub else [])  # the policy patched in is the one used
    captured = capsys.readouterr()
    if status:
        assert len(captured.err.strip().splitlines()[-1:]) == 1
        assert captured.err.strip().splitlines()[-1].startswith("convhub push: error: ")
    assert HUB_TOKEN not in captured.out + captured.err
    assert not [record for record in caplog.records if HUB_TOKEN in record.getMessage() and reported(record)]
    assert all(HUB_TOKEN not in str(call) for call in hub.calls())
    for commit in hub.repo(REPO).commits:
        assert all(HUB_TOKEN.encode() not in stored.content for stored in commit.files.values())
    assert all(HUB_TOKEN.encode() not in content for content in hub.lfs_objects.values())


def reported(record: logging.LogRecord) -> bool:
    """A record a user can see: convhub's and the Hub clients' at any level, any library's from INFO up.

    Left out: the transport's DEBUG traces (``httpcore2``), which print raw response headers, so a server that
    echoes the Authorization header into a response header shows the token there; nothing convhub can redact.
    """
    return record.levelno >= logging.INFO or record.name.startswith(
        ("builders", "convhub", "huggingface_hub")
    )


def test_the_cli_reports_an_expired_token_in_one_line_and_exits_1(hub, previous, v2, capsys):
    hub.expire_token()

    assert main(["push", "locomo", "--repo-id", REPO, "--folder", str(v2), "--dry-run"]) == 1

    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(
        f"convhub push: error: {REPO}@main: the Hub refused the token on reading the repo"
    )
    assert HUB_TOKEN not in "\n".join(err)
