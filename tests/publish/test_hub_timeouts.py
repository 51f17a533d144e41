"""A Hub that never answers, or that nothing listens for: ``convhub push`` ends in bounded time with one line.

``silent_hub`` accepts connections on 127.0.0.1 and never answers; ``refusing_hub`` is a port bound with nothing
listening (every connection is refused); ``unresolvable_hub`` is a host whose name the resolver refuses (at once,
in this process: nothing leaves the machine). Each test points ``HF_ENDPOINT`` (the client's and ``datasets``' copies,
which were read at import) at one of them for its duration, and runs the real CLI in a thread it can give up on,
so a regression fails the test instead of hanging the run.
"""

from __future__ import annotations

import socket
import threading
import time

import datasets.config
import pytest
from huggingface_hub import constants, get_session

import convhub.publish.push as push
from convhub.cli.main import main
from convhub.publish.hub_client import TIMEOUT_ENV, use_timeouts
from convhub.publish.push import RetryPolicy

REPO = "org/locomo-unified"


def point_at(monkeypatch, url: str) -> None:
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setattr(constants, "ENDPOINT", url)
    monkeypatch.setattr(datasets.config, "HF_ENDPOINT", url)


@pytest.fixture
def silent_hub(monkeypatch):
    """A server that accepts every connection and never answers; yields its URL and the connections it took."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    taken: list[socket.socket] = []

    def accept():
        while True:
            try:
                taken.append(server.accept()[0])
            except OSError:  # the server was closed: the test is over
                return

    threading.Thread(target=accept, daemon=True).start()
    url = f"http://127.0.0.1:{server.getsockname()[1]}"
    point_at(monkeypatch, url)
    yield url, taken
    server.close()
    for connection in taken:
        connection.close()


@pytest.fixture
def refusing_hub(monkeypatch):
    """A port bound with nothing listening: every connection to it is refused."""
    reserved = socket.socket()
    reserved.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{reserved.getsockname()[1]}"
    point_at(monkeypatch, url)
    yield url
    reserved.close()


@pytest.fixture
def unresolvable_hub(monkeypatch):
    """An endpoint whose host name does not resolve: ``socket.getaddrinfo`` answers as the system's resolver does
    for an unknown name, for that host alone."""
    host = "hub.convhub-test.invalid"
    resolve = socket.getaddrinfo

    def getaddrinfo(name, *args, **kwargs):
        if name == host:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return resolve(name, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    url = f"http://{host}"
    point_at(monkeypatch, url)
    return url


def run_cli(argv: list[str], limit: float) -> tuple[int | None, float]:
    """``main(argv)`` in a thread: its exit status (None if it still runs after ``limit`` s) and its duration."""
    outcome: list[int] = []
    started = time.monotonic()
    thread = threading.Thread(target=lambda: outcome.append(main(argv)), daemon=True)
    thread.start()
    thread.join(limit)
    return (outcome[0] if outcome else None), time.monotonic() - started


def push_argv(folder) -> list[str]:
    return ["push", "locomo", "--repo-id", REPO, "--folder", str(folder)]


@pytest.mark.slow
def test_push_to_a_hub_that_never_answers_ends_with_one_line(sample_builds, silent_hub, monkeypatch, capsys):
    url, taken = silent_hub
    monkeypatch.setenv(TIMEOUT_ENV, "0.3")
    waits: list[float] = []
    monkeypatch.setattr(push, "DEFAULT_RETRY", RetryPolicy(sleep=waits.append))

    code, elapsed = run_cli(push_argv(sample_builds["locomo"].output), limit=30)

    assert code == 1, "push still waiting on a server that never answers"
    assert elapsed < 15
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(
        f"convhub push: error: {REPO}@main: the Hub at {url} (HF_ENDPOINT) did not answer reading the repo "
        "within 0.3 s after 4 attempts"
    )
    assert TIMEOUT_ENV in err
    assert waits == [1, 2, 4]  # retried as a dropped connection is
    assert len(taken) >= 4  # each attempt reached the server


#: Endpoints no connection reaches (fixtures), and the words the error gives for why.
UNCONNECTABLE = [
    ("refusing_hub", "connection refused"),
    ("unresolvable_hub", "its host name does not resolve"),
]


@pytest.mark.parametrize(("hub", "why"), UNCONNECTABLE)
def test_push_to_an_unconnectable_endpoint_names_it_and_why_and_does_not_linger(
    sample_builds, hub, why, request, capsys
):
    url = request.getfixturevalue(hub)
    code, elapsed = run_cli(push_argv(sample_builds["locomo"].output), limit=30)

    assert code == 1
    assert elapsed < 4  # one quick retry (0.5 s), not the 1 + 2 + 4 s of a transient fault
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(
        f"convhub push: error: {REPO}@main: could not connect to the Hub at {url} (HF_ENDPOINT): "
        f"{why} on reading the repo after 2 attempts"
    )


def test_a_refused_connection_is_retried_once_after_a_short_wait(sample_builds, refusing_hub, monkeypatch):
    waits: list[float] = []
    monkeypatch.setattr(push, "DEFAULT_RETRY", RetryPolicy(sleep=waits.append))

    with pytest.raises(push.PushError) as raised:
        push.push_folder(sample_builds["locomo"].output, REPO, verify=False)

    assert raised.value.kind == "unreachable" and waits == [0.5]


def test_use_timeouts_bounds_every_request_and_keeps_a_shorter_limit_the_call_set(silent_hub, monkeypatch):
    import httpx2

    url, _ = silent_hub
    use_timeouts()
    session = get_session()
    use_timeouts()  # idempotent: the shared client is not replaced again
    assert get_session() is session

    monkeypatch.setenv(TIMEOUT_ENV, "0.2")
    started = time.monotonic()
    with pytest.raises(httpx2.ReadTimeout):
        session.get(f"{url}/api/datasets/{REPO}", timeout=None)  # what repo_info sends
    assert time.monotonic() - started < 5

    started = time.monotonic()
    with pytest.raises(httpx2.ReadTimeout):
        session.get(
            f"{url}/datasets/{REPO}/resolve/main/README.md", timeout=10
        )  # a HEAD's etag timeout: capped
    assert time.monotonic() - started < 5

    monkeypatch.setenv(TIMEOUT_ENV, "30")
    started = time.monotonic()
    with pytest.raises(httpx2.ReadTimeout):
        session.get(f"{url}/api/datasets/{REPO}", timeout=0.2)  # a shorter limit the call set is kept
    assert time.monotonic() - started < 5


def test_export_from_a_hub_that_never_answers_is_one_line_naming_it(
    silent_hub, monkeypatch, tmp_path, capsys
):
    url, taken = silent_hub
    monkeypatch.setenv(TIMEOUT_ENV, "0.3")

    code, elapsed = run_cli(["export", "locomo", "--from", REPO, "--output", str(tmp_path / "o")], limit=30)

    assert code == 1 and elapsed < 5, "export waited on the loaders' own retries"
    err = capsys.readouterr().err
    assert err == (
        f"convhub export: error: the Hub at {url} (HF_ENDPOINT) did not answer within 0.3 s "
        f"({TIMEOUT_ENV} sets the limit)\n"
    )
    assert taken and not (tmp_path / "o").exists()


@pytest.mark.parametrize(("hub", "why"), UNCONNECTABLE)
def test_export_from_an_unconnectable_endpoint_names_it_and_why(hub, why, request, tmp_path, capsys):
    url = request.getfixturevalue(hub)
    code, elapsed = run_cli(["export", "locomo", "--from", REPO, "--output", str(tmp_path / "o")], limit=30)

    assert code == 1 and elapsed < 4
    assert capsys.readouterr().err == (
        f"convhub export: error: could not connect to the Hub at {url} (HF_ENDPOINT): {why}\n"
    )
    assert not (tmp_path / "o").exists()
