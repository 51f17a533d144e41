"""Publish a built folder to the Hub in one commit, then load every config back and compare row counts.

Before anything goes out, the card's row counts are compared with the Parquet footers of each config's files:
a card whose figures disagree with its folder is refused. The plan compares each local file with the remote
listing (sha256 for LFS files, git blob sha otherwise): only new or changed files are uploaded. Each commit also
writes ``.convhub/published.json``, the list of files convhub published in it; the next push deletes exactly the
files that list names and the new build no longer has, in the same commit. Anything else in the repo
(``.gitattributes``, files added by hand, even ones named like shards) is left alone; a repo with no list (pushed
by hand or by an older convhub) gets no deletion, only a warning naming the stale-looking files. The commit names
the head the plan was made against (``parent_commit``), so a concurrent commit makes it fail instead of
silently mixing two builds. Nothing changed → no commit.

Faults (see ``RetryPolicy``): what ``huggingface_hub`` 2.4 already retries by itself (``http_backoff``: the
preupload call, the LFS batch call, each LFS PUT and the tree listing, 6 attempts, waits 1, 2, 4, 8, 8 s, on 408,
429, 5xx and dropped or timed-out connections) is not retried again here. What it sends once (repo info, repo and
branch creation, card validation, the commit) is retried here on the same transient faults, a bounded number of
times with backoff; the commit only when it is known not to have landed: after a failed commit the head is read
back; still the parent → retry; moved to a tree that is exactly this push's → done (the answer was lost, the commit
landed); moved elsewhere → someone else committed: fail. A refused token (401/403), a conflict (409/412) and
any other refusal are never retried. Every failure is one line (``PushError``) that says what to do; nothing is
committed unless one commit carries everything.

The token comes from ``--token`` or wherever ``huggingface_hub`` finds one (``HF_TOKEN``, the stored login);
it is handed to the client and never printed, logged or written: every message built from a Hub answer is
redacted first (a proxy may echo the request's headers).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import pyarrow.parquet as pq
from convhub import registry
from convhub.cards import for_repo, is_non_commercial
from convhub.hub_errors import redact, report
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, DatasetCard, HfApi, get_token
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

logger = logging.getLogger("convhub.push")

CARD = "README.md"
#: What convhub published in the repo's last push: the only files a later push may delete.
MANIFEST = ".convhub/published.json"
SHARD = re.compile(r"^[^/]+/(?:[^/]+/)?[^/]+-\d{5}-of-\d{5}\.parquet$")  # <config>/[<subset>/]<split>-…
NO_LICENSE = {"", "none"}


TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})  # the statuses huggingface_hub retries too


class PushError(Exception):
    """The push could not be made or did not verify (the one-line message says what to do).

    ``kind`` names the fault (``auth``, ``conflict``, ``server``, ``dropped``, ``refused``, ``unknown-landing``,
    ``license``, ``verify`` …) and ``status`` the HTTP status when there was one, for callers that branch on it.
    """

    def __init__(self, message: str, kind: str = "error", status: int | None = None):
        super().__init__(message)
        self.kind, self.status = kind, status


@dataclass
class RetryPolicy:
    """How often and how patiently convhub retries the calls the client sends only once.

    ``attempts`` counts the first try; the waits double from ``first_delay`` up to ``max_delay``. ``sleep`` is
    injectable so tests do not wait.
    """

    attempts: int = 4
    first_delay: float = 1.0
    max_delay: float = 8.0
    sleep: Callable[[float], None] = time.sleep

    def delay(self, attempt: int) -> float:
        """The wait after failed attempt number ``attempt`` (1-based)."""
        return min(self.max_delay, self.first_delay * 2 ** (attempt - 1))


DEFAULT_RETRY = RetryPolicy()  # what `convhub push` uses (4 attempts, waits 1, 2, 4 s)


@dataclass
class HubFault:
    """A failed Hub call, reduced to what the policy and the message need (never the request's headers)."""

    kind: str  # auth | conflict | server | dropped | refused
    status: int | None
    reason: str  # "503 Service Unavailable", or the transport error's own words
    detail: str  # the Hub's message, redacted and on one line

    @property
    def transient(self) -> bool:
        return self.kind == "dropped" or (self.kind == "server" and self.status in TRANSIENT_STATUSES)

    @classmethod
    def of(cls, error: BaseException, token) -> HubFault | None:
        """The Hub or transport error behind ``error`` (the client wraps LFS failures in a RuntimeError)."""
        while error is not None and not isinstance(error, (HfHubHTTPError, httpx2.TransportError)):
            error = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
        if isinstance(error, httpx2.TransportError):
            words = redact(str(error), token) or type(error).__name__
            return cls("dropped", None, words, words)
        if error is None or error.response is None:
            return None
        status = error.response.status_code
        reason = f"{status} {error.response.reason_phrase}".strip()
        detail = redact(error.server_message or "", token)
        if status in (401, 403):
            kind = "auth"
        elif status in (409, 412):
            kind = "conflict"
        elif status in TRANSIENT_STATUSES:
            kind = "server"
        else:
            kind = "refused"
        return cls(kind, status, reason, detail)


@dataclass
class RemoteFile:
    size: int
    blob_id: str  # git oid (of the LFS pointer for an LFS file)
    sha256: str | None  # LFS files only


@dataclass
class RemoteState:
    exists: bool
    head: str | None  # commit the plan compares against (of `revision`, or of the branch it will start from)
    revision_exists: bool
    files: dict[str, RemoteFile] = field(default_factory=dict)


@dataclass
class PushPlan:
    uploads: list[str]
    deletions: list[str]
    unchanged: list[str]
    remote: RemoteState
    upload_bytes: int = 0
    #: Files named like convhub's that this push may not delete: the repo has no list of what convhub published.
    left_in_place: list[str] = field(default_factory=list)

    @property
    def changes(self) -> bool:
        return bool(self.uploads or self.deletions)


@dataclass
class PushResult:
    repo_id: str
    revision: str
    plan: PushPlan
    dry_run: bool
    commit: str | None = None  # the new commit, or the unchanged head when nothing changed
    created_commit: bool = False
    created_repo: bool = False
    commit_url: str | None = None
    pr_url: str | None = None
    verified: dict[str, dict[str, int]] = field(default_factory=dict)  # config → split → rows loaded back
    warnings: list[str] = field(default_factory=list)


# -- the local side ------------------------------------------------------------------------------------------
def local_files(folder: Path) -> dict[str, Path]:
    """Every file the build wrote (path in the repo → local path); hidden files and folders are skipped."""
    files = {}
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder).as_posix()
        if path.is_file() and not any(part.startswith(".") for part in relative.split("/")):
            files[relative] = path
    if CARD not in files:
        raise PushError(f"{folder} has no {CARD}: is it a folder written by `convhub build`?")
    return files


