"""A persistent cache of judge replies, so that each judge call costs once.

A reply is kept under the hash of the exact request: the endpoint URL without its credentials, the full
request body (model, prompt, settings) and the run's index (``--judge-runs`` asks each question several
times: each run is its own entry). One small JSON file per reply, ``FOLDER/ab/abcdef….json``, written to a
temporary file and renamed into place as soon as the reply arrives: a run killed half-way keeps every reply
it got, a second scorer writing the same entry at once replaces it whole, and a reader never sees half a
file. An unreadable entry is asked again. The key never holds the API key; the stored content has the key
replaced (``transport``).

The default folder is ``$XDG_CACHE_HOME/convhub/judge`` (``~/.cache/convhub/judge`` without it).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from convhub.score.judge.transport import MAX_BODY, Reply


def default_folder() -> Path:
    """``$XDG_CACHE_HOME/convhub/judge``, or ``~/.cache/convhub/judge``."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "convhub" / "judge"


def request_key(url: str, body: dict[str, Any], run: int) -> str:
    """The hash naming one request's entry (``url`` already without credentials)."""
    request = {"url": url, "body": body, "run": run}
    text = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


#: The largest entry read back, in bytes: a reply is at most ``transport.MAX_BODY``, its request a prompt.
LARGEST_ENTRY = 4 * MAX_BODY


def _as_stored(request: dict[str, Any]) -> Any:
    """``request`` as it reads back from an entry (JSON's round trip)."""
    return json.loads(json.dumps(request, ensure_ascii=False))


class JudgeCache:
    """The entries under ``folder`` (made when the first reply is stored)."""

    def __init__(self, folder: str | os.PathLike) -> None:
        self.folder = Path(folder)

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str, url: str, body: dict[str, Any], run: int) -> Reply | None:
        """The stored reply to this request, or None: never stored, or not an entry to trust (it is asked
        again). A folder shared by a team may hold anything at an entry's name: only a regular file of at most
        :data:`LARGEST_ENTRY` bytes (a FIFO would block, ``/dev/zero`` fill the memory) whose recorded request
        is this very one (a file copied under another entry's name is not its reply) is read."""
        path = self._path(key)
        try:
            found = os.stat(path)
            if not stat.S_ISREG(found.st_mode) or found.st_size > LARGEST_ENTRY:
                return None
            entry = json.loads(path.read_bytes())
            if entry["request"] != _as_stored({"url": url, "body": body, "run": run}):
                return None
            reply = entry["reply"]
            return Reply(str(reply["content"]), int(reply["prompt_tokens"]), int(reply["completion_tokens"]))
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            return None

    def put(self, key: str, url: str, body: dict[str, Any], run: int, reply: Reply) -> None:
        """Store ``reply`` for the request, atomically (a temporary file renamed into place)."""
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        entry = {
            "request": {"url": url, "body": body, "run": run},
            "reply": {
                "content": reply.content,
                "prompt_tokens": reply.prompt_tokens,
                "completion_tokens": reply.completion_tokens,
            },
        }
        with tempfile.NamedTemporaryFile(
            "w", encoding="utf-8", dir=path.parent, prefix=f".{key[:16]}.", suffix=".tmp", delete=False
        ) as file:
            try:
                json.dump(entry, file, ensure_ascii=False)
                file.flush()
                os.fsync(file.fileno())
            except BaseException:  # a full disk, Ctrl-C: no stray temporary file
                file.close()
                os.unlink(file.name)
                raise
        os.replace(file.name, path)
