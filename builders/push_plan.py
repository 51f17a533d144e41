"""The remote side of a push and the plan: the repo's head and files, what convhub published there before
(``MANIFEST``), and what to upload and delete (``plan_push``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from convhub.push_local import CARD, file_digests
from convhub.push_session import HubSession, PushError
from convhub.shards import SHARD_PATH
from huggingface_hub import HfApi
from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

#: What convhub published in the repo's last push: the only files a later push may delete.
MANIFEST = ".convhub/published.json"


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


def is_unchanged(local: Path, remote: RemoteFile | None) -> bool:
    if remote is None or remote.size != local.stat().st_size:
        return False
    sha256, blob_id = file_digests(local)
    return sha256 == remote.sha256 if remote.sha256 else blob_id == remote.blob_id


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
    return path == CARD or bool(SHARD_PATH.match(path))


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
