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

The code is in three modules: this one holds the server and its state (``HubDouble``) and
``isolate_from_real_hub``; ``hub_store.py`` the storage model (repos, commits, files, logged requests, faults);
``hub_routes.py`` the route table and the request handler. Importers use this module only.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import socket
import tempfile
import threading
from http.server import ThreadingHTTPServer

from tests.support.hub_routes import ROUTES, _Handler
from tests.support.hub_store import DROP_MOMENTS, Commit, Fault, HubError, LoggedRequest, Repo

#: The token the test session's double accepts (fake; tests assert it never leaks anywhere).
HUB_TOKEN = "hf_convhubTestToken0123456789abcdefXYZ"


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
        path: str | None = None,
    ) -> None:
        """Make the next ``times`` requests to ``route`` (a name in ``ROUTES``) fail; with ``path``, only those
        whose path holds that text (one file of a repo: a connection lost after a stream's first file).

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
        self._faults[route] = Fault(times, status, moment, echo_headers, path)

    def expire_token(self) -> None:
        """From now on the token is refused (401) on every route, as the Hub does for an expired token."""
        self.token_expired = True

    def repo(self, repo_id: str, repo_type: str = "dataset") -> Repo:
        return self.repos[f"{repo_type}/{repo_id}"]

    def calls(self, route: str | None = None) -> list[LoggedRequest]:
        return [request for request in self.requests if route is None or request.route == route]

    # -- request handling (called by the handler) ---------------------------------------------------------
    def take_fault(self, route: str, path: str = "") -> Fault | None:
        with self._lock:
            fault = self._faults.get(route)
            if fault is None or (fault.path is not None and fault.path not in path):
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
