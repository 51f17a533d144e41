"""Shared fixtures: sample builds made once per test session, the Hub double and the S3 server, and the markers a
test gets from the fixtures it uses. Helper functions and the doubles themselves are in ``tests/support/``."""

from __future__ import annotations

import os

import pytest

from tests.support import hub_double
from tests.support.hub_double import HUB_TOKEN

# Before anything imports huggingface_hub (which reads HF_ENDPOINT once, at import): the whole test session
# talks to a loopback Hub double only, with a temporary HF_HOME (see tests/support/hub_double.py).
HUB_SOCKET = hub_double.isolate_from_real_hub()

from convhub import registry  # noqa: E402
from convhub.engine.build import build_source  # noqa: E402

#: The markers a test gets from the fixtures it uses, itself or through other fixtures (``pytest_itemcollected``
#: below), so that every test, also one added tomorrow, can be chosen by what it needs: ``-m "not spark"``.
MARKERS_BY_FIXTURE = {
    "spark": ("spark", "cluster_builds"),  # engine/test_spark.py's local[2] session, the standalone cluster
    "s3": ("s3_endpoint",),  # every S3 fixture (bucket, s3_bucket) starts from it
    "hub": ("_hub_server", "local_hub"),  # the Hub double in this process (hub), scripts/local_hub.py
}


#: Fixtures that start a server the quick run (``-m "not slow"``) does without, so a test that uses one is ``slow``
#: as well: a JVM (a Spark session takes 10-30 s to start) and moto's S3 server (its start and every round trip
#: through it: 37 tests were 18% of the quick run's CPU; ``-m s3`` runs them alone).
SLOW_FIXTURES = ("spark", "cluster_builds", "s3_endpoint")


def pytest_itemcollected(item: pytest.Item) -> None:
    """Mark a test ``spark``, ``s3`` or ``hub`` when it uses a fixture that starts one (pyproject registers them),
    and ``slow`` when it uses one of ``SLOW_FIXTURES``."""
    used = set(getattr(item, "fixturenames", ()))
    for marker, fixtures in {**MARKERS_BY_FIXTURE, "slow": SLOW_FIXTURES}.items():
        if used.intersection(fixtures):
            item.add_marker(marker)


@pytest.fixture(scope="session")
def sample_builds(tmp_path_factory) -> dict:
    """Every registered source built from its packaged sample files, once per test session."""
    root = tmp_path_factory.mktemp("sample-builds")
    results = {}
    for name in registry.names():
        builder_cls = registry.get(name)
        results[name] = build_source(name, root / builder_cls.HUB_NAME, data_dir=builder_cls.sample_dir())
    return results


@pytest.fixture
def bucket(s3_bucket):
    """A new bucket on the real S3 API of the tests (``s3_bucket``), as the folder convhub makes of a URL: an
    object store (no local paths, no folders, no rename), removed after the test."""
    from convhub.storage.folders import folder_at

    root = folder_at(s3_bucket)
    yield root
    root.fs.rm(root.path, recursive=True)


@pytest.fixture(scope="session")
def _hub_server():
    """The Hub double, listening on the port HF_ENDPOINT names for the whole session."""
    import huggingface_hub.constants

    server = hub_double.HubDouble(token=HUB_TOKEN, sock=HUB_SOCKET).start()
    if server.url != huggingface_hub.constants.ENDPOINT:
        pytest.fail(f"huggingface_hub was imported before conftest set HF_ENDPOINT to {server.url}")
    yield server
    server.stop()


@pytest.fixture
def hub(_hub_server, monkeypatch) -> hub_double.HubDouble:
    """A clean Hub double for one test, with the fake token in HF_TOKEN (read first by huggingface_hub)."""
    _hub_server.reset()
    monkeypatch.setenv("HF_TOKEN", HUB_TOKEN)
    yield _hub_server
    _hub_server.reset()


@pytest.fixture(scope="session")
def s3_endpoint():
    """A real S3 API on 127.0.0.1 for the whole session (moto's server mode, ``tests/support/s3_server.py``): its
    endpoint URL, with this process's S3 clients (s3fs, botocore) and any subprocess pointed at it."""
    import logging

    from tests.support.s3_server import s3_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # the server's line per request
    with s3_server() as endpoint:
        yield endpoint


@pytest.fixture
def s3_bucket(s3_endpoint, request) -> str:
    """A new bucket on the S3 server for one test: its URL (``s3://NAME``)."""
    import re

    from tests.support.s3_server import new_bucket

    name = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:50] + "-" + os.urandom(3).hex()
    return new_bucket(name)
