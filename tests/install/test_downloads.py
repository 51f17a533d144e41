"""A source's default download (no ``--data-dir``) in the test environment: served from a mirror on 127.0.0.1
(``CONVHUB_SOURCE_MIRROR``), and each way it fails told in its one line: the server's 404, a refused
connection, a host that does not resolve, a server that accepts the connection and never answers (stalled)."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from convhub.builders.locomo import builder as locomo
from convhub.cli import main as cli
from convhub.engine.inputs import downloads

ROOT = Path(__file__).resolve().parents[2]
LOCOMO_PATH = locomo.URL.split("://", 1)[
    1
]  # raw.githubusercontent.com/snap-research/LoCoMo/main/data/locomo10.json


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args) -> None:  # the server's log is not the command's stderr
        pass


@pytest.fixture
def mirror(tmp_path):
    """A local HTTP server whose folder holds LoCoMo's sample under the default URL's host and path: its URL."""
    folder = tmp_path / "mirror"
    (folder / LOCOMO_PATH).parent.mkdir(parents=True)
    shutil.copyfile(Path(locomo.LocomoBuilder.sample_dir()) / "locomo_sample.json", folder / LOCOMO_PATH)
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_mirror_keeps_the_host_and_path(monkeypatch):
    monkeypatch.delenv(downloads.MIRROR_ENV, raising=False)
    assert downloads.source_url(locomo.URL) == locomo.URL
    monkeypatch.setenv(downloads.MIRROR_ENV, "http://127.0.0.1:9/copies/")
    assert downloads.source_url(locomo.URL) == f"http://127.0.0.1:9/copies/{LOCOMO_PATH}"
    assert (
        downloads.source_url("https://h.example/a.zip?x=1") == "http://127.0.0.1:9/copies/h.example/a.zip?x=1"
    )


def test_a_build_without_data_dir_downloads_from_the_mirror(mirror, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(downloads.MIRROR_ENV, mirror)
    assert cli.main(["build", "locomo", "--output", str(tmp_path / "y"), "--config", "sessions"]) == 0
    assert pq.read_table(tmp_path / "y" / "sessions").num_rows == 2
    capsys.readouterr()
    assert cli.main(["check", "locomo"]) == 0
    assert capsys.readouterr().out.startswith("locomo: OK")


def one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_a_missing_file_says_what_the_server_answered(mirror, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(downloads.MIRROR_ENV, f"{mirror}/elsewhere")
    assert cli.main(["build", "locomo", "--output", str(tmp_path / "y")]) == 1
    assert one_line(capsys) == (
        f"convhub build: error: could not download {mirror}/elsewhere/{LOCOMO_PATH}: the server answered 404 File "
        f"not found ({downloads.MIRROR_ENV} is {mirror}/elsewhere)"
    )
    assert [path.name for path in tmp_path.iterdir()] == ["mirror"]  # no output, no staging folder


def test_a_refused_connection_and_an_unknown_host_are_said(tmp_path, monkeypatch, capsys):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens there once closed
    monkeypatch.setenv(downloads.MIRROR_ENV, f"http://127.0.0.1:{port}")
    assert cli.main(["check", "locomo"]) == 1
    assert one_line(capsys).endswith(f"{LOCOMO_PATH}: connection refused (nothing listens there) "
                                     f"({downloads.MIRROR_ENV} is http://127.0.0.1:{port})")  # fmt: skip
    monkeypatch.setenv(downloads.MIRROR_ENV, "http://no-such-host.invalid")
    assert cli.main(["check", "locomo"]) == 1
    assert "its host name does not resolve (no network, or an unknown host)" in one_line(capsys)


@pytest.mark.slow
def test_a_stalled_server_is_said_to_have_stalled(tmp_path):
    """A server that accepts the connection and sends nothing: the command ends after CONVHUB_DOWNLOAD_TIMEOUT
    and says so (in a process of its own: fsspec keeps its HTTP sessions, and their timeouts, per process)."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # connections are accepted by the kernel, and never answered
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            downloads.MIRROR_ENV: url,
            downloads.TIMEOUT_ENV: "1",
        }
        done = subprocess.run(
            [sys.executable, "-m", "convhub.cli", "build", "locomo", "--output", "y"],
            capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
        )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"convhub build: error: could not download {url}/{LOCOMO_PATH}: the server stalled: no answer within 1 s "
        f"(timed out; {downloads.TIMEOUT_ENV} sets the limit) ({downloads.MIRROR_ENV} is {url})"
    ]
