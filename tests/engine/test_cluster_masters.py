"""``check_reachable`` bounds a cluster master's first contact: a Kubernetes API server over https must also
finish its TLS handshake, so one that accepts connections and never answers is refused in seconds, not left to
stall Spark's client."""

from __future__ import annotations

import socket
import time

import pytest

from convhub.engine.runners import cluster_masters
from convhub.engine.runners.cluster_masters import check_reachable, contact
from convhub.errors import EngineError


@pytest.fixture
def silent_server():
    """A port on 127.0.0.1 that takes connections (the kernel accepts them into its backlog, as
    ``tests/install/test_downloads.py``'s stalled server) and never sends a byte."""
    with socket.create_server(("127.0.0.1", 0), backlog=8) as listener:
        yield listener.getsockname()[1]


def test_a_kubernetes_server_that_never_answers_tls_is_refused_in_seconds(silent_server, monkeypatch):
    monkeypatch.setattr(cluster_masters, "CONNECT_SECONDS", 0.5)
    master = f"k8s://https://127.0.0.1:{silent_server}"
    started = time.monotonic()
    with pytest.raises(EngineError) as refused:
        check_reachable(master)
    assert time.monotonic() - started < 10
    assert str(refused.value) == (
        f"--spark-master {master}: the cluster could not be reached: the Kubernetes API server does not answer "
        f"(127.0.0.1:{silent_server}: no answer within 0.5 s)"
    )


def test_only_https_asks_for_a_handshake(silent_server):
    assert contact(f"k8s://127.0.0.1:{silent_server}").tls  # type: ignore[union-attr]  (Spark's default: https)
    assert not contact(f"k8s://http://127.0.0.1:{silent_server}").tls  # type: ignore[union-attr]
    check_reachable(f"k8s://http://127.0.0.1:{silent_server}")  # a TCP answer is all plain http is asked
    assert not contact(f"spark://127.0.0.1:{silent_server}").tls  # type: ignore[union-attr]
