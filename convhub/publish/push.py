"""Publish a built folder to the Hub in one commit, then load every config back and compare row counts.

Before anything goes out, the card's row counts are compared with the Parquet footers of each config's files: a
card whose figures disagree with its folder is refused. The plan compares each local file with the remote listing
(sha256 for LFS files, git blob sha otherwise): only new or changed files are uploaded. Each commit also writes
``.convhub/published.json``, the list of files convhub published in it with their digests; the next push deletes
the files that list names and the new build no longer has, in the same commit, when the Hub still holds the
content convhub published (a file replaced by hand there refuses the push, naming it). Anything else in the repo
(``.gitattributes``, files added by hand, even ones named like shards) is left alone; a repo with no list (pushed
by hand) or with an older convhub's list (no digests) gets no deletion, only a warning naming the files. The
commit names the head the plan was made against (``parent_commit``), so a concurrent commit makes it fail instead
of silently mixing two builds. Nothing changed → no commit.

Faults (see ``RetryPolicy``): what ``huggingface_hub`` 2.4 already retries by itself (``http_backoff``: the
preupload call, the LFS batch call, each LFS PUT and the tree listing, 6 attempts, waits 1, 2, 4, 8, 8 s, on 408,
429, 5xx and dropped or timed-out connections) is not retried again here. What it sends once (repo info, repo and
branch creation, card validation, the commit) is retried here on the same transient faults, a bounded number of
times with backoff; the commit only when it is known not to have landed: after a failed commit the head is read
back; still the parent → retry; moved to a tree that is exactly this push's → done (the answer was lost, the
commit landed); moved elsewhere → someone else committed: fail. A refused token (401/403), a conflict (409/412)
and any other refusal are never retried. Every failure is one line (``PushError``) that says what to do; nothing
is committed unless one commit carries everything. Every request has a timeout
(``convhub.publish.hub_client.use_timeouts``): a silent server is a timed-out connection. A refused connection is retried
once, quickly, and the message names the endpoint.

The token comes from ``--token`` or wherever ``huggingface_hub`` finds one (``HF_TOKEN``, the stored login);
it is handed to the client and never printed, logged or written: every message built from a Hub answer is
redacted first (a proxy may echo the request's headers).

Modules: ``push_session`` (the Hub session, its retries and faults), ``push_local`` (the built folder: files, row
counts, license), ``push_plan`` (the repo's state, what convhub published there, what to upload and delete),
``push_command`` (``convhub push``). This module is the push itself and exports what callers use.
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from huggingface_hub import CommitOperation, CommitOperationAdd, CommitOperationDelete, HfApi, get_token

from convhub.cards import for_repo
from convhub.publish.command import add_arguments, print_result, run
from convhub.publish.hub_client import use_timeouts
from convhub.publish.hub_errors import redact
from convhub.publish.local_files import (
    CARD,
    NO_LICENSE,
    card_disagreements,
    check_license,
    expected_rows,
    file_digests,
    license_ids,
    license_warnings,
    local_files,
)
from convhub.publish.plan import (
    MANIFEST,
    PushPlan,
    RemoteFile,
    RemoteState,
    carries_this_push,
    is_unchanged,
    looks_managed,
    plan_push,
    published_before,
    remote_state,
    write_manifest,
)
from convhub.publish.session import TRANSIENT_STATUSES, HubFault, HubSession, PushError, RetryPolicy
from convhub.storage.folders import Folder, folder_at, is_url, read_card
from convhub.storage.staging import unfinished_build

__all__ = [
    "CARD",
    "DEFAULT_RETRY",
    "MANIFEST",
    "NO_LICENSE",
    "TRANSIENT_STATUSES",
    "HubFault",
    "HubSession",
    "PushError",
    "PushPlan",
    "PushResult",
    "RemoteFile",
    "RemoteState",
    "RetryPolicy",
    "add_arguments",
    "card_disagreements",
    "card_for_repo",
    "carries_this_push",
    "check_license",
    "expected_rows",
    "file_digests",
    "is_unchanged",
    "license_ids",
    "license_warnings",
    "local_files",
    "looks_managed",
    "plan_push",
    "print_result",
    "published_before",
    "push_folder",
    "remote_state",
    "run",
    "verify_push",
    "write_manifest",
]

logger = logging.getLogger("convhub.publish.push")

# Tests replace DEFAULT_RETRY, plan_push, remote_state and _load_back on this module (monkeypatch): the push
# looks each up here, by that name, when it runs. Keep calling them so, not through the module that defines them.
DEFAULT_RETRY = RetryPolicy()  # what `convhub push` uses (4 attempts, waits 1, 2, 4 s)


@dataclass
class PushResult:
    repo_id: str
    revision: str
    plan: PushPlan
    dry_run: bool
    commit: str | None = None  # the new commit, or the unchanged head when nothing changed
    created_commit: bool = False
    commit_url: str | None = None
    pr_url: str | None = None
    verified: dict[str, dict[str, int]] = field(default_factory=dict)  # config → split → rows loaded back
    warnings: list[str] = field(default_factory=list)


def push_folder(
    folder,
    repo_id: str,
    *,
    token: str | None = None,
    endpoint: str | None = None,
    private: bool = False,
    revision: str | None = None,
    create_pr: bool = False,
    dry_run: bool = False,
    verify: bool = True,
    retry: RetryPolicy | None = None,
) -> PushResult:
    """Push ``folder`` (a ``convhub build`` output) to the dataset repo ``repo_id`` in one commit.

    ``endpoint`` defaults to ``HF_ENDPOINT``; the verification loads the configs with ``datasets``, which only
    knows ``HF_ENDPOINT``, so another endpoint is refused unless ``verify=False``. ``retry`` sets how the calls the
    client sends once are retried (see the module docstring). A card without a license is refused.

    ``folder`` may be a URL (a build Spark wrote to HDFS or S3): its files are read there, and each file to upload
    is first copied to a local temporary folder (``huggingface_hub`` uploads local files).
    """
    use_timeouts()  # no Hub request of this push may wait forever
    folder = folder_at(folder)
    revision = revision or "main"
    unfinished = unfinished_build(folder)
    if unfinished is not None:  # a killed run's card and part of its files: never to be published as a build
        raise PushError(unfinished, kind="unfinished")
    files = local_files(folder)
    card = read_card(files[CARD])
    check_license(card)
    disagreements = card_disagreements(folder, card)
    if disagreements:
        raise PushError(
            f"{folder}: the card disagrees with the folder ({'; '.join(disagreements)}); rebuild it"
        )
    api = HfApi(endpoint=endpoint, token=token or get_token() or False)
    _check_endpoint(api.endpoint, verify)
    session = HubSession(api, repo_id, revision, retry or DEFAULT_RETRY)
    with tempfile.TemporaryDirectory(prefix="convhub-push-") as scratch:
        files = card_for_repo(files, repo_id, Path(scratch))
        files = write_manifest(files, Path(scratch))
        result = PushResult(repo_id, revision, _plan(session, files, Path(scratch)), dry_run)
        result.warnings = license_warnings(card)
        if result.plan.left_in_place:
            result.warnings.append(
                f"the repo has no {MANIFEST} (pushed by hand or by an older convhub), so these files the build no"
                f" longer has are left in place: {', '.join(result.plan.left_in_place)}"
            )
        if result.plan.unverified:
            result.warnings.append(
                f"the repo's {MANIFEST} was written by an older convhub and records no content digests, so these"
                " files it published, which the build no longer has, are left in place (they may have been replaced"
                f" by hand since): {', '.join(result.plan.unverified)}; delete them on the Hub if they are convhub's"
            )
        for warning in result.warnings:
            logger.warning("%s: %s", repo_id, warning)
        if dry_run:
            return result
        if api.token is False:
            raise PushError(
                "no Hugging Face token: pass --token, set HF_TOKEN, or run `hf auth login`", kind="auth"
            )
        if _prepare_repo(session, result, private):  # plan again against the new repo's or branch's head
            result.plan = _plan(session, files, Path(scratch))
        files = local_uploads(files, result.plan.uploads, Path(scratch))
        _commit(session, result, files, create_pr)
    if verify:
        try:
            result.verified = verify_push(repo_id, result.commit, expected_rows(card), api.token)
        except PushError as error:
            if not result.created_commit:
                raise
            landed = result.commit_url or result.pr_url or f"{repo_id}@{result.commit}"
            raise PushError(
                f"the commit landed ({result.commit}, {landed}), but {error}", kind="verify"
            ) from error
    return result


def card_for_repo(files: dict[str, Folder], repo_id: str, scratch: Path) -> dict[str, Folder]:
    """``files`` with a card whose code loads ``repo_id``: a copy in ``scratch`` when the build named another
    repo (``convhub build --repo-id``, else ``ORG/<name>``). The folder's own card is left as it is."""
    text = files[CARD].read_text(encoding="utf-8")
    retargeted = for_repo(text, repo_id)
    if retargeted == text:
        return files
    copy = scratch / CARD
    copy.write_text(retargeted, encoding="utf-8")
    return {**files, CARD: copy}


