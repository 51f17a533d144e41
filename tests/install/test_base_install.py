"""A fresh install reaches the network: ``pip install .`` with no extra, then a build that downloads its source,
``check`` and ``export --from`` an http:// folder, each in a virtual environment of its own.

The base dependencies once lacked fsspec's HTTP file system (aiohttp), which only the test extras brought: a
fresh install's ``convhub build locomo --output y`` died in a 94-line traceback. These tests make a venv without
the system's site-packages, ``pip install`` a copy of this checkout into it (from PyPI, once per test session),
and run its ``convhub`` script. The source's host is a local HTTP server on 127.0.0.1 that serves the same path
under its host name (``CONVHUB_SOURCE_MIRROR``, docs/sources.md).
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from convhub.builders.locomo import builder as locomo

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
#: What a copy of the checkout leaves out: what git ignores, and the history.
NOT_COPIED = shutil.ignore_patterns(
    ".git", "build", "dist", "*.egg-info", "__pycache__", ".venv*", "venv", "out", ".*_cache", ".ci-venv"
)


@pytest.fixture(scope="session")
def base_install(tmp_path_factory) -> Path:
    """A venv holding convhub's base install only (no extra), made once per test session: its ``bin`` folder."""
    root = tmp_path_factory.mktemp("base-install")
    checkout = root / "checkout"  # pip builds in the folder it installs: a copy keeps build/ out of this one
    shutil.copytree(ROOT, checkout, ignore=NOT_COPIED)
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True)
    bin_folder = root / "venv" / "bin"
    installed = subprocess.run(
        [str(bin_folder / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(checkout)],
        capture_output=True, text=True, timeout=600, env=_clean_env(),
    )  # fmt: skip
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    return bin_folder


def _clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without what points Python at the checkout or the test venv."""
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**env, **extra}


class _Mirror(http.server.SimpleHTTPRequestHandler):
    """Serves a folder and remembers the paths asked for."""

    asked: list[str]

    def log_message(self, format, *args) -> None:
        self.asked.append(self.path)


@pytest.fixture
def mirror(tmp_path):
    """A local HTTP server over a folder holding LoCoMo's sample as ``raw.githubusercontent.com/...``, the
    default download's host and path: (its URL, its folder, the paths it was asked for)."""
    folder = tmp_path / "mirror"
    url_path = locomo.URL.split("://", 1)[1]
    (folder / url_path).parent.mkdir(parents=True)
    shutil.copyfile(Path(locomo.LocomoBuilder.sample_dir()) / "locomo_sample.json", folder / url_path)
    asked: list[str] = []
    handler = type("Handler", (_Mirror,), {"asked": asked})
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(folder))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", folder, asked
    server.shutdown()
    server.server_close()


def convhub(bin_folder: Path, *args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(bin_folder / "convhub"), *args], capture_output=True, text=True, cwd=cwd, timeout=300,
        env=_clean_env(HF_HOME=str(cwd / "hf-home"), **env),
    )  # fmt: skip


def test_the_base_install_has_no_test_extra(base_install):
    probe = "import importlib.util as u; print([m for m in ('pytest', 'moto', 's3fs', 'pyspark') if u.find_spec(m)])"
    found = subprocess.run(
        [str(base_install / "python"), "-c", probe], capture_output=True, text=True, env=_clean_env()
    )
    assert found.stdout.strip() == "[]", found.stdout + found.stderr


def test_a_build_downloads_its_source_in_a_base_install(base_install, mirror, tmp_path):
    url, _, asked = mirror
    done = convhub(base_install, "build", "locomo", "--output", "y", cwd=tmp_path, CONVHUB_SOURCE_MIRROR=url)
    assert done.returncode == 0, done.stderr
    sample = json.loads(
        (Path(locomo.LocomoBuilder.sample_dir()) / "locomo_sample.json").read_text(encoding="utf-8")
    )
    sessions = pq.read_table(tmp_path / "y" / "sessions").to_pylist()
    assert sorted(row["conversation_id"] for row in sessions) == sorted(each["sample_id"] for each in sample)
    assert "/" + locomo.URL.split("://", 1)[1] in asked
    checked = convhub(base_install, "check", "locomo", cwd=tmp_path, CONVHUB_SOURCE_MIRROR=url)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.startswith("locomo: OK")


def test_export_reads_a_build_over_http_in_a_base_install(base_install, mirror, tmp_path):
    url, folder, _ = mirror
    built = convhub(
        base_install, "build", "locomo", "--sample", "--output", str(folder / "built"), cwd=tmp_path
    )
    assert built.returncode == 0, built.stderr
    done = convhub(
        base_install, "export", "locomo", "--from", f"{url}/built", "--output", "restored", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    sample = Path(locomo.LocomoBuilder.sample_dir()) / "locomo_sample.json"
    restored = tmp_path / "restored" / sample.name  # the sample's file, under its own name
    assert json.loads(restored.read_text(encoding="utf-8")) == json.loads(sample.read_text(encoding="utf-8"))


def test_a_missing_file_says_404_in_one_line(base_install, mirror, tmp_path):
    url, _, _ = mirror
    done = convhub(
        base_install, "build", "locomo", "--output", "y", cwd=tmp_path, CONVHUB_SOURCE_MIRROR=f"{url}/gone"
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"convhub build: error: could not download {url}/gone/{locomo.URL.split('://', 1)[1]}: the server answered "
        f"404 File not found (CONVHUB_SOURCE_MIRROR is {url}/gone)"
    ]
    assert not (tmp_path / "y").exists()


@pytest.mark.skipif(
    not Path("/proc/self/maps").exists(), reason="finds the imports under way in /proc/PID/maps"
)
def test_ctrl_c_while_the_installed_script_imports_is_one_line_and_130(base_install, tmp_path):
    """SIGINT while the ``convhub`` script imports its libraries (numpy's extension is mapped, the build's
    imports are under way): one line and 130, not Python's traceback and a process killed by SIGINT (-2)."""
    process = subprocess.Popen(
        [str(base_install / "convhub"), "build", "locomo", "--sample", "--output", "y"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=_clean_env(),
    )  # fmt: skip
    deadline = time.monotonic() + 60
    maps = Path(f"/proc/{process.pid}/maps")
    while "_multiarray_umath" not in maps.read_text(errors="replace"):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.002)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == "convhub build: interrupted; nothing was written", stderr
    assert "Traceback" not in stderr
    assert not (tmp_path / "y").exists()