def expected_rows(card: DatasetCard) -> dict[str, dict[str, int]]:
    """Rows per split of every config the card offers, as the build wrote them into its ``dataset_info``."""
    infos = card.data.get("dataset_info") or []
    infos = [infos] if isinstance(infos, dict) else infos
    rows = {
        info.get("config_name", "default"): {
            split["name"]: split["num_examples"] for split in info.get("splits", [])
        }
        for info in infos
    }
    expected = {}
    for config in card.data.get("configs") or []:
        name = config["config_name"]
        if name not in rows:
            raise PushError(f"the card offers config {name} but gives no row counts for it (dataset_info)")
        expected[name] = rows[name]
    return expected


def license_ids(card: DatasetCard) -> list[str]:
    license_id = card.data.get("license")
    ids = license_id if isinstance(license_id, list) else [license_id]
    return [
        str(name).strip() for name in ids if name is not None and str(name).strip().lower() not in NO_LICENSE
    ]


def check_license(card: DatasetCard) -> None:
    """Refuse a card that names no license: users could not tell whether they may use the data at all."""
    if not license_ids(card):
        raise PushError(
            "the card names no license: set `license:` in its YAML (the source's LICENSE) to the source's terms, "
            "or to `unknown` if they truly are unknown, before publishing",
            kind="license",
        )


