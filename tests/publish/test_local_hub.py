"""``scripts/local_hub.py``: a user tries ``convhub push`` against a local Hub, as its printed line says to.

The script runs as a subprocess; the test reads the ``export`` line it prints, then runs the real CLI (``convhub
build --sample``, ``convhub push``) in fresh processes with exactly that environment, and reads what landed back
from the script's Hub over HTTP. Ctrl-C (SIGINT) stops the script with one line and status 130.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from huggingface_hub import HfApi

from convhub.publish.push import MANIFEST

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "local_hub.py"
CONVHUB = [sys.executable, "-c", "import sys; from convhub.cli.main import main; sys.exit(main())"]
REPO = "me/locomo-unified"


@pytest.fixture
def local_hub():
    """The script on a free port; yields (process, the variables its export line sets)."""
    process = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = [process.stdout.readline() for _ in range(3)]
        [export] = [line for line in lines if line.startswith("export ")]
        variables = dict(word.split("=", 1) for word in shlex.split(export)[1:])
        yield process, variables
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)
        process.stdout.close()
        process.stderr.close()


def run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180)


@pytest.mark.slow
def test_push_to_the_local_hub_lands_the_build_and_ctrl_c_stops_it(local_hub, tmp_path):
    process, variables = local_hub
    assert set(variables) == {"HF_ENDPOINT", "HF_TOKEN", "HF_HUB_DISABLE_XET"}
    assert variables["HF_ENDPOINT"].startswith("http://127.0.0.1:")
    env = {**os.environ, **variables, "HF_HOME": str(tmp_path / "hf-home")}
    output = tmp_path / "out" / "locomo-unified"

    built = run([*CONVHUB, "build", "locomo", "--sample", "--output", str(output)], env)
    assert built.returncode == 0, built.stderr
    pushed = run([*CONVHUB, "push", "locomo", "--repo-id", REPO, "--folder", str(output)], env)
    assert pushed.returncode == 0, pushed.stderr
    assert "verified sessions" in pushed.stdout

    api = HfApi(endpoint=variables["HF_ENDPOINT"], token=variables["HF_TOKEN"])
    remote = {
        entry.path: entry
        for entry in api.list_repo_tree(REPO, repo_type="dataset", recursive=True)
        if hasattr(entry, "blob_id")
    }
    local = {path.relative_to(output).as_posix(): path for path in output.rglob("*.parquet")}
    assert local and set(local) <= set(remote)
    for path, file in local.items():
        assert remote[path].lfs.sha256 == hashlib.sha256(file.read_bytes()).hexdigest(), path
    assert {"README.md", MANIFEST} <= set(remote)

    process.send_signal(signal.SIGINT)
    try:
        code = process.wait(30)
    except subprocess.TimeoutExpired:  # still running: its threads' stacks (the script dumps them on SIGUSR1)
        process.send_signal(signal.SIGUSR1)
        time.sleep(1)
        process.kill()
        pytest.fail(f"local_hub did not stop on SIGINT; its threads:\n{process.communicate()[1]}")
    assert code == 130
    err = process.stderr.read()
    assert err == "local_hub: stopped (1 repo dropped)\n"
    assert "Traceback" not in err


def test_a_port_in_use_is_one_line_and_exit_1():
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    try:
        result = subprocess.run(
            [sys.executable, str(SCRIPT), "--port", str(port)], capture_output=True, text=True, timeout=30
        )
    finally:
        taken.close()
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith(f"local_hub: error: cannot listen on 127.0.0.1:{port} (")
    assert result.stderr.count("\n") == 1


def test_a_bad_port_is_a_usage_error():
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--port", "70000"], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 2 and "--port" in result.stderr and "Traceback" not in result.stderr


def test_ctrl_c_stops_it_when_started_with_sigint_ignored():
    """A process started in the background of a script inherits SIGINT ignored: the script slept on through a
    Ctrl-C there (a CI run); it stops with its one line and 130 however it was started."""
    process = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        assert [process.stdout.readline() for _ in range(3)][1].startswith("export HF_ENDPOINT=")
        process.send_signal(signal.SIGINT)
        assert process.wait(30) == 130
        assert process.stderr.read() == "local_hub: stopped (0 repos dropped)\n"
    finally:
        if process.poll() is None:
            process.kill()
        process.stdout.close()
        process.stderr.close()


def test_ctrl_c_as_the_banner_is_printed_stops_it_with_its_line(monkeypatch, capfd):
    """The Ctrl-C test above sends SIGINT once it has read the banner's last line, which can be before the script
    returns from printing it: CI once saw the script die of the signal (-2) instead of stopping. Here the
    interrupt comes inside that print, every time."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("local_hub_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)

    def print_then_interrupt(*args, **kwargs):
        print(*args, **kwargs)
        if kwargs.get("flush"):  # the banner's last line
            raise KeyboardInterrupt

    monkeypatch.setattr(script, "print", print_then_interrupt, raising=False)
    try:
        status = script.main(["--port", "0"])
    except KeyboardInterrupt:  # uncaught, it would stop pytest itself
        pytest.fail("a Ctrl-C during the banner escaped main(): the script dies of the signal")
    assert status == 130
    output = capfd.readouterr()
    assert output.out.splitlines()[1].startswith("export HF_ENDPOINT=")
    assert output.err == "local_hub: stopped (0 repos dropped)\n"