def local_uploads(files: dict[str, Folder], uploads: list[str], scratch: Path) -> dict[str, Folder]:
    """``files`` with each file to upload that lies at a URL copied under ``scratch``: only those the plan sends."""
    copies = {}
    for path in uploads:
        if is_url(remote := files[path]):
            copy = scratch / "uploads" / path
            copy.parent.mkdir(parents=True, exist_ok=True)
            remote.fs.get_file(remote.path, str(copy))
            copies[path] = copy
    return {**files, **copies}


def _plan(session: HubSession, files: dict[str, Folder], scratch: Path) -> PushPlan:
    """The plan against the repo as it is now; refused when it would delete a file replaced by hand."""
    remote = remote_state(session)
    plan = plan_push(files, remote, published_before(session, remote, scratch))
    if plan.changed_by_hand:
        them = "it" if len(plan.changed_by_hand) == 1 else "them"
        raise PushError(
            f"{session.target}: convhub will not delete {', '.join(plan.changed_by_hand)}: it published {them} "
            f"before and the build no longer has {them}, but the Hub now holds other content there (replaced by "
            f"hand?); nothing was pushed. Delete or move {them} on the Hub yourself, then re-run `convhub push`",
            kind="changed-by-hand",
        )
    return plan


def _check_endpoint(endpoint: str, verify: bool) -> None:
    import datasets.config

    if verify and endpoint.rstrip("/") != datasets.config.HF_ENDPOINT.rstrip("/"):
        raise PushError(
            f"the push goes to {endpoint} but datasets loads from {datasets.config.HF_ENDPOINT}: "
            "set HF_ENDPOINT instead (before the libraries are imported) so the check reads what was pushed"
        )


