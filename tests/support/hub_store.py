"""The Hub double's storage model: what a repo, a commit, a stored file, a logged request and a fault are.

Split out of ``hub_double.py`` (the double itself, documented there) to keep each module small: this module
holds the plain data and the git / git-LFS identities (``git_blob_sha``, ``lfs_pointer``) the double reports, the
error an answer raises (``HubError``) and the marker for a dropped connection (``DroppedConnection``), with the
constants they use. Pure standard library: no HTTP here.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

LFS_SUFFIXES = (".parquet", ".arrow", ".bin", ".gz", ".zip", ".zst", ".tar", ".png", ".jpg")
LFS_THRESHOLD = 10 * 1024 * 1024
GITATTRIBUTES = (
    b"*.parquet filter=lfs diff=lfs merge=lfs -text\n*.arrow filter=lfs diff=lfs merge=lfs -text\n"
)


def git_blob_sha(content: bytes) -> str:
    """The git object id of a blob: what the Hub reports as ``oid`` for a regular file."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


@dataclass
class StoredFile:
    content: bytes
    lfs: bool

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.content).hexdigest()

    @property
    def blob_id(self) -> str:
        """Git oid: of the pointer file for an LFS file (as on the Hub), of the content otherwise."""
        return git_blob_sha(lfs_pointer(self.sha256, len(self.content)) if self.lfs else self.content)

    @property
    def etag(self) -> str:
        return self.sha256 if self.lfs else self.blob_id


@dataclass
class Commit:
    sha: str
    parent: str | None
    message: str
    files: dict[str, StoredFile]
    ref: str


@dataclass
class Repo:
    repo_id: str
    repo_type: str
    private: bool
    commits: list[Commit] = field(default_factory=list)
    refs: dict[str, str] = field(default_factory=dict)  # "main", "dev", "refs/pr/1" → commit sha
    pull_requests: int = 0

    def resolve(self, revision: str) -> Commit | None:
        """A branch, a ``refs/pr/N`` or a commit sha (full or a prefix of at least 7) → that commit."""
        sha = self.refs.get(revision)
        for commit in self.commits:
            if commit.sha == sha or (sha is None and len(revision) >= 7 and commit.sha.startswith(revision)):
                return commit
        return None

    def head(self, ref: str = "main") -> Commit:
        return self.resolve(ref)

    def commits_on(self, ref: str = "main") -> list[Commit]:
        """The history of ``ref``, oldest first."""
        by_sha = {commit.sha: commit for commit in self.commits}
        history, commit = [], self.resolve(ref)
        while commit is not None:
            history.append(commit)
            commit = by_sha.get(commit.parent)
        return history[::-1]


@dataclass
class LoggedRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    route: str
    status: int = 0
    authorized: bool = False


DROP_MOMENTS = ("before-handling", "mid-body", "after-handling")
FAULT_MESSAGES = {  # what the Hub says for these statuses (the client picks its exception by some of them)
    401: "Invalid credentials in Authorization header",
    403: "You don't have the rights to create a commit on this repo",
    409: "A commit is already in progress on this branch (injected fault)",
    412: "A commit has happened since. Please refresh and try again. (injected fault)",
}


@dataclass
class Fault:
    times: int
    status: int | None
    drop: str | None  # one of DROP_MOMENTS
    echo_headers: bool = False
    path: str | None = None  # only requests whose path holds this text


class HubError(Exception):
    """An error answer: status, ``X-Error-Code`` header (how the client picks its exception) and message."""

    def __init__(self, status: int, message: str, code: str | None = None, **fields):
        super().__init__(message)
        self.status, self.message, self.code, self.fields = status, message, code, fields


class DroppedConnection(Exception):
    pass
