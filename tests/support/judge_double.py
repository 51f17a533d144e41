"""A small OpenAI-compatible judge on 127.0.0.1 for ``convhub score``'s tests: ``POST /v1/chat/completions``.

It reads the judge prompt it is sent and answers deterministically, so that tests know each label:

- LongMemEval's prompt (and GigaMemory's, the same): the gold text (``Correct Answer:``, ``Rubric:`` or
  ``Explanation:``) and the ``Model Response:``; "Yes." when the response holds the gold (case-insensitive).
- mem0's LoCoMo prompt (a request with ``response_format``): ``Gold answer:`` and ``Generated answer:``;
  ``{"label": "CORRECT"}`` when the generated answer holds the gold, else ``{"label": "WRONG"}``.

Every request's raw body, parsed body and headers are recorded. The ways an endpoint misbehaves, each set on
the double by a test: ``fail_with`` (a status, for the first ``fail_times`` requests, those after the
first ``fail_from``, or all, with ``retry_after`` as the header), ``reply`` (a fixed 200 body: garbage, an empty choice list, deep nesting),
``delay`` (seconds before answering), ``trickle`` (the reply one byte per that many seconds), ``hang`` (never
answer), ``endless`` (a 200 body that never ends), ``echo_headers`` (the error body holds the request's
headers), ``verdict_case`` (a function applied to the verdict's text, e.g. ``str.lower``) and ``usage``
(token counts added to every reply). ``most_in_flight`` is the most requests it was answering at once.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

PARTS = re.compile(
    r"\n\n(?:Correct Answer|Rubric|Explanation): (?P<gold>.*?)\n\nModel Response: (?P<response>.*?)\n\n", re.S
)
MEM0_PARTS = re.compile(
    r"\nGold answer: (?P<gold>[^\n]*)\nGenerated answer: (?P<response>.*?)\n\nFirst, ", re.S
)


@dataclass
class JudgeDouble:
    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    raw: list[bytes] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    fail_with: int | None = None
    fail_times: int | None = None
    fail_from: int | None = None
    retry_after: str | None = None
    reply: bytes | None = None
    delay: float = 0.0
    trickle: float | None = None
    hang: bool = False
    endless: bool = False
    echo_headers: bool = False
    verdict_case: Callable[[str], str] = str
    usage: dict[str, int] | None = None
    arrival: list[float] = field(default_factory=list)
    in_flight: int = 0
    most_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    released: threading.Event = field(default_factory=threading.Event)

    def verdict(self, body: dict[str, Any]) -> str:
        prompt = body["messages"][0]["content"]
        if "response_format" in body:
            found = MEM0_PARTS.search(prompt)
            correct = bool(found) and found["gold"].strip().lower() in found["response"].lower()
            return json.dumps({"label": self.verdict_case("CORRECT" if correct else "WRONG")})
        found = PARTS.search(prompt)
        correct = bool(found) and found["gold"].strip().lower() in found["response"].lower()
        return self.verdict_case("Yes." if correct else "No.")


def start(double: JudgeDouble) -> tuple[ThreadingHTTPServer, str]:
    """Serve ``double`` on a free loopback port; returns the server and its base URL (``.../v1``)."""

    class Handler(BaseHTTPRequestHandler):
        answering = False  # this request is counted in in_flight

        def log_message(self, *args) -> None:  # quiet tests
            pass

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers["Content-Length"]))
            with double.lock:
                double.raw.append(raw)
                double.requests.append(json.loads(raw))
                double.headers.append(dict(self.headers))
                double.paths.append(self.path)
                double.arrival.append(time.monotonic())
                number = len(double.requests)
                double.in_flight += 1
                double.most_in_flight = max(double.most_in_flight, double.in_flight)
            self.answering = True
            try:
                self._answer(number, raw)
            finally:
                self._answered()

        def _answered(self) -> None:
            """The request leaves ``in_flight`` before its reply's first byte: once the client has read the reply
            it may send its next request, which must not find this one still counted (seen under load: 3 of 2)."""
            if self.answering:
                with double.lock:
                    double.in_flight -= 1
                self.answering = False

        def _answer(self, number: int, raw: bytes) -> None:
            if self.path.partition("?")[0] != "/v1/chat/completions":  # a query (api-version) is allowed
                return self._send(404, b'{"error": "no such route"}')
            if double.hang:
                double.released.wait()
                return None
            if double.delay:
                time.sleep(double.delay)
            failing = (double.fail_times is None or number <= double.fail_times) and (
                double.fail_from is None or number > double.fail_from
            )
            if double.fail_with and failing:
                payload = b'{"error": "the judge double fails on purpose"}'
                if double.echo_headers:
                    payload = json.dumps({"error": "echo", "headers": dict(self.headers)}).encode()
                extra = {"Retry-After": double.retry_after} if double.retry_after else {}
                return self._send(double.fail_with, payload, extra)
            if double.endless:
                return self._endless()
            if double.reply is not None:
                return self._send(200, double.reply)
            body = json.loads(raw)
            completion: dict[str, Any] = {
                "id": "judge-double",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": double.verdict(body)}}],
            }
            if double.usage:
                completion["usage"] = double.usage
            self._send(200, json.dumps(completion).encode())

        def _send(self, status: int, payload: bytes, extra: dict[str, str] | None = None) -> None:
            self._answered()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for name, value in (extra or {}).items():
                self.send_header(name, value)
            self.end_headers()
            if double.trickle is None:
                self.wfile.write(payload)
                return
            for byte in payload:  # a byte at a time: each read is quick, the whole reply is not
                if double.released.is_set():
                    return
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(double.trickle)

        def _endless(self) -> None:
            self._answered()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()  # no length: the body runs until the connection closes
            chunk = b'{"choices": [' + b" " * 65_536
            try:
                while not double.released.is_set():
                    self.wfile.write(chunk)
            except OSError:  # the client hung up, as it should
                return

    class QuietServer(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request, client_address) -> None:  # a client hanging up mid-reply, on purpose
            pass

    server = QuietServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"


@pytest.fixture
def judge(tmp_path_factory, monkeypatch):
    """The judge double serving on 127.0.0.1 (its base URL in ``.url``); a test module loads this module as a
    plugin (``pytest_plugins = ["tests.support.judge_double"]``) to use it. The judge cache's default folder is a fresh
    temporary one (``XDG_CACHE_HOME``), so that no test reads or writes the user's cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
    double = JudgeDouble()
    server, double.url = start(double)
    yield double
    double.released.set()
    server.shutdown()
    server.server_close()
