"""``convhub score longmemeval`` on a build of the sample: the ids the builder writes are the ones its scoring reads."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from convhub.builders.longmemeval.builder import LongMemEvalBuilder
from convhub.engine.build import build_source
from convhub.score import command

pytest_plugins = ["tests.support.judge_double"]  # the judge fixture


@pytest.fixture(scope="module")
def build_s(tmp_path_factory) -> Path:
    """``longmemeval_s`` alone: the three files hold the same question ids, which one score cannot tell apart."""
    output = tmp_path_factory.mktemp("lme-score") / "build"
    sample = LongMemEvalBuilder.sample_dir()
    build_source("longmemeval", output, sample, ["qa", "turns"], 1, subsets=["longmemeval_s"])
    return output


def score(build: Path, tmp_path: Path, predictions: list[dict], *options: str) -> dict:
    file = tmp_path / "predictions.jsonl"
    file.write_text("".join(json.dumps(p) + "\n" for p in predictions), encoding="utf-8")
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    argv = [
        "longmemeval",
        "--data",
        str(build),
        "--predictions",
        str(file),
        "--output",
        str(tmp_path / "r.json"),
    ]
    assert command.run(parser.parse_args([*argv, *options])) == 0
    return json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))


def test_session_rankings_give_recall_and_leave_abstention_out(build_s, tmp_path):
    report = score(
        build_s,
        tmp_path,
        [
            {
                "question_id": "e47becba",
                "prediction": "x",
                "retrieved": ["answer_280352e9", "ultrachat_414810"],
            },
            {
                "question_id": "gpt4_d84a3211",
                "prediction": "x",
                "retrieved": ["answer_b1a2c3d4_1", "sharegpt_yywfIrx_0"],
            },
            {"question_id": "7161e7e2_abs", "prediction": "x", "retrieved": ["ultrachat_414810"]},
        ],
    )
    session = report["overall"]["retrieval"]["session"]
    assert report["overall"]["retrieval_questions"]["session"] == 2  # the _abs question is left out
    assert session["recall_any@1"] == 1.0
    assert session["recall_all@5"] == 0.5  # the bikes question misses its second evidence session
    assert report["by_category"]["multi-session"]["retrieval"]["session"]["recall_all@1"] == 0.0


def test_turn_rankings_are_scored_at_turn_and_session_level(build_s, tmp_path):
    report = score(
        build_s,
        tmp_path,
        [
            {"question_id": "e47becba", "prediction": "x", "retrieved": ["answer_280352e9_1"]},
            {
                "question_id": "gpt4_d84a3211",
                "prediction": "x",
                "retrieved": ["answer_b1a2c3d4_2_1", "answer_b1a2c3d4_1_1"],
            },
        ],
    )
    assert report["overall"]["retrieval"]["turn"]["recall_all@5"] == 1.0
    assert report["overall"]["retrieval"]["session"]["recall_all@5"] == 1.0


def test_the_judge_scores_answers_with_the_abstention_prompt_for_abs_ids(build_s, tmp_path, judge):
    predictions = [
        {"question_id": "e47becba", "prediction": "You studied Business Administration."},
        {"question_id": "gpt4_d84a3211", "prediction": "You own 3 bikes."},
        {"question_id": "7161e7e2_abs", "prediction": "I don't know."},
    ]
    report = score(build_s, tmp_path, predictions, "--judge-url", judge.url, "--judge-model", "m")
    assert report["abstention"]["count"] == 1
    assert report["judge"]["prompts"]["abstention"] == "abstention"
    assert report["by_category"]["multi-session"]["accuracy"] == 1.0  # the numeric answer, as text "3"
    assert report["overall"]["accuracy"] == pytest.approx(2 / 3)
