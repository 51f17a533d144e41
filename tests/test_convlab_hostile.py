"""ConvLab input built to break the builder (issue #13): a reserved split name, duplicate zip members, a
broken list under ``--on-bad-record skip``, a zip bomb, and source keys named like convhub's bookkeeping."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builders import cli


def dialogue(i: int, split: str = "train", subset: str = "toy") -> dict:
    return {
        "dataset": subset,
        "data_split": split,
        "dialogue_id": f"{subset}-{split}-{i}",
        "turns": [
            {"speaker": "user", "utterance": f"hello {i}", "utt_idx": 0},
            {"speaker": "system", "utterance": "ok", "utt_idx": 1},
        ],
    }


def one_error_line(capsys, command: str) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if line.startswith("convhub ")]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"convhub {command}: error: "), err
    assert "Traceback" not in err
    return lines[0]


def run(command: str, data_dir: Path, tmp_path: Path, *options: str) -> int:
    extra = ["--output", str(tmp_path / "out")] if command == "build" else []
    return cli.main([command, "convlab", "--data-dir", str(data_dir), *options, *extra])


# -- 1. a split named `all` ---------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["build", "check"])
@pytest.mark.parametrize("split", ["all", "ALL"])
def test_a_split_named_all_names_file_dialogue_and_field(command, split, tmp_path, capsys):
    data = tmp_path / "in" / "toy" / "data"
    data.mkdir(parents=True)
    (data / "dialogues.json").write_text(json.dumps([dialogue(0), dialogue(1, split)]), encoding="utf-8")
    assert run(command, tmp_path / "in", tmp_path) != 0
    line = one_error_line(capsys, command)
    assert str(data / "dialogues.json") in line
    assert f"dialogue 'toy-{split}-1'" in line and "field 'data_split'" in line and f"'{split}'" in line
    assert not (tmp_path / "out").exists()