def license_warnings(card: DatasetCard) -> list[str]:
    """Warn on a non-commercial license and on an unknown one (a card with none is refused)."""
    warnings = []
    for name in license_ids(card):
        if is_non_commercial(name):
            warnings.append(
                f"license {name} is non-commercial: the dataset may not be used for commercial purposes"
            )
        elif name.lower() == "unknown":
            warnings.append("license unknown: users must check the source's terms before using the data")
    return warnings


def file_digests(path: Path) -> tuple[str, str]:
    """(sha256, git blob sha1) of a file, read once in blocks."""
    sha256, blob = hashlib.sha256(), hashlib.sha1(b"blob %d\0" % path.stat().st_size)
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            sha256.update(block)
            blob.update(block)
    return sha256.hexdigest(), blob.hexdigest()


def is_unchanged(local: Path, remote: RemoteFile | None) -> bool:
    if remote is None or remote.size != local.stat().st_size:
        return False
    sha256, blob_id = file_digests(local)
    return sha256 == remote.sha256 if remote.sha256 else blob_id == remote.blob_id


# -- the remote side -----------------------------------------------------------------------------------------
@dataclass
class HubSession:
    """One push's client, target and retry policy; turns every Hub fault into a one-line ``PushError``."""

    api: HfApi
    repo_id: str
    revision: str
    policy: RetryPolicy = field(default_factory=RetryPolicy)

    @property
    def target(self) -> str:
        return f"{self.repo_id}@{self.revision}"

    def call(self, step: str, function, *args, **kwargs):
        """A call the client sends only once and that is safe to repeat: retried on transient faults."""
        for attempt in range(1, self.policy.attempts + 1):
            try:
                return function(*args, **kwargs)
            except Exception as error:
                fault = HubFault.of(error, self.api.token)
                if fault is None:
                    raise
                if not fault.transient or attempt == self.policy.attempts:
                    raise self.failure(step, fault, attempt) from None
                self.wait(step, fault, attempt)

    def once(self, step: str, function, *args, **kwargs):
        """A call the client already retries by itself (``http_backoff``): not retried again here."""
        try:
            return function(*args, **kwargs)
        except Exception as error:
            fault = HubFault.of(error, self.api.token)
            if fault is None:
                raise
            raise self.failure(step, fault, attempts=None) from None

    def wait(self, step: str, fault: HubFault, attempt: int) -> None:
        delay = self.policy.delay(attempt)
        logger.warning(
            "%s: %s failed (%s), retry %d/%d in %gs",
            self.target,
            step,
            fault.reason,
            attempt,
            self.policy.attempts - 1,
            delay,
        )
        self.policy.sleep(delay)

    def failure(self, step: str, fault: HubFault, attempts: int | None, head: str | None = None) -> PushError:
        """The one-line message for a fault that ends the push (nothing of it was committed)."""
        nothing = "nothing of this push was committed" + (
            f" ({self.target} is still at {head[:12]})" if head else ""
        )
        detail = f": {fault.detail}" if fault.detail and fault.detail != fault.reason else ""
        tries = "after the client's own retries" if attempts is None else f"after {attempts} attempts"
        if fault.kind == "auth":
            message = (
                f"the Hub refused the token on {step} ({fault.reason}{detail}): it is expired, revoked or has no "
                f"write access to {self.repo_id}; {nothing}. Make a new write token (`hf auth login`, HF_TOKEN or "
                "--token) and re-run"
            )
        elif fault.kind == "conflict":
            message = (
                f"someone else is committing to {self.target} ({fault.reason}{detail}); {nothing}. Check what "
                "changed on the Hub, then re-run `convhub push` (it plans against the new head)"
            )
        elif fault.kind == "server":
            message = (
                f"the Hub kept failing on {step} ({fault.reason}{detail}) {tries}; {nothing}. Re-run later "
                "(files already uploaded are not sent again)"
            )
        elif fault.kind == "dropped":
            message = (
                f"the connection to the Hub dropped on {step} ({fault.reason}) {tries}; {nothing}. Re-run later "
                "(files already uploaded are not sent again)"
            )
        else:
            message = f"the Hub refused {step} ({fault.reason}{detail}); {nothing}"
        return PushError(f"{self.target}: {message}", kind=fault.kind, status=fault.status)


