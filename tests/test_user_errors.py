"""User errors are one clear line on stderr and a non-zero exit, never a traceback, for build and check alike.

Each case fails before any work where it can (bad options, a missing folder, offline with nothing local);
bad file contents fail at the file, naming it.
"""

from __future__ import annotations

import datasets.config
import huggingface_hub.constants
import pytest

from builders import cli

COMMANDS = ("build", "check")


def run(command: str, arguments: list[str], tmp_path) -> int:
    """``convhub COMMAND ...``; a build writes under ``tmp_path``."""
    extra = ["--output", str(tmp_path / "out")] if command == "build" else []
    return cli.main([command, *arguments, *extra])


def one_error_line(capsys, command: str) -> str:
    """The only line on stderr, which must be ``convhub COMMAND: error: ...``; returns it."""
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"convhub {command}: error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("command", COMMANDS)
def test_offline_without_data_dir_says_pass_data_dir_or_sample(command, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    assert run(command, ["locomo"], tmp_path) != 0
    line = one_error_line(capsys, command)
    assert "offline" in line and "--data-dir" in line and "--sample" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("source", ["locomo", "gigamemory", "convlab", "mnbvc"])
def test_missing_data_dir_does_not_exist(command, source, tmp_path, capsys):
    missing = tmp_path / "nowhere"
    assert run(command, [source, "--data-dir", str(missing)], tmp_path) != 0
    line = one_error_line(capsys, command)
    assert f"{missing} does not exist" in line


@pytest.mark.parametrize("value", ["0", "-2"])
def test_num_proc_below_one_is_an_argument_error(value, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["build", "locomo", "--sample", "--num-proc", value, "--output", str(tmp_path / "out")])
    assert exit_.value.code != 0
    err = capsys.readouterr().err
    assert "convhub build: error: argument --num-proc: must be 1 or more" in err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", COMMANDS)
def test_sample_with_data_dir_contradict(command, tmp_path, capsys):
    assert run(command, ["locomo", "--sample", "--data-dir", str(tmp_path)], tmp_path) != 0
    line = one_error_line(capsys, command)
    assert "--sample" in line and "--data-dir" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", COMMANDS)
def test_format_for_a_source_without_formats_names_it(command, tmp_path, capsys):
    assert run(command, ["gigamemory", "--sample", "--format", "qa"], tmp_path) != 0
    line = one_error_line(capsys, command)
    assert "--format" in line and "'gigamemory'" in line
    assert not (tmp_path / "out").exists()


def test_format_for_mnbvc_is_still_taken(capsys):
    assert cli.main(["check", "mnbvc", "--sample", "--format", "forum", "--subset", "forum"]) == 0
