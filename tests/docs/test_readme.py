"""README.md is a short user's guide: its size, the documents it points to, and the commands it names exist."""

from __future__ import annotations

import re
from pathlib import Path

from convhub.cli import main as cli

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def test_readme_is_a_short_guide():
    assert README.stat().st_size <= 15_000


def test_every_document_and_script_the_readme_names_exists():
    text = README.read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:docs|scripts|examples|benchmarks)/[\w./-]+)`", text))
    named |= set(re.findall(r"python ((?:scripts|benchmarks|examples)/[\w./-]+\.py)", text))
    assert "docs/guarantees.md" in named
    missing = sorted(path for path in named if not (ROOT / path).exists())
    assert not missing, missing


def test_every_convhub_command_in_the_readme_is_one_the_cli_has(capsys):
    text = README.read_text(encoding="utf-8")
    used = set(re.findall(r"^convhub (\w+)", text, flags=re.MULTILINE))
    used |= set(re.findall(r"&& convhub (\w+)", text))
    assert {"build", "check", "export", "mix", "push"} <= used
    for command in sorted(used):
        try:
            cli.main([command, "--help"])
        except SystemExit as stop:
            assert stop.code == 0, command
        assert capsys.readouterr().out.startswith(f"usage: convhub {command}"), command