def remote_state(session: HubSession) -> RemoteState:
    """The head of the revision (or of ``main`` when that branch is yet to be made) and its files."""
    api, repo_id, revision = session.api, session.repo_id, session.revision
    try:
        info = session.call("reading the repo", _repo_info, api, repo_id, revision)
        revision_exists = True
    except _Absent as absent:
        if absent.what == "repo":
            return RemoteState(exists=False, head=None, revision_exists=False)
        info = session.call("reading the repo", _repo_info, api, repo_id, None)
        revision_exists = False
    files = {}
    tree = session.once(
        "listing the repo's files",
        lambda: list(api.list_repo_tree(repo_id, repo_type="dataset", revision=info.sha, recursive=True)),
    )
    for entry in tree:
        if hasattr(entry, "blob_id"):  # a RepoFile (folders have a tree_id)
            sha256 = entry.lfs.sha256 if entry.lfs else None
            files[entry.path] = RemoteFile(entry.size, entry.blob_id, sha256)
    return RemoteState(exists=True, head=info.sha, revision_exists=revision_exists, files=files)


class _Absent(Exception):
    def __init__(self, what: str):
        self.what = what


def _repo_info(api: HfApi, repo_id: str, revision: str | None):
    """``repo_info``, with "no such repo" and "no such revision" as ``_Absent`` (answers, not faults)."""
    try:
        return api.repo_info(repo_id, repo_type="dataset", revision=revision)
    except RepositoryNotFoundError as error:
        if error.response is not None and error.response.status_code == 401 and api.token:
            raise  # the Hub answers 401 for a repo it hides from this token: an auth fault, not an absence
        raise _Absent("repo") from None
    except RevisionNotFoundError:
        raise _Absent("revision") from None


def carries_this_push(plan: PushPlan, files: dict[str, Path], state: RemoteState) -> bool:
    """Whether ``state`` is exactly what this push's commit makes of the planned parent (no more, no less)."""
    changed = set(plan.uploads) | set(plan.deletions)
    untouched = {path: remote for path, remote in plan.remote.files.items() if path not in changed}
    if set(state.files) != set(untouched) | set(plan.uploads):
        return False
    if any(state.files[path].blob_id != remote.blob_id for path, remote in untouched.items()):
        return False
    return all(is_unchanged(files[path], state.files[path]) for path in plan.uploads)


def looks_managed(path: str) -> bool:
    """Named like a file convhub writes (the card, a config's shards): only warned about, never deleted on its name."""
    return path == CARD or bool(SHARD.match(path))


def write_manifest(local: dict[str, Path], scratch: Path) -> dict[str, Path]:
    """``local`` plus the list of what this push publishes (sorted: an unchanged build makes no commit)."""
    manifest = scratch / "published.json"
    published = sorted([*local, MANIFEST])
    manifest.write_text(json.dumps({"files": published}, indent=1) + "\n", encoding="utf-8")
    return {**local, MANIFEST: manifest}


def published_before(session: HubSession, remote: RemoteState, scratch: Path) -> set[str] | None:
    """The files the repo's last convhub push published, or None when it has no list (nothing may go)."""
    if MANIFEST not in remote.files:
        return None
    path = session.once(
        "reading what convhub published before",
        session.api.hf_hub_download,
        session.repo_id,
        MANIFEST,
        repo_type="dataset",
        revision=remote.head,
        cache_dir=str(scratch / "cache"),
    )
    try:
        files = json.loads(Path(path).read_text(encoding="utf-8"))["files"]
    except (ValueError, KeyError, TypeError) as error:
        raise PushError(
            f"{session.repo_id}: {MANIFEST} is not convhub's list of published files ({error})"
        ) from None
    return set(files)


