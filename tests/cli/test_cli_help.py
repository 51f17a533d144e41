"""The command line as people expect it from ``hf`` and ``datasets-cli``: a version, help for every argument,
a description naming every command, examples, and counts in plain English."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from importlib.metadata import version

import pytest

from convhub.cli import main as cli
from convhub.score import locomo

COMMANDS = ("build", "check", "push", "export", "mix", "score")


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    [choices] = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    return dict(choices.choices)


def test_version(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"convhub {version('convhub')}"


def test_the_help_lists_every_command_once_and_shows_no_markup(capsys):
    """The description listed the commands and argparse listed them again, with other words."""
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert set(subcommands()) == set(COMMANDS)
    for command in COMMANDS:
        listed = [line for line in out.splitlines() if re.match(rf"^\s+{command}\s", line)]
        assert len(listed) == 1, (command, out)
    assert "``" not in out and ":func:" not in out


def help_of(command: str, capsys) -> str:
    with pytest.raises(SystemExit) as exited:
        cli.main([command, "--help"])
    assert exited.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse wraps lines where it likes


def test_build_help_lists_the_config_names(capsys):
    out = help_of("build", capsys)
    configs = out.split("--config CONFIGS ", 1)[1]
    for name in ("sessions", "turns", "qa", "messages", "observations", "events", "dialogues"):
        assert name in configs, (name, configs)


@pytest.mark.parametrize("command", ["build", "check"])
def test_format_lists_its_choices(command, capsys):
    assert "--format {multiturn,qa,forum}" in help_of(command, capsys)


def test_check_help_speaks_of_no_output_folder(capsys):
    """``check`` has no output: its bad records go to --quarantine, and its help says only that."""
    out = help_of("check", capsys)
    assert "OUTPUT" not in out and "output folder" not in out
    assert "listed with its reason in --quarantine (skip)" in out
    assert "OUTPUT.quarantine.jsonl beside the output folder" in help_of("build", capsys)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_argument_has_help_and_every_command_examples(command, capsys):
    parser = subcommands()[command]
    missing = [
        action.dest
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction) and not action.help
    ]
    assert missing == []
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    out = capsys.readouterr().out
    assert "examples:\n  convhub " + command in out
    assert "``" not in out


def test_counts_say_1_row_not_1_rows():
    assert (cli.rows(1), cli.rows(0), cli.rows(2000)) == ("1 row", "0 rows", "2,000 rows")


def test_a_build_summary_says_1_row(tmp_path, capsys):
    assert (
        cli.main(["build", "convlab", "--sample", "--output", str(tmp_path / "out"), "--config", "sessions"])
        == 0
    )
    out = capsys.readouterr().out
    assert "validation 1 row " in out and "1 rows" not in out


@pytest.mark.slow
def test_the_options_load_no_scorer_library():
    """Every command builds every command's options; the scorers' libraries (nltk) load when a score runs, not at
    each start (0.15 s of it), and the stemmer they give is nltk's Porter stemmer."""
    code = "import sys, convhub.cli.main as m; m.build_parser(); print('nltk' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
    assert locomo._stems("The cats, running!") == ["cat", "run"]
