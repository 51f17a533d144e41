"""The Hub double's HTTP side: the route table (``ROUTES``) and the request handler that serves it.

Split out of ``hub_double.py`` (the double itself, documented there) to keep each module small: ``_Handler``
matches a request to a route, logs it, applies an injected fault, then answers from the state of the
``HubDouble`` it is bound to (``hub``: ``HubDouble.start()`` makes the subclass). One ``_<route>`` method per
route, with the helpers that shape tree / paths-info entries and byte ranges. Standard library plus PyYAML (for
card validation); importing it must not import ``huggingface_hub``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import socket
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

from tests.support.hub_store import (
    FAULT_MESSAGES,
    GITATTRIBUTES,
    LFS_SUFFIXES,
    LFS_THRESHOLD,
    DroppedConnection,
    Fault,
    HubError,
    LoggedRequest,
    Repo,
    StoredFile,
    git_blob_sha,
    lfs_pointer,
)

if TYPE_CHECKING:
    from tests.support.hub_double import HubDouble

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
        fault = self.hub.take_fault(route, logged.path)
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