def plan_push(local: dict[str, Path], remote: RemoteState, published: set[str] | None = None) -> PushPlan:
    """What to upload and delete. Only a file the last convhub push published (``published``) is deleted."""
    uploads, unchanged = [], []
    for path, local_path in local.items():
        (unchanged if is_unchanged(local_path, remote.files.get(path)) else uploads).append(path)
    deletions = sorted(path for path in remote.files if path in (published or ()) and path not in local)
    upload_bytes = sum(local[path].stat().st_size for path in uploads)
    plan = PushPlan(uploads, deletions, unchanged, remote, upload_bytes)
    if published is None:
        plan.left_in_place = sorted(p for p in remote.files if looks_managed(p) and p not in local)
    return plan


def card_disagreements(folder: Path, card: DatasetCard) -> list[str]:
    """Where the card's row counts differ from the rows the Parquet footers of its config's files hold."""
    counts = expected_rows(card)
    problems = []
    for config in card.data.get("configs") or []:
        name = config["config_name"]
        data_files = config.get("data_files") or []
        data_files = [{"split": "train", "path": data_files}] if isinstance(data_files, str) else data_files
        for entry in data_files:
            patterns = [entry["path"]] if isinstance(entry["path"], str) else entry["path"]
            files = sorted({path for pattern in patterns for path in folder.glob(pattern) if path.is_file()})
            rows = sum(pq.ParquetFile(path).metadata.num_rows for path in files)
            stated = counts.get(name, {}).get(entry["split"])
            if stated != rows:
                problems.append(
                    f"config {name} split {entry['split']}: the card says {stated} rows, "
                    f"its {len(files)} Parquet file{'' if len(files) == 1 else 's'} hold{'s' if len(files) == 1 else ''} {rows}"
                )
    return problems


# -- the push ------------------------------------------------------------------------------------------------
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
    """
    folder = Path(folder)
    revision = revision or "main"
    files = local_files(folder)
    card = DatasetCard.load(files[CARD])
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


def card_for_repo(files: dict[str, Path], repo_id: str, scratch: Path) -> dict[str, Path]:
    """``files`` with a card whose code loads ``repo_id``: a copy in ``scratch`` when the build named another
    repo (``convhub build --repo-id``, else ``ORG/<name>``). The folder's own card is left as it is."""
    text = files[CARD].read_text(encoding="utf-8")
    retargeted = for_repo(text, repo_id)
    if retargeted == text:
        return files
    copy = scratch / CARD
    copy.write_text(retargeted, encoding="utf-8")
    return {**files, CARD: copy}


def _plan(session: HubSession, files: dict[str, Path], scratch: Path) -> PushPlan:
    remote = remote_state(session)
    return plan_push(files, remote, published_before(session, remote, scratch))


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
        result.created_repo = True
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


def _commit(session: HubSession, result: PushResult, files: dict[str, Path], create_pr: bool) -> None:
    """Upload the new objects (the client retries those), then make the one commit (retried here, see below)."""
    plan = result.plan
    if not plan.changes:
        result.commit = plan.remote.head
        return
    operations = [CommitOperationAdd(path, str(files[path])) for path in plan.uploads]
    operations += [CommitOperationDelete(path) for path in plan.deletions]
    additions = operations[: len(plan.uploads)]
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
    for attempt in range(1, session.policy.attempts + 1):
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
    files: dict[str, Path],
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
        if fault.kind == "conflict" or not fault.transient or attempt == session.policy.attempts:
            raise session.failure("the commit", fault, attempt, head=state.head)
        return False
    if carries_this_push(plan, files, state):
        logger.warning(
            "%s: the commit's answer was lost (%s) but %s carries exactly this push: done",
            session.target,
            fault.reason,
            state.head[:12],
        )
        result.commit, result.created_commit = state.head, True
        result.commit_url = f"{session.api.endpoint}/datasets/{session.repo_id}/commit/{state.head}"
        return True
    raise PushError(
        f"{session.target}: someone else committed while this push ran ({fault.reason}): the head is now "
        f"{state.head[:12]}, this push was planned against {(plan.remote.head or '')[:12]}; nothing of this push was "
        "committed. Check what changed on the Hub, then re-run `convhub push` (it plans against the new head)",
        kind="conflict",
        status=fault.status,
    )


