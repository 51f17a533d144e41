"""Ctrl-C during a build: one line, ``convhub build: interrupted; nothing was written``, exit status 130, and
nothing left behind, in one process and with worker processes (``--num-proc 2``).

Before, one process printed a 70-line ``KeyboardInterrupt`` traceback, and with workers each process printed
its own and the command ended in ``multiprocess.context.TimeoutError`` with status 1. The command runs in a
process group of its own and the whole group gets SIGINT, as a terminal sends it on Ctrl-C.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from convhub.builders.locomo.builder import LocomoBuilder

ROOT = Path(__file__).resolve().parents[2]
FILES, COPIES = 4, 4000  # about 10 s of building on one core: long enough to be stopped in the middle


@pytest.fixture(scope="module")
def big_locomo(tmp_path_factory) -> Path:
    """LoCoMo files of the sample's conversations many times over, each copy with an id of its own."""
    folder = tmp_path_factory.mktemp("big-locomo")
    with open(Path(LocomoBuilder.sample_dir()) / "locomo_sample.json", encoding="utf-8") as handle:
        samples = json.load(handle)
    for number in range(FILES):
        copies = []
        for index in range(COPIES // len(samples)):
            for sample in samples:
                copied = copy.deepcopy(sample)
                copied["sample_id"] = f"{sample['sample_id']}-{number}-{index}"
                copies.append(copied)
        (folder / f"part{number}.json").write_text(json.dumps(copies), encoding="utf-8")
    return folder


def interrupted_build(data: Path, output: Path, *options: str) -> tuple[int, str, float]:
    """Start a build, send its process group SIGINT once its first progress bar shows; its exit status,
    its stderr and the seconds it took to stop."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    log = output.parent / f"{output.name}.stderr"
    with open(log, "w+", encoding="utf-8") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "convhub.cli.main", "build", "locomo", "--data-dir", str(data), "--config", "sessions",
             "--output", str(output), *options],
            stdout=subprocess.DEVNULL, stderr=stderr, env=env, cwd=output.parent, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while "locomo sessions test" not in log.read_text(encoding="utf-8"):
            assert process.poll() is None, log.read_text(encoding="utf-8")
            assert time.monotonic() < deadline, "the build never started"
            time.sleep(0.05)
        time.sleep(0.5)  # into the work
        assert process.poll() is None, "the build ended before it could be interrupted: make its input bigger"
        os.killpg(process.pid, signal.SIGINT)
        sent = time.monotonic()
        status = process.wait(timeout=60)
        return status, log.read_text(encoding="utf-8"), time.monotonic() - sent


@pytest.mark.slow
@pytest.mark.parametrize("processes", ["1", "2"])
def test_ctrl_c_is_one_line_status_130_and_leaves_nothing(big_locomo, tmp_path, processes):
    output = tmp_path / "out"
    status, stderr, took = interrupted_build(big_locomo, output, "--num-proc", processes)
    lines = [line for line in stderr.replace("\r", "\n").splitlines() if line.strip()]
    assert lines[-1] == "convhub build: interrupted; nothing was written", stderr
    assert status == 130, stderr
    assert "Traceback" not in stderr and "Error" not in stderr, stderr
    assert sum("interrupted" in line for line in lines) == 1, stderr
    assert took < 30, took
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "out.stderr"
    ]  # no output, staging, quarantine


#: A command whose import of ``convhub.cli.main`` is broken by Ctrl-C as Python sometimes reports it: wrapped in
#: the RuntimeError a class body's ``__set_name__`` raises from it (seen at 0.5 s: a traceback and status 1).
WRAPPED_INTERRUPT = """
import sys

class Interrupted:
    def find_spec(self, name, path=None, target=None):
        if name == "convhub.cli.main":
            raise RuntimeError("Error calling __set_name__") from KeyboardInterrupt()
        return None

sys.meta_path.insert(0, Interrupted())
sys.argv = ["convhub", "build", "locomo", "--sample", "--output", "out"]
from convhub.cli.entry import console_main
console_main()
"""


def test_ctrl_c_wrapped_by_the_import_it_broke_is_one_line_and_130(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", WRAPPED_INTERRUPT], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr.splitlines() == ["convhub build: interrupted; nothing was written"]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_the_command_line_is_read_without_importing_scipy():
    """scipy (BEAM's Kendall tau) loads extension modules for a second: a Ctrl-C in its import was reported as
    "ImportError: initialization failed". Only a BEAM score imports it, not every command's start."""
    code = (
        "import sys\n"
        "from convhub.cli import main\n"
        "print(main.parse(['mix', 'recipe.yaml', '--output', 'out']).command)\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] == 'scipy'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.stdout.splitlines() == ["mix", "[]"], done.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    "phase, command, line",
    [
        (
            "parse",
            ["build", "locomo", "--sample", "--output", "out"],
            "convhub build: interrupted; nothing was written",
        ),
        (
            "run",
            ["build", "locomo", "--sample", "--output", "out"],
            "convhub build: interrupted; nothing was written",
        ),
        (
            "run",
            ["score", "locomo", "--data", "d", "--predictions", "p", "--output", "r"],
            "convhub score: interrupted",
        ),
    ],
)
def test_ctrl_c_inside_a_strings_exec_exits_130_not_by_sigint(tmp_path, phase, command, line):
    """A Ctrl-C that lands in ``exec`` of a string (a dataclass being made by a module imported as the command
    starts or runs) is handled as any other: ``python -m`` ended by SIGINT (status -2) after the line."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        [sys.executable, "-m", "tests.cli.ctrl_c_in_exec", phase, *command],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 130, done.stderr
    assert done.stderr.splitlines() == [line]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
@pytest.mark.parametrize(
    "command, modules",
    [
        (["build", "locomo", "--sample", "--output", "out"], ["convhub.build", "scipy.io"]),
        (["score", "locomo", "--data", "d", "--predictions", "p", "--output", "r"], ["nltk.stem"]),
    ],
    ids=["build", "score-locomo"],
)
def test_what_a_command_imports_as_its_work_starts_is_imported_while_ctrl_c_is_held(command, modules):
    """``datasets`` imports ``scipy.io`` for each builder it makes (its streaming patch), and LoCoMo's F1 stems with
    nltk, whose import (some 800 modules) took seconds of a loaded machine inside the score's work: a Ctrl-C in
    their extension modules' initialization (scipy's pybind11 ones) was an ImportError. ``import_before_work`` (in
    ``cli.entry``'s held window) imports them first."""
    code = (
        "import sys\n"
        "from convhub.cli import entry, main\n"
        f"args = main.parse({command!r})\n"
        f"before = set({modules!r}) & set(sys.modules)\n"
        "entry.import_before_work(args)\n"
        f"print(sorted(before), sorted(set({modules!r}) & set(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.stdout.splitlines() == [f"[] {sorted(modules)}"], done.stderr
