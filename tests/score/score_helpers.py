"""Helpers of ``convhub score``'s tests: a build of a sample's ``qa`` and ``turns`` configs, its questions,
a predictions file, and the command run through its own argparse options."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from convhub import registry
from convhub.engine.build import build_source
from convhub.export.exporter import open_build
from convhub.score import command


def build(name: str, output: Path, data_dir=None) -> Path:
    data_dir = data_dir or registry.get(name).sample_dir()
    build_source(name, output, data_dir=str(data_dir), configs=["qa", "turns"], num_proc=1)
    return output


def qa_rows(folder: Path) -> list[dict]:
    return [row for _, row in open_build(folder).all_rows("qa")]


def write_predictions(path: Path, predictions: list[dict]) -> Path:
    path.write_text(
        "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in predictions), encoding="utf-8"
    )
    return path


def score_argv(benchmark: str, data, predictions, output, *options: str) -> list[str]:
    """The arguments of ``convhub score`` (after ``score``) for one run."""
    return [
        benchmark,
        "--data",
        str(data),
        "--predictions",
        str(predictions),
        "--output",
        str(output),
        *options,
    ]


def run_score(argv: list[str], capsys) -> tuple[int, str, str]:
    """``convhub score ARGV``: (exit status, stdout, stderr)."""
    parser = argparse.ArgumentParser(prog="convhub score")
    command.add_arguments(parser)
    status = command.run(parser.parse_args(argv))
    out, err = capsys.readouterr()
    return status, out, err