def _prepare_repo(session: HubSession, result: PushResult, private: bool) -> bool:
    """Create the repo and the branch ``revision`` when absent; True when something was created.

    Both calls use ``exist_ok``, so repeating one whose answer was lost is harmless.
    """
    api, remote = session.api, result.plan.remote
    if not remote.exists:
        # private=None (not False) so an organization whose repos default to private keeps its default
        session.call(
            "creating the repo",
            api.create_repo,
            result.repo_id,
            repo_type="dataset",
            private=private or None,
            exist_ok=True,
        )
    elif private:
        logger.info("%s exists: --private only applies to a new repo", result.repo_id)
    if not remote.revision_exists and not result.revision.startswith("refs/"):
        session.call(
            "creating the branch",
            api.create_branch,
            result.repo_id,
            branch=result.revision,
            repo_type="dataset",
            exist_ok=True,
        )
    return not (remote.exists and remote.revision_exists)


def _commit(session: HubSession, result: PushResult, files: dict[str, Folder], create_pr: bool) -> None:
    """Upload the new objects (the client retries those), then make the one commit (retried here, see below)."""
    plan = result.plan
    if not plan.changes:
        result.commit = plan.remote.head
        return
    additions = [CommitOperationAdd(path, str(files[path])) for path in plan.uploads]
    operations: list[CommitOperation] = [
        *additions,
        *(CommitOperationDelete(path) for path in plan.deletions),
    ]
    session.once(
        "uploading the files",
        session.api.preupload_lfs_files,
        result.repo_id,
        additions,
        repo_type="dataset",
        revision=result.revision,
        create_pr=create_pr,
        free_memory=False,
    )
    attempt = 0
    while (
        True
    ):  # until it lands or _resolve_failed_commit raises (after the attempts the policy gives the fault)
        attempt += 1
        try:
            info = session.api.create_commit(
                result.repo_id,
                operations,
                commit_message=f"convhub push: {len(plan.uploads)} files uploaded, {len(plan.deletions)} deleted",
                commit_description=_commit_description(plan),
                repo_type="dataset",
                revision=result.revision,
                create_pr=create_pr,
                parent_commit=plan.remote.head,
            )
        except Exception as error:
            fault = HubFault.of(error, session.api.token)
            if fault is None:
                raise
            if _resolve_failed_commit(session, result, files, fault, attempt, create_pr):
                return
            session.wait("the commit", fault, attempt)
            continue
        result.commit, result.commit_url, result.pr_url = info.oid, info.commit_url, info.pr_url
        result.created_commit = True
        return


