"""An in-memory test double of the Hugging Face Hub's HTTP API, served on 127.0.0.1.

It implements only the routes the real clients call to publish and load a dataset (measured in
``../shared/notes/hub-http-routes.md``): ``huggingface_hub`` 2.4 ``create_repo`` / ``create_branch`` /
``create_commit`` (plain git-LFS uploads, ``HF_HUB_DISABLE_XET=1``) / ``get_paths_info`` /
``list_repo_tree`` / ``repo_info`` / card validation, and ``datasets.load_dataset`` (``resolve`` with HEAD and
GET). Tests drive the real clients against it, then read the double's state: every repo keeps its commits
(sha, parent, files) and every request is logged (method, path, route, status; never a header value, so
never a token).

Failure injection: ``hub.fail_next(route, times, status=...)`` or ``drop=...`` makes the next requests to a
route fail: with that status (and the Hub's message for it), or with a connection closed without an answer, at
one of three moments (``DROP_MOMENTS``): ``True`` / ``"before-handling"`` (the request was read, nothing done),
``"mid-body"`` (half the body read, nothing done: a connection lost mid-upload), ``"after-handling"`` (the request
took effect, the answer is lost: the client cannot tell whether a commit landed). ``echo_headers=True`` puts
the request's headers into the error answer, as a careless proxy does (the token too: tests check it does not
leak further). ``hub.expire_token()`` makes every later request carrying the token answer 401.

Pure standard library (plus PyYAML, which ``huggingface_hub`` depends on): importing this module must not
import ``huggingface_hub``, because ``HF_ENDPOINT`` is only read when that is first imported.
"""

from __future__ import annotations

import atexit
import base64
import hashlib
import json
import os
import re
import shutil
import socket
import tempfile
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

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


class HubError(Exception):
    """An error answer: status, ``X-Error-Code`` header (how the client picks its exception) and message."""

    def __init__(self, status: int, message: str, code: str | None = None, **fields):
        super().__init__(message)
        self.status, self.message, self.code, self.fields = status, message, code, fields


class DroppedConnection(Exception):
    pass


_API = r"/api/(?P<type>datasets|models|spaces)/(?P<repo>[^/]+/[^/]+)"
_FILES = r"/(?P<type>datasets|spaces)/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)"
ROUTES = [  # (method, name, pattern on the raw path: segments are URL-quoted, so `[^/]+` is one segment)
    ("GET", "agent_harnesses", r"/api/agent-harnesses"),
    ("POST", "create_repo", r"/api/repos/create"),
    ("POST", "validate_yaml", r"/api/validate-yaml"),
    ("GET", "repo_info", _API + r"(?:/revision/(?P<rev>[^/]+))?"),
    ("POST", "preupload", _API + r"/preupload/(?P<rev>[^/]+)"),
    ("POST", "paths_info", _API + r"/paths-info/(?P<rev>[^/]+)"),
    ("GET", "tree", _API + r"/tree/(?P<rev>[^/]+)(?P<path>/.*)?"),
    ("POST", "commit", _API + r"/commit/(?P<rev>[^/]+)"),
    ("POST", "create_branch", _API + r"/branch/(?P<rev>[^/]+)"),
    ("POST", "lfs_batch", r"/(?P<type>datasets|spaces)?/?(?P<repo>[^/]+/[^/]+)\.git/info/lfs/objects/batch"),
    ("PUT", "lfs_upload", r"/_lfs/(?P<oid>[0-9a-f]{64})"),
    ("HEAD", "resolve", _FILES),
    ("GET", "resolve", _FILES),
]
_COMPILED = [(method, name, re.compile(pattern + r"$")) for method, name, pattern in ROUTES]


