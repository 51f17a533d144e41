"""A small OpenAI-compatible judge on 127.0.0.1 for ``convhub score``'s tests: ``POST /v1/chat/completions``.

It reads LongMemEval's judge prompt it is sent, takes the gold text (``Correct Answer:``, ``Rubric:`` or
``Explanation:``) and the ``Model Response:``, and answers "Yes." when the response holds the gold text
(case-insensitive), else "No." — a deterministic judge, so that tests know each label. Every request's
body and headers are recorded; ``fail_with`` makes it answer an HTTP status instead, ``reply`` a fixed body.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

PARTS = re.compile(
    r"\n\n(?:Correct Answer|Rubric|Explanation): (?P<gold>.*?)\n\nModel Response: (?P<response>.*?)\n\n", re.S
)


@dataclass
class JudgeDouble:
    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    fail_with: int | None = None
    reply: bytes | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def verdict(self, prompt: str) -> str:
        found = PARTS.search(prompt)
        if not found:
            return "No."
        return "Yes." if found["gold"].strip().lower() in found["response"].lower() else "No."


def start(double: JudgeDouble) -> tuple[ThreadingHTTPServer, str]:
    """Serve ``double`` on a free loopback port; returns the server and its base URL (``.../v1``)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # quiet tests
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with double.lock:
                double.requests.append(body)
                double.headers.append(dict(self.headers))
            if self.path != "/v1/chat/completions":
                return self._send(404, b'{"error": "no such route"}')
            if double.fail_with:
                return self._send(double.fail_with, b'{"error": "the judge double fails on purpose"}')
            if double.reply is not None:
                return self._send(200, double.reply)
            content = double.verdict(body["messages"][0]["content"])
            completion = {
                "id": "judge-double",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
            }
            self._send(200, json.dumps(completion).encode())

        def _send(self, status: int, payload: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"


@pytest.fixture
def judge():
    """The judge double serving on 127.0.0.1 (its base URL in ``.url``); a test module loads this module as a
    plugin (``pytest_plugins = ["judge_double"]``) to use it."""
    double = JudgeDouble()
    server, double.url = start(double)
    yield double
    server.shutdown()
    server.server_close()