def _resolve_failed_commit(
    session: HubSession,
    result: PushResult,
    files: dict[str, Folder],
    fault: HubFault,
    attempt: int,
    create_pr: bool,
) -> bool:
    """After a failed commit: True when it landed after all, False to retry; raises when the push must stop.

    A refusal (401/403, other 4xx) means nothing landed. Otherwise the head is read back: still the parent → not
    landed (retry a transient fault while attempts remain; a 409 is someone else's commit in progress); moved to
    exactly this push's tree → landed, the answer was lost; moved elsewhere → someone else committed. A pull
    request is never retried: its commit goes to a new ``refs/pr/N`` that the head does not show.
    """
    plan = result.plan
    if fault.kind in ("auth", "refused"):
        raise session.failure("the commit", fault, attempt, head=plan.remote.head)
    if fault.kind == "unreachable":  # the connection was refused: nothing was sent, nothing landed
        if session.policy.last(attempt, fault):
            raise session.failure("the commit", fault, attempt, head=plan.remote.head)
        return False
    if create_pr:
        raise PushError(
            f"{session.target}: opening the pull request failed ({fault.reason}): it may or may not have been "
            "opened; check the repo's pull requests before re-running `convhub push --create-pr`",
            kind="unknown-landing",
            status=fault.status,
        )
    try:
        state = remote_state(session)
    except PushError as error:
        raise PushError(
            f"{session.target}: the commit's answer was lost ({fault.reason}) and the head could not be read back "
            f"({error}): the commit may or may not have landed. Re-run `convhub push`: it compares files with the "
            "repo and commits only what is missing",
            kind="unknown-landing",
            status=fault.status,
        ) from None
    if state.head == plan.remote.head:
        if fault.kind == "conflict" or not fault.transient or session.policy.last(attempt, fault):
            raise session.failure("the commit", fault, attempt, head=state.head)
        return False
    if carries_this_push(plan, files, state):
        logger.warning(
            "%s: the commit's answer was lost (%s) but %s carries exactly this push: done",
            session.target,
            fault.reason,
            (state.head or "")[:12],
        )
        result.commit, result.created_commit = state.head, True
        result.commit_url = f"{session.api.endpoint}/datasets/{session.repo_id}/commit/{state.head}"
        return True
    raise PushError(
        f"{session.target}: someone else committed while this push ran ({fault.reason}): the head is now "
        f"{(state.head or '')[:12]}, this push was planned against {(plan.remote.head or '')[:12]}; nothing of this push was "
        "committed. Check what changed on the Hub, then re-run `convhub push` (it plans against the new head)",
        kind="conflict",
        status=fault.status,
    )


def _commit_description(plan: PushPlan) -> str:
    lines = [f"upload {path}" for path in plan.uploads] + [f"delete {path}" for path in plan.deletions]
    return "\n".join(lines)


def verify_push(
    repo_id: str, commit: str | None, expected: dict[str, dict[str, int]], token
) -> dict[str, dict[str, int]]:
    """Load every config of the card from the Hub at ``commit`` (None: the main branch's head) and compare its
    row counts with the build."""
    loaded = {}
    with tempfile.TemporaryDirectory(prefix="convhub-verify-") as cache_dir:
        for config, splits in expected.items():
            loaded[config] = _load_back(repo_id, config, commit, token, cache_dir)
            if loaded[config] != splits:
                raise PushError(
                    f"{repo_id}@{commit} config {config}: loaded {loaded[config]}, built {splits}",
                    kind="verify",
                )
    return loaded


def _load_back(repo_id: str, config: str, commit: str | None, token, cache_dir: str) -> dict[str, int]:
    import datasets

    try:
        dataset = datasets.load_dataset(repo_id, config, revision=commit, token=token, cache_dir=cache_dir)
    except Exception as error:  # whatever stops a user loading what was pushed fails the push
        raise PushError(
            f"{repo_id}@{commit} config {config} does not load back: {redact(str(error), token)}",
            kind="verify",
        ) from error
    return {str(split): dataset[split].num_rows for split in dataset}
