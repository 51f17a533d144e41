"""The remote side of a push and the plan: the repo's head and files, what convhub published there before
(``MANIFEST``), and what to upload and delete (``plan_push``).

The manifest is ``{"files": {path: {"sha256": ..., "git_sha1": ...}}}``: each file convhub published with the
digests of the content it published (the manifest's own entry is ``null``). A later push deletes a file the new
build no longer has only when the Hub still holds exactly that content (the Hub gives an LFS file's sha256 and a
regular file's git blob sha1): a file replaced by hand at one of those paths is the user's, and the push is
refused naming it. A manifest written by an older convhub (``{"files": [path, ...]}``, no digests) cannot tell
convhub's content from a replacement, so nothing it lists is deleted: those files are left in place with a warning.
The manifest is read from the Hub, so it is checked like any input: anything but one of those two shapes is refused
in one line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from huggingface_hub import HfApi, RepoFile
from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

from convhub.engine.writers.output_shards import SHARD_PATH
from convhub.errors import NESTED_TOO_DEEPLY
from convhub.publish.local_files import CARD, file_digests
from convhub.publish.session import HubSession, PushError
from convhub.storage.folders import Folder

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
    #: Files an older convhub published (its list has no digests): the build no longer has them, left in place.
    unverified: list[str] = field(default_factory=list)
    #: Files convhub published that the build no longer has, replaced on the Hub since: never deleted.
    changed_by_hand: list[str] = field(default_factory=list)

    @property
    def changes(self) -> bool:
        return bool(self.uploads or self.deletions)


def is_unchanged(local: Folder, remote: RemoteFile | None) -> bool:
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
        if isinstance(entry, RepoFile):  # (not a RepoFolder)
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


def carries_this_push(plan: PushPlan, files: dict[str, Folder], state: RemoteState) -> bool:
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


def write_manifest(local: dict[str, Folder], scratch: Path) -> dict[str, Folder]:
    """``local`` plus the list of what this push publishes with each file's digests (sorted: an unchanged build
    makes no commit)."""
    manifest = scratch / "published.json"
    published: dict[str, dict[str, str] | None] = {
        path: dict(zip(DIGESTS, file_digests(local[path]), strict=True)) for path in local
    }
    published[MANIFEST] = None  # its own digests cannot be in it
    text = json.dumps({"files": dict(sorted(published.items()))}, indent=1, sort_keys=True)
    manifest.write_text(text + "\n", encoding="utf-8")
    return {**local, MANIFEST: manifest}


#: The digests the manifest keeps per file, in ``file_digests`` order, with their length in hex digits.
DIGESTS = ("sha256", "git_sha1")
_DIGEST_LENGTHS = {"sha256": 64, "git_sha1": 40}

#: What ``published_before`` returns: each published path → its digests (None: an older convhub's list).
Published = dict[str, "dict[str, str] | None"]


def published_before(session: HubSession, remote: RemoteState, scratch: Path) -> Published | None:
    """The files the repo's last convhub push published (with their digests when it recorded them), or None
    when it has no list (nothing may go)."""
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
        return parse_manifest(Path(path).read_bytes())
    except ValueError as error:
        raise PushError(
            f"{session.target}: {MANIFEST} on the Hub is not convhub's list of published files: {error}. "
            "Fix or delete it on the Hub (without it, this push deletes nothing), then re-run `convhub push`"
        ) from None


def parse_manifest(raw: bytes) -> Published:
    """The manifest's ``files``, checked: ``ValueError`` saying what is wrong with anything else."""
    try:
        document = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise ValueError(f"not valid UTF-8 ({error})") from None
    except RecursionError:
        raise ValueError(NESTED_TOO_DEEPLY) from None
    except json.JSONDecodeError as error:
        raise ValueError(f"not valid JSON ({error})") from None
    if not isinstance(document, dict) or "files" not in document:
        raise ValueError('expected a JSON object with "files"')
    files = document["files"]
    if isinstance(files, list):  # an older convhub's list: paths only
        for index, path in enumerate(files):
            if not isinstance(path, str):
                raise ValueError(f"files[{index}] is {_shape(path)}, not a path")
        return dict.fromkeys(files)
    if not isinstance(files, dict):
        raise ValueError(f'"files" is {_shape(files)}, not an object of paths')
    for path, digests in files.items():
        if digests is None:
            continue
        if not isinstance(digests, dict):
            raise ValueError(f"files[{path!r}] is {_shape(digests)}, not an object of digests")
        for name, length in _DIGEST_LENGTHS.items():
            value = digests.get(name)
            if not (
                isinstance(value, str)
                and len(value) == length
                and all(c in "0123456789abcdef" for c in value)
            ):
                raise ValueError(f"files[{path!r}].{name} is not {length} lowercase hex digits")
    return files


def _shape(value) -> str:
    return (
        "null"
        if value is None
        else f"a JSON {type(value).__name__.replace('dict', 'object').replace('list', 'array')}"
    )


def plan_push(local: dict[str, Folder], remote: RemoteState, published: Published | None = None) -> PushPlan:
    """What to upload and delete. A file the build no longer has is deleted only when the last convhub push
    published it (``published``) and the Hub still holds the content it published (see the module docstring)."""
    uploads, unchanged = [], []
    for path, local_path in local.items():
        (unchanged if is_unchanged(local_path, remote.files.get(path)) else uploads).append(path)
    upload_bytes = sum(local[path].stat().st_size for path in uploads)
    plan = PushPlan(uploads, [], unchanged, remote, upload_bytes)
    if published is None:
        plan.left_in_place = sorted(p for p in remote.files if looks_managed(p) and p not in local)
        return plan
    for path in sorted(p for p in remote.files if p in published and p not in local):
        digests = published[path]
        if digests is None:
            plan.unverified.append(path)
        elif holds(remote.files[path], digests):
            plan.deletions.append(path)
        else:
            plan.changed_by_hand.append(path)
    return plan


def holds(remote: RemoteFile, digests: dict[str, str]) -> bool:
    """Whether the Hub's file has the content ``digests`` describe (an LFS file's sha256, else the git blob sha1)."""
    return remote.sha256 == digests["sha256"] if remote.sha256 else remote.blob_id == digests["git_sha1"]
