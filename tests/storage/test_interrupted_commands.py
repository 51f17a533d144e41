"""Ctrl-C at a few moments of ``build`` (``--num-proc 2``), ``export``, ``mix`` and ``score`` (issue #54): one
line, exit 130, no process of the command left, and the output an earlier run wrote there exactly as it was.

Each command is a real ``convhub`` subprocess in a session of its own; SIGINT goes to its whole process group,
as a terminal sends it, at fixed delays after the start (from its imports to the middle of its work). A command
that ends before the signal must have ended well (status 0).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import time
from pathlib import Path

import pytest
import scaled_inputs  # (a benchmark module: its folder is put on the path above)

from convhub import registry
from convhub.export.exporter import open_build
from tests.support.running_commands import in_session, start, still_running

pytestmark = pytest.mark.slow

#: Seconds after the start at which SIGINT is sent.
DELAYS = (0.5, 2.0, 4.0)
#: Seconds a command may take to stop once interrupted, and its processes to go.
STOP_SECONDS = 60


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    """A LoCoMo input big enough to take seconds at each step (a quarter of the benchmark's), built once; the
    predictions and mix recipe the other commands read."""
    root = tmp_path_factory.mktemp("interrupted")
    data = scaled_inputs.make("locomo", root / "data", 0.25).data_dir
    built = root / "built"
    finished(["build", "locomo", "--data-dir", str(data), "--output", str(built), "--num-proc", "2"], root)
    predictions = root / "predictions.jsonl"
    with open(predictions, "w", encoding="utf-8") as handle:
        for _, row in open_build(built).all_rows("qa"):
            handle.write(json.dumps({"question_id": row["question_id"], "prediction": "no idea"}) + "\n")
    recipe = root / "recipe.yaml"
    recipe.write_text(f"config: messages\nsources: [{{path: {built}, split: test, repeat: 20}}]\n")
    return {"data": data, "built": built, "predictions": predictions, "recipe": recipe, "root": root}


def finished(args: list[str], cwd: Path) -> None:
    """``convhub ARGS`` run to its end, successfully."""
    log = cwd / "finished.stderr"
    process = start(args, log, cwd)
    assert process.wait(timeout=600) == 0, log.read_text()


def runs(command: str, inputs: dict[str, Path], tmp_path: Path, output: Path) -> tuple[list[str], list[str]]:
    """The run of ``command`` that writes the earlier output (from LoCoMo's sample), and the one interrupted
    (from the big input)."""
    sample = str(registry.get("locomo").sample_dir())
    if command == "build":
        return (
            ["build", "locomo", "--data-dir", sample, "--output", str(output)],
            [
                "build",
                "locomo",
                "--data-dir",
                str(inputs["data"]),
                "--output",
                str(output),
                "--num-proc",
                "2",
            ],
        )
    if command == "score":
        score = [
            "score",
            "locomo",
            "--data",
            str(inputs["built"]),
            "--predictions",
            str(inputs["predictions"]),
        ]
        return [*score, "--output", str(output)], [*score, "--output", str(output)]
    sample_build = tmp_path / "sample-build"
    finished(["build", "locomo", "--data-dir", sample, "--output", str(sample_build)], tmp_path)
    if command == "export":
        return (
            ["export", "locomo", "--from", str(sample_build), "--output", str(output)],
            ["export", "locomo", "--from", str(inputs["built"]), "--output", str(output)],
        )
    small = tmp_path / "small-recipe.yaml"
    small.write_text(f"config: messages\nsources: [{{path: {sample_build}, split: test}}]\n")
    return ["mix", str(small), "--output", str(output)], [
        "mix",
        str(inputs["recipe"]),
        "--output",
        str(output),
    ]


def snapshot(path: Path) -> dict[str, str]:
    """Every file at ``path`` (a folder or one file) by its relative name: its sha256."""
    files = [path] if path.is_file() else sorted(item for item in path.rglob("*") if item.is_file())
    return {
        str(item.relative_to(path.parent)): hashlib.sha256(item.read_bytes()).hexdigest() for item in files
    }


@pytest.mark.parametrize("delay", DELAYS)
@pytest.mark.parametrize("command", ["build", "export", "mix", "score"])
def test_ctrl_c_is_one_line_status_130_no_process_left_and_the_earlier_output_intact(
    inputs, tmp_path, command, delay
):
    output = tmp_path / ("report.json" if command == "score" else "out")
    earlier, interrupted = runs(command, inputs, tmp_path, output)
    finished(earlier, tmp_path)
    before = snapshot(output)

    log = tmp_path / "interrupted.stderr"
    process = start(interrupted, log, tmp_path)
    time.sleep(delay)
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
    status = process.wait(timeout=STOP_SECONDS)
    stderr = log.read_text()
    assert still_running(in_session(process.pid), STOP_SECONDS) == set()  # no worker left
    if status == 0:  # it ended before the signal: a whole new output (the same, for score)
        pytest.skip(f"{command} ended within {delay} s, before Ctrl-C")
    lines = [line for line in stderr.replace("\r", "\n").splitlines() if line.strip()]
    assert status == 130, stderr
    assert lines[-1].startswith(f"convhub {command}: interrupted"), stderr
    assert sum("interrupted" in line for line in lines) == 1, stderr
    assert "Traceback" not in stderr, stderr
    assert snapshot(output) == before  # the earlier output, untouched
    leftovers = sorted(name for name in os.listdir(tmp_path) if name.startswith(f".{output.name}"))
    assert leftovers == []  # no staging or temporary file beside it
