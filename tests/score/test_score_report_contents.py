"""What a report says beyond the figures: the build's input files (``source_files`` from its card), the figures
only a judge gives, and which subset a build of several must be scored by."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from huggingface_hub import DatasetCard

from convhub.builders.longmemeval.builder import LongMemEvalBuilder
from convhub.engine.build import build_source
from tests.score.score_helpers import qa_rows, run_score, score_argv, write_predictions

pytest_plugins = ["tests.score.score_fixtures"]

FILES = [
    {
        "name": "locomo10.json",
        "bytes": 2805274,
        "sha256": "79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4",
    },
    {
        "name": "notes é.json",
        "bytes": 0,
        "sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    },
]


def with_card(build: Path, folder: Path, files: list[dict] | None) -> Path:
    """A copy of ``build`` whose card lists ``files`` as its source_files (None: no such key)."""
    copy = folder / "build"
    shutil.copytree(build, copy)
    card = DatasetCard((copy / "README.md").read_text(encoding="utf-8"))
    card.data.pop("source_files", None)
    if files is not None:
        card.data.source_files = files
    (copy / "README.md").write_text(str(card), encoding="utf-8")
    return copy


def score(benchmark: str, data: Path, tmp_path: Path, capsys, predictions: list[dict], *options: str):
    file = write_predictions(tmp_path / "p.jsonl", predictions)
    report = tmp_path / "report.json"
    status, out, err = run_score(
        score_argv(benchmark, str(data), str(file), str(report), *options),
        capsys,
    )
    return status, out, err, (json.loads(report.read_text()) if status == 0 else None)


def test_the_report_copies_the_cards_source_files(locomo_sample, tmp_path, capsys):
    build = with_card(locomo_sample, tmp_path, FILES)
    status, _, err, report = score("locomo", build, tmp_path, capsys, [])
    assert status == 0, err
    assert report["source_files"] == FILES
    assert "source_files_note" not in report
    # LoCoMo's F1 needs no judge; mem0's J does, and the report says how to get it
    assert report["needs_judge"]["figures"] == ["accuracy"]
    assert "--protocol mem0-judge" in report["needs_judge"]["give"]


def test_a_card_without_source_files_is_said_so(locomo_sample, tmp_path, capsys):
    build = with_card(locomo_sample, tmp_path, None)
    status, _, err, report = score("locomo", build, tmp_path, capsys, [])
    assert status == 0, err
    assert report["source_files"] is None
    assert "lists no source_files" in report["source_files_note"]


@pytest.fixture(scope="module")
def longmemeval_two_subsets(tmp_path_factory) -> Path:
    output = tmp_path_factory.mktemp("lme-two") / "build"
    sample = LongMemEvalBuilder.sample_dir()
    build_source(
        "longmemeval", output, sample, ["qa", "turns"], 1, subsets=["longmemeval_s", "longmemeval_oracle"]
    )
    return output


def test_a_build_of_several_subsets_names_subset_and_them(longmemeval_two_subsets, tmp_path, capsys):
    status, out, err, _ = score("longmemeval", longmemeval_two_subsets, tmp_path, capsys, [])
    assert status == 1 and out == "" and err.count("\n") == 1
    assert "--subset" in err and "longmemeval_oracle, longmemeval_s" in err
    status, _, err, _ = score(
        "longmemeval", longmemeval_two_subsets, tmp_path, capsys, [], "--subset", "nope"
    )
    assert status == 1 and "no subset 'nope'" in err and "longmemeval_oracle, longmemeval_s" in err
    status, _, err, report = score(
        "longmemeval",
        longmemeval_two_subsets,
        tmp_path,
        capsys,
        [{"question_id": "gpt4_d84a3211", "prediction": "3", "retrieved": ["answer_b1a2c3d4_1"]}],
        "--subset",
        "longmemeval_oracle",
    )
    assert status == 0, err
    assert report["subset"] == "longmemeval_oracle" and report["questions"] == 3
    # gpt4_d84a3211 ranks its evidence first (1), 0edc2aef is missing (0), a1b2c3d4's evidence is an assistant
    # turn: left out, as LongMemEval's run_retrieval.py does
    assert report["overall"]["retrieval"]["session"]["recall_any@1"] == 0.5
    assert report["retrieval_left_out"] == {"abstention": 0, "no_user_evidence": 1}


def test_a_report_without_a_judge_names_what_needs_one(longmemeval_two_subsets, tmp_path, capsys):
    predictions = [{"question_id": "e47becba", "prediction": "x", "retrieved": ["answer_280352e9"]}]
    status, out, err, report = score(
        "longmemeval", longmemeval_two_subsets, tmp_path, capsys, predictions, "--subset", "longmemeval_s"
    )
    assert status == 0, err
    assert report["needs_judge"] == {
        "figures": ["accuracy", "task_averaged_accuracy", "abstention"],
        "give": "--judge-url and --judge-model",
    }
    assert "accuracy" not in report["overall"] and "abstention" not in report
    assert "not scored: accuracy, task_averaged_accuracy, abstention" in out
    assert "--judge-url and --judge-model" in out.splitlines()[-1]


def test_a_report_with_a_judge_needs_none(longmemeval_two_subsets, tmp_path, capsys, judge):
    rows = [row for row in qa_rows(longmemeval_two_subsets) if row["subset"] == "longmemeval_s"]
    predictions = [{"question_id": row["question_id"], "prediction": row["answer"]} for row in rows]
    status, out, err, report = score(
        "longmemeval",
        longmemeval_two_subsets,
        tmp_path,
        capsys,
        predictions,
        "--subset",
        "longmemeval_s",
        "--judge-url",
        judge.url,
        "--judge-model",
        "m",
    )
    assert status == 0, err
    assert "needs_judge" not in report and "not scored" not in out
    assert report["overall"]["accuracy"] == 1.0