def _commit_description(plan: PushPlan) -> str:
    lines = [f"upload {path}" for path in plan.uploads] + [f"delete {path}" for path in plan.deletions]
    return "\n".join(lines)


def verify_push(
    repo_id: str, commit: str, expected: dict[str, dict[str, int]], token
) -> dict[str, dict[str, int]]:
    """Load every config of the card from the Hub at ``commit`` and compare its row counts with the build."""
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


def _load_back(repo_id: str, config: str, commit: str, token, cache_dir: str) -> dict[str, int]:
    import datasets

    try:
        dataset = datasets.load_dataset(repo_id, config, revision=commit, token=token, cache_dir=cache_dir)
    except Exception as error:  # whatever stops a user loading what was pushed fails the push
        raise PushError(
            f"{repo_id}@{commit} config {config} does not load back: {redact(str(error), token)}",
            kind="verify",
        ) from error
    return {split: dataset[split].num_rows for split in dataset}


# -- the command ---------------------------------------------------------------------------------------------
def add_arguments(parser) -> None:
    parser.add_argument(
        "source",
        nargs="?",
        choices=registry.names(),
        help="the registered source the folder was built from; leave out for a mixture (give --folder)",
    )
    parser.add_argument("--repo-id", required=True, help="the dataset repo, ORG/NAME")
    parser.add_argument("--folder", type=Path, help="the built folder (default: out/<hub name of SOURCE>)")
    parser.add_argument("--token", help="a Hugging Face token (default: HF_TOKEN or the stored login)")
    parser.add_argument("--private", action="store_true", help="create the repo private (when it is new)")
    parser.add_argument("--revision", help="push to this branch (created from main when absent)")
    parser.add_argument("--create-pr", action="store_true", help="open a pull request instead of committing")
    parser.add_argument(
        "--dry-run", action="store_true", help="print what would be uploaded and deleted; change nothing"
    )


def run(args) -> int:
    if args.source is None and args.folder is None:
        raise SystemExit("convhub push: give a SOURCE, or --folder for a mixture (convhub mix)")
    folder = args.folder or Path("out") / registry.get(args.source).HUB_NAME
    _check_source(folder, args.source)
    try:
        result = push_folder(
            folder,
            args.repo_id,
            token=args.token,
            private=args.private,
            revision=args.revision,
            create_pr=args.create_pr,
            dry_run=args.dry_run,
        )
    except (PushError, HfHubHTTPError) as error:
        return report("push", error, args.token)
    print_result(result)
    return 0


def _check_source(folder: Path, source: str | None) -> None:
    """The folder holds a card, and one built from ``source`` when a source is named."""
    card_path = folder / CARD
    if not card_path.is_file():
        command = f"convhub build {source} --output {folder}" if source else "convhub build or convhub mix"
        raise FileNotFoundError(f"{card_path} does not exist: run `{command}` first")
    tags = DatasetCard.load(card_path).data.get("tags") or []
    if source is not None and source not in tags:
        raise SystemExit(f"convhub push: {folder} was not built from {source} (its card is tagged {tags})")


def print_result(result: PushResult) -> None:
    plan, target = result.plan, f"{result.repo_id}@{result.revision}"
    upload, delete = ("would upload", "would delete") if result.dry_run else ("uploaded", "deleted")
    if result.dry_run and not plan.remote.exists:
        print(f"{result.repo_id}: does not exist; would be created")
    print(
        f"{target}: {len(plan.uploads)} to upload ({plan.upload_bytes / 1e6:.2f} MB), {len(plan.deletions)} to delete"
    )
    for path in plan.uploads:
        print(f"  {upload}  {path}")
    for path in plan.deletions:
        print(f"  {delete}  {path}")
    if result.dry_run:
        return
    if result.created_commit:
        print(f"commit {result.commit}: {result.pr_url or result.commit_url}")
    else:
        print(f"nothing changed: no commit (head {result.commit})")
    for config, splits in result.verified.items():
        counts = ", ".join(
            f"{split} {rows:,} row{'' if rows == 1 else 's'}" for split, rows in splits.items()
        )
        print(f"  verified {config:<14} {counts}")
