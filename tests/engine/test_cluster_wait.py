"""The Spark test cluster's wait for its workers (``tests/support/spark_cluster._registered_workers``) reads the
master's web UI as it starts: an answer that is not yet the master's JSON is "not up yet" (0 workers), never an
exception that errors every cluster test at setup (as an HTML page once did in CI). The answers come from a socket
on 127.0.0.1 that sends fixed bytes; no Spark is started."""

from __future__ import annotations

import json
import socket
import threading

import pytest

from tests.support.spark_cluster import _registered_workers

MASTER = "spark://127.0.0.1:7077"


def json_answer(state: object) -> bytes:
    body = json.dumps(state).encode()
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        len(body),
        body,
    )


def answering(answer: bytes) -> socket.socket:
    """A listening socket on 127.0.0.1 that answers each connection with ``answer`` and closes it."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)

    def serve() -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:  # closed: the test is over
                return
            with connection:
                connection.recv(65536)
                connection.sendall(answer)

    threading.Thread(target=serve, daemon=True).start()
    return server


ALIVE = {"url": MASTER, "workers": [{"state": "ALIVE"}, {"state": "ALIVE"}, {"state": "DEAD"}]}


@pytest.mark.parametrize(
    ("answer", "workers"),
    [
        (json_answer(ALIVE), 2),
        (json_answer({**ALIVE, "url": "spark://127.0.0.1:7078"}), 0),  # another master's UI on the port
        (b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 13\r\n\r\n<html></html>", 0),
        (json_answer(ALIVE)[:-10], 0),  # cut short: http.client's IncompleteRead
        (b"not HTTP at all\r\n\r\n", 0),  # http.client's BadStatusLine
        (b"", 0),  # closed without a word: RemoteDisconnected
    ],
    ids=["alive", "another-master", "html", "cut", "not-http", "closed"],
)
def test_an_answer_that_is_not_yet_the_masters_json_counts_no_worker(answer, workers):
    server = answering(answer)
    try:
        assert _registered_workers(server.getsockname()[1], MASTER) == workers
    finally:
        server.close()
