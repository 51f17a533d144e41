"""Refusing an output is one kind of failure, with one exit status in every command: 2, "the command line cannot
run as given" (``convhub.cli.errors.USAGE``), as argparse itself exits for an ``--output`` it refuses (a URL where
a local folder is needed). Before, ``score`` exited 2 and ``build``, ``export``, ``mix`` and ``check`` 1.

Each command runs as a real ``convhub`` process; the user's files stay as they were."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from convhub.cli.errors import USAGE
from tests.support.running_commands import command_env

WORK = "years of work"


def _users(path: Path) -> Path:
    """A folder of the user's (one file of theirs in it), or the file itself where ``path`` ends in a suffix."""
    if path.suffix:
        path.write_text(WORK, encoding="utf-8")
        return path
    path.mkdir()
    (path / "thesis.tex").write_text(WORK, encoding="utf-8")
    return path


def _untouched(path: Path) -> bool:
    return (path if path.is_file() else path / "thesis.tex").read_text(encoding="utf-8") == WORK


def _argv(command: str, build: Path, target: Path, tmp_path: Path) -> list[str]:
    """The command line of ``command`` that names the user's ``target`` as what it writes."""
    if command == "build":
        return ["build", "locomo", "--sample", "--output", str(target)]
    if command == "check":
        return ["check", "locomo", "--sample", "--on-bad-record", "skip", "--quarantine", str(target)]
    if command == "export":
        return ["export", "locomo", "--from", str(build), "--output", str(target)]
    if command == "mix":
        recipe = tmp_path / "recipe.yaml"
        recipe.write_text(
            f"name: m\nconfig: messages\nsplit: test\nsources:\n  - name: locomo\n    path: {build}\n",
            encoding="utf-8",
        )
        return ["mix", str(recipe), "--output", str(target)]
    predictions = tmp_path / "answers.jsonl"
    predictions.write_text('{"question_id": "q", "prediction": "p"}\n', encoding="utf-8")
    return [
        "score",
        "locomo",
        "--data",
        str(build),
        "--predictions",
        str(predictions),
        "--output",
        str(target),
    ]


@pytest.mark.slow
@pytest.mark.parametrize(
    "command, target",
    [
        ("build", "mine"),
        ("check", "notes.jsonl"),
        ("export", "mine"),
        ("mix", "mine"),
        ("score", "notes.txt"),
    ],
)
def test_every_command_refuses_the_users_output_with_status_2(sample_builds, tmp_path, command, target):
    users = _users(tmp_path / target)
    argv = _argv(command, sample_builds["locomo"].output, users, tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "convhub.cli", *argv],
        capture_output=True, text=True, env=command_env(), cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert done.returncode == USAGE, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"convhub {command}: error: ") and str(users) in line
    assert "refusing to replace it" in line or "not write" in line
    assert _untouched(users)