class HubDouble:
    """The server and its state. ``start()`` / ``stop()``; ``url`` is the endpoint to give the clients."""

    def __init__(self, token: str | None = None, sock: socket.socket | None = None):
        self.token = token  # when set, writes and private reads need ``Authorization: Bearer <token>``
        self.repos: dict[str, Repo] = {}
        self.lfs_objects: dict[str, bytes] = {}
        self.requests: list[LoggedRequest] = []
        self.validated_cards: list[dict] = []
        self._faults: dict[str, Fault] = {}
        self.token_expired = False
        self._lock = threading.RLock()
        self._sock = sock
        self._server: ThreadingHTTPServer | None = None

    # -- lifecycle ---------------------------------------------------------------------------------------
    def start(self) -> HubDouble:
        handler = type("Handler", (_Handler,), {"hub": self})
        if self._sock is None:
            self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        else:  # a socket reserved (bound, not listening) before huggingface_hub read HF_ENDPOINT
            self._server = ThreadingHTTPServer(self._sock.getsockname(), handler, bind_and_activate=False)
            self._server.socket.close()
            self._server.socket = self._sock
            self._server.server_activate()
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="hub-double", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def url(self) -> str:
        host, port = (self._server.server_address if self._server else self._sock.getsockname())[:2]
        return f"http://{host}:{port}"

    def reset(self) -> None:
        """Forget every repo, object, request and pending fault (between tests sharing one server)."""
        with self._lock:
            self.repos.clear()
            self.lfs_objects.clear()
            self.requests.clear()
            self.validated_cards.clear()
            self._faults.clear()
            self.token_expired = False

    # -- what tests use ----------------------------------------------------------------------------------
    def fail_next(
        self,
        route: str,
        times: int = 1,
        *,
        status: int | None = None,
        drop: bool | str = False,
        echo_headers: bool = False,
    ) -> None:
        """Make the next ``times`` requests to ``route`` (a name in ``ROUTES``) fail.

        With ``status``: that HTTP status (and a JSON error; with ``echo_headers`` the request's headers in it).
        With ``drop``: the connection is closed without an answer, as a proxy or a crashed server would;
        ``True`` or a moment of ``DROP_MOMENTS`` says when.
        """
        if route not in {name for _, name, _ in ROUTES}:
            raise ValueError(f"unknown route {route!r}")
        if (status is None) == (not drop):
            raise ValueError("give exactly one of status= or drop=")
        moment = DROP_MOMENTS[0] if drop is True else drop or None
        if moment is not None and moment not in DROP_MOMENTS:
            raise ValueError(f"drop must be True or one of {DROP_MOMENTS}")
        self._faults[route] = Fault(times, status, moment, echo_headers)

    def expire_token(self) -> None:
        """From now on the token is refused (401) on every route, as the Hub does for an expired token."""
        self.token_expired = True

    def repo(self, repo_id: str, repo_type: str = "dataset") -> Repo:
        return self.repos[f"{repo_type}/{repo_id}"]

    def calls(self, route: str | None = None) -> list[LoggedRequest]:
        return [request for request in self.requests if route is None or request.route == route]

    # -- request handling (called by the handler) ---------------------------------------------------------
    def take_fault(self, route: str) -> Fault | None:
        with self._lock:
            fault = self._faults.get(route)
            if fault is None:
                return None
            fault.times -= 1
            if fault.times <= 0:
                del self._faults[route]
            return fault

    def find_repo(self, repo_type: str, repo_id: str, authorized: bool) -> Repo:
        repo = self.repos.get(f"{repo_type.rstrip('s')}/{repo_id}")
        if repo is None or (repo.private and not authorized):
            raise HubError(404, "Repository not found", "RepoNotFound")
        return repo

    def find_commit(self, repo: Repo, revision: str) -> Commit:
        commit = repo.resolve(revision)
        if commit is None:
            raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        return commit

    def new_commit(self, repo: Repo, parent: Commit | None, message: str, files: dict, ref: str) -> Commit:
        digest = hashlib.sha1(json.dumps([parent and parent.sha, message, ref]).encode())
        for path in sorted(files):
            digest.update(f"{path}\0{files[path].etag}\0".encode())
        commit = Commit(digest.hexdigest(), parent and parent.sha, message, files, ref)
        repo.commits.append(commit)
        repo.refs[ref] = commit.sha
        return commit


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    hub: HubDouble

    def log_message(self, format, *args):  # the request log is ``hub.requests``; keep stderr quiet
        pass

    def do_GET(self):
        self._dispatch("GET")

    def do_HEAD(self):
        self._dispatch("HEAD")

    def do_POST(self):
        self._dispatch("POST")

    def do_PUT(self):
        self._dispatch("PUT")

    # -- plumbing ----------------------------------------------------------------------------------------
    def _dispatch(self, method: str) -> None:
        parts = urlsplit(self.path)
        route, match = "unknown", None
        for route_method, name, pattern in _COMPILED:
            match = pattern.match(parts.path) if route_method == method else None
            if match:
                route = name
                break
        token = self.hub.token
        presents_token = token is not None and self.headers.get("Authorization") == f"Bearer {token}"
        authorized = presents_token and not self.hub.token_expired
        query = parse_qs(parts.query)
        logged = LoggedRequest(method, unquote(parts.path), query, route, authorized=authorized)
        with self.hub._lock:
            self.hub.requests.append(logged)
        fault = self.hub.take_fault(route)
        try:
            if fault and fault.drop == "mid-body":
                self._read_part_of_body()
                raise DroppedConnection
            body = self._read_body()
            if fault and fault.drop == "before-handling":
                raise DroppedConnection
            if fault and fault.status:
                raise HubError(fault.status, self._fault_message(fault))
            if presents_token and self.hub.token_expired:
                raise HubError(401, FAULT_MESSAGES[401])
            if match is None:
                raise HubError(404, f"no route for {method} {parts.path}")
            params = {key: unquote(value) for key, value in match.groupdict().items() if value is not None}
            handler = getattr(self, f"_{route}")
            with self.hub._lock:
                status, headers, payload = handler(params, logged, body)
            if fault and fault.drop == "after-handling":
                raise DroppedConnection
        except DroppedConnection:
            logged.status = -1
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        except HubError as error:
            status, payload = error.status, json.dumps({"error": error.message, **error.fields}).encode()
            headers = {"Content-Type": "application/json", "X-Error-Message": error.message}
            if error.code:
                headers["X-Error-Code"] = error.code
        logged.status = status
        self._answer(method, status, headers, payload)

    def _fault_message(self, fault: Fault) -> str:
        message = FAULT_MESSAGES.get(fault.status, "injected fault")
        if fault.echo_headers:  # a careless proxy echoing what it received, the Authorization header included
            message += " | request headers: " + "; ".join(f"{k}: {v}" for k, v in self.headers.items())
        return message

    def _read_part_of_body(self) -> None:
        """Read half the body (or the first chunk): the connection is then lost mid-upload."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            self.rfile.read(size // 2)
        else:
            self.rfile.read(int(self.headers.get("Content-Length") or 0) // 2)

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _answer(self, method: str, status: int, headers: dict, payload: bytes) -> None:
        self.send_response(status)
        headers = {"Content-Length": str(len(payload)), **headers}
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        if method != "HEAD":
            self.wfile.write(payload)

    @staticmethod
    def _json(value, status: int = 200, **headers):
        return status, {"Content-Type": "application/json", **headers}, json.dumps(value).encode()

    def _require_write(self, logged: LoggedRequest) -> None:
        if not logged.authorized:
            raise HubError(401, "Invalid credentials in Authorization header")

    def _repo(self, params, logged) -> Repo:
        return self.hub.find_repo(params.get("type", "datasets"), params["repo"], logged.authorized)

    # -- routes --------------------------------------------------------------------------------------------
    def _agent_harnesses(self, params, logged, body):
        raise HubError(404, "not served by the Hub double")

    def _create_repo(self, params, logged, body):
        self._require_write(logged)
        request = json.loads(body)
        repo_type = request.get("type") or "model"
        repo_id = f"{request.get('organization')}/{request['name']}"
        key = f"{repo_type}/{repo_id}"
        prefix = "" if repo_type == "model" else f"{repo_type}s/"
        if key in self.hub.repos:  # the Hub names the existing repo (create_repo(exist_ok=True) reads it)
            raise HubError(409, "You already created this repo", url=f"{self.hub.url}/{prefix}{repo_id}")
        private = request.get("visibility") == "private" or bool(
            request.get("private")
        )  # 2.4 sends visibility
        repo = Repo(repo_id, repo_type, private)
        self.hub.repos[key] = repo
        initial = {".gitattributes": StoredFile(GITATTRIBUTES, lfs=False)}
        self.hub.new_commit(repo, None, "initial commit", initial, "main")
        return self._json({"url": f"{self.hub.url}/{prefix}{repo_id}", "name": repo_id, "id": repo_id})

    def _repo_info(self, params, logged, body):
        repo = self._repo(params, logged)
        commit = self.hub.find_commit(repo, params.get("rev", "main"))
        files = sorted(commit.files.items())
        siblings = [{"rfilename": path, "size": len(stored.content)} for path, stored in files]
        return self._json(
            {
                "id": repo.repo_id,
                "author": repo.repo_id.split("/")[0],
                "sha": commit.sha,
                "private": repo.private,
                "gated": False,
                "disabled": False,
                "tags": [],
                "siblings": siblings,
                "lastModified": "2024-01-01T00:00:00.000Z",
            }
        )

    def _create_branch(self, params, logged, body):
        self._require_write(logged)
        repo = self._repo(params, logged)
        if params["rev"] in repo.refs:
            raise HubError(409, "Reference already exists")
        starting_point = (json.loads(body or b"{}") or {}).get("startingPoint") or "main"
        repo.refs[params["rev"]] = self.hub.find_commit(repo, starting_point).sha
        return self._json({})

    def _preupload(self, params, logged, body):
        self._require_write(logged)
        repo = self._repo(params, logged)
        commit = repo.resolve(params["rev"])
        answers = []
        for file in json.loads(body)["files"]:
            sample = base64.b64decode(file["sample"])
            lfs = file["path"].endswith(LFS_SUFFIXES) or file["size"] > LFS_THRESHOLD or b"\0" in sample
            existing = commit.files.get(file["path"]) if commit else None
            answer = {"path": file["path"], "uploadMode": "lfs" if lfs else "regular", "shouldIgnore": False}
            if existing is not None:
                answer["oid"] = existing.sha256 if lfs else git_blob_sha(existing.content)
            answers.append(answer)
        return self._json({"files": answers, "commitOid": commit.sha if commit else None})

    def _lfs_batch(self, params, logged, body):
        self._require_write(logged)
        self._repo({"type": params.get("type") or "models", "repo": params["repo"]}, logged)
        request = json.loads(body)
        objects = []
        for item in request["objects"]:
            answer = {"oid": item["oid"], "size": item["size"], "authenticated": True}
            if item["oid"] not in self.hub.lfs_objects:
                upload = {"href": f"{self.hub.url}/_lfs/{item['oid']}", "expires_in": 3600}
                answer["actions"] = {"upload": upload}
            objects.append(answer)
        payload = json.dumps({"transfer": "basic", "objects": objects}).encode()
        return 200, {"Content-Type": "application/vnd.git-lfs+json"}, payload

    def _lfs_upload(self, params, logged, body):
        if hashlib.sha256(body).hexdigest() != params["oid"]:
            raise HubError(400, "the uploaded bytes do not match the oid")
        self.hub.lfs_objects[params["oid"]] = body
        return 200, {}, b""

    def _commit(self, params, logged, body):
        self._require_write(logged)
        repo = self._repo(params, logged)
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        header = next(line["value"] for line in lines if line["key"] == "header")
        create_pr = logged.query.get("create_pr") == ["1"]
        branch = params["rev"]
        if branch not in repo.refs or (branch.startswith("refs/pr/") and create_pr):
            raise HubError(404, f"Invalid rev id: {branch}", "RevisionNotFound")
        head = self.hub.find_commit(repo, branch)
        parent = head
        if header.get("parentCommit"):
            parent = self.hub.find_commit(repo, header["parentCommit"])
            if not create_pr and parent.sha != head.sha:
                raise HubError(412, "A commit has happened since. Please refresh and try again.")
        files = self._apply_operations(dict(parent.files), lines)
        ref = branch
        if create_pr:
            repo.pull_requests += 1
            ref = f"refs/pr/{repo.pull_requests}"
        commit = self.hub.new_commit(repo, parent, header["summary"], files, ref)
        prefix = "" if repo.repo_type == "model" else f"{repo.repo_type}s/"
        repo_url = f"{self.hub.url}/{prefix}{repo.repo_id}"
        answer = {"commitOid": commit.sha, "commitUrl": f"{repo_url}/commit/{commit.sha}"}
        if create_pr:
            answer["pullRequestUrl"] = f"{repo_url}/discussions/{repo.pull_requests}"
        return self._json(answer)

    def _apply_operations(self, files: dict[str, StoredFile], lines: list[dict]) -> dict[str, StoredFile]:
        for line in lines:
            key, value = line["key"], line["value"]
            if key == "file":
                files[value["path"]] = StoredFile(base64.b64decode(value["content"]), lfs=False)
            elif key == "lfsFile":
                if value["oid"] not in self.hub.lfs_objects:
                    raise HubError(422, f"LFS object {value['oid']} of {value['path']} was never uploaded")
                files[value["path"]] = StoredFile(self.hub.lfs_objects[value["oid"]], lfs=True)
            elif key == "deletedFile":
                if value["path"] not in files:
                    raise HubError(404, "A file with this name doesn't exist", "EntryNotFound")
                del files[value["path"]]
            elif key == "deletedFolder":
                for path in [path for path in files if path.startswith(value["path"].rstrip("/") + "/")]:
                    del files[path]
            elif key != "header":
                raise HubError(400, f"unsupported commit operation {key!r}")
        return files

    def _paths_info(self, params, logged, body):
        repo = self._repo(params, logged)
        commit = self.hub.find_commit(repo, params["rev"])
        form = parse_qs(body.decode())
        entries = []
        for path in form.get("paths", []):
            path = path.strip("/")
            if path in commit.files:
                entries.append(_file_entry(path, commit.files[path]))
            elif any(name.startswith(path + "/") for name in commit.files):
                entries.append(_folder_entry(path))
        return self._json(entries)

    def _tree(self, params, logged, body):
        repo = self._repo(params, logged)
        commit = self.hub.find_commit(repo, params["rev"])
        folder = params.get("path", "").strip("/")
        prefix = folder + "/" if folder else ""
        below = sorted(path for path in commit.files if path.startswith(prefix))
        if folder and not below:
            raise HubError(404, f"{folder} does not exist on {params['rev']}", "EntryNotFound")
        recursive = logged.query.get("recursive", ["false"])[0].lower() in ("1", "true")
        entries, folders = [], set()
        for path in below:
            parts = path[len(prefix) :].split("/")
            depth_limit = len(parts) if recursive else 1
            for depth in range(1, min(len(parts), depth_limit + 1)):
                folders.add(prefix + "/".join(parts[:depth]))
            if recursive or len(parts) == 1:
                entries.append(_file_entry(path, commit.files[path]))
        entries += [_folder_entry(path) for path in sorted(folders)]
        return self._json(entries)

    def _validate_yaml(self, params, logged, body):
        content = json.loads(body)["content"]
        match = re.match(r"^---\n(.*?)\n---\n", content, re.DOTALL)
        try:
            metadata = yaml.safe_load(match.group(1)) if match else {}
        except yaml.YAMLError as error:
            return self._json({"errors": [{"message": str(error)}]}, status=400)
        if not isinstance(metadata, dict):
            return self._json({"errors": [{"message": "metadata must be a mapping"}]}, status=400)
        self.hub.validated_cards.append(metadata)
        return self._json({"warnings": []})

    def _resolve(self, params, logged, body):
        repo = self._repo(params, logged)
        commit = self.hub.find_commit(repo, params["rev"])
        stored = commit.files.get(params["path"])
        if stored is None:
            raise HubError(404, f"{params['path']} does not exist on {params['rev']}", "EntryNotFound")
        headers = {
            "ETag": f'"{stored.etag}"',
            "X-Repo-Commit": commit.sha,
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
        }
        content, status = stored.content, 200
        ranged = re.fullmatch(r"bytes=(\d*)-(\d*)", self.headers.get("Range", ""))
        if ranged and stored.content:
            start, end = _byte_range(ranged, len(stored.content))
            content, status = stored.content[start : end + 1], 206
            headers["Content-Range"] = f"bytes {start}-{end}/{len(stored.content)}"
        return status, headers, content


def _byte_range(match: re.Match, size: int) -> tuple[int, int]:
    first, last = match.groups()
    if not first:  # "bytes=-N": the last N bytes
        return max(size - int(last), 0), size - 1
    return int(first), min(int(last), size - 1) if last else size - 1


def _file_entry(path: str, stored: StoredFile) -> dict:
    entry = {"type": "file", "path": path, "size": len(stored.content), "oid": stored.blob_id}
    if stored.lfs:
        pointer_size = len(lfs_pointer(stored.sha256, len(stored.content)))
        entry["lfs"] = {"oid": stored.sha256, "size": len(stored.content), "pointerSize": pointer_size}
    return entry


def _folder_entry(path: str) -> dict:
    return {"type": "directory", "path": path, "oid": hashlib.sha1(path.encode()).hexdigest()}


_RESERVED: socket.socket | None = None
_REAL_TOKENS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
_OFFLINE_SWITCHES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
_CACHE_OVERRIDES = (
    "HF_HUB_CACHE",
    "HUGGINGFACE_HUB_CACHE",
    "HF_DATASETS_CACHE",
    "HF_TOKEN_PATH",
    "HF_XET_CACHE",
)


def isolate_from_real_hub() -> socket.socket:
    """Point this process (and its children) at a loopback Hub before ``huggingface_hub`` is imported.

    Reserves a port (bound, not yet listening: until a test starts the double, a stray Hub call is refused at
    once instead of reaching the network), sets ``HF_ENDPOINT`` to it, ``HF_HUB_DISABLE_XET=1`` (plain LFS), a
    temporary ``HF_HOME`` (no cache or stored token of the user is read or written), and removes any real
    token and offline switch from the environment. Returns the reserved socket for ``HubDouble(sock=...)``.
    Idempotent: a second import of conftest (``from tests.conftest import ...``) gets the same socket and
    leaves the environment as the first call set it.
    """
    global _RESERVED
    if _RESERVED is not None:
        return _RESERVED
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    home = tempfile.mkdtemp(prefix="convhub-test-hf-home-")
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    os.environ.update(
        HF_ENDPOINT=f"http://127.0.0.1:{sock.getsockname()[1]}",
        HF_HUB_DISABLE_XET="1",
        HF_HOME=home,
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HUB_DISABLE_PROGRESS_BARS="1",
    )
    for name in (*_REAL_TOKENS, *_OFFLINE_SWITCHES, *_CACHE_OVERRIDES):
        os.environ.pop(name, None)
    _RESERVED = sock
    return sock
