"""``convhub score longmemeval``'s retrieval figures equal those of the authors' code (``longmemeval_oracle``)
on rankings that name ``noans_`` ids, assistant turns and repeats; the ``convhub`` protocol is kept by name;
the session-level widening of k is linear in the ranking."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from convhub.builders.longmemeval.builder import LongMemEvalBuilder
from convhub.engine.build import build_source
from convhub.score.longmemeval_retrieval import Conversation, Turn, corpus, retrieval_metrics
from tests.score.longmemeval_oracle import oracle_averages, oracle_corpus
from tests.score.score_helpers import run_score, score_argv, write_predictions

pytest_plugins = ["tests.score.score_fixtures"]


def session(*turns: tuple[str, bool | None]) -> list[dict]:
    """Turns given as (role, has_answer); None: the turn has no has_answer key (filler sessions)."""
    made = []
    for number, (role, has_answer) in enumerate(turns, 1):
        turn = {"role": role, "content": f"{role} says {number}"}
        if has_answer is not None:
            turn["has_answer"] = has_answer
        made.append(turn)
    return made


def instance(
    question_id: str, question_type: str, sessions: dict[str, list[dict]], answers: list[str]
) -> dict:
    return {
        "question_id": question_id,
        "question_type": question_type,
        "question": f"question {question_id}?",
        "answer": "an answer",
        "question_date": "2023/06/01 (Thu) 10:00",
        "haystack_session_ids": list(sessions),
        "haystack_dates": [f"2023/05/{day:02d} (Mon) 09:00" for day in range(1, len(sessions) + 1)],
        "haystack_sessions": list(sessions.values()),
        "answer_session_ids": answers,
    }


U, A = "user", "assistant"


def fixture_instances() -> list[dict]:
    filler = {f"ultrachat_{n}": session((U, None), (A, None), (U, None), (A, None)) for n in range(12)}
    return [
        instance(
            "qa1",
            "multi-session",
            {
                "answer_aa_1": session((U, True), (A, False), (U, False), (A, False)),
                "sharegpt_x_0": session((U, None), (A, None)),
                "answer_aa_2": session((U, False), (A, True)),  # evidence in an assistant turn only: noans
                **dict(list(filler.items())[:3]),
                "answer_aa_3": session((U, True), (A, False), (U, True), (A, False)),
            },
            ["answer_aa_1", "answer_aa_2", "answer_aa_3"],
        ),
        instance(
            "qa2",
            "single-session-assistant",
            {"sharegpt_y_0": session((U, None), (A, None)), "answer_bb_1": session((U, False), (A, True))},
            ["answer_bb_1"],
        ),
        instance(
            "qa3_abs",
            "temporal-reasoning",
            {"answer_cc_abs": session((U, False), (A, False)), "ultrachat_0": session((U, None), (A, None))},
            ["answer_cc_abs"],
        ),
        instance(
            "qa4",
            "knowledge-update",
            {**filler, "answer_dd_5": session((U, True), (A, False), (U, False), (A, False), (U, True))},
            ["answer_dd_5"],
        ),
    ]


def build_of(instances: list[dict], folder: Path) -> Path:
    data = folder / "data"
    data.mkdir(parents=True)
    (data / "longmemeval_s.json").write_text(json.dumps(instances), encoding="utf-8")
    build_source("longmemeval", folder / "build", str(data), ["qa", "turns"], 1, subsets=["longmemeval_s"])
    return folder / "build"


def rankings_for(
    instances: list[dict], granularity: str, seed: int
) -> tuple[dict[str, list[int]], list[dict]]:
    """A random permutation of each instance's corpus (the oracle's), and the same as predictions: each id in
    a random spelling (answer_ or noans_), with assistant turns and repeats mixed in, which the corpus has not."""
    chosen = random.Random(seed)
    rankings, predictions = {}, []
    for item in instances:
        ids = oracle_corpus(item, granularity)
        ranking = list(range(len(ids)))
        chosen.shuffle(ranking)
        named = [ids[n].replace("noans", "answer") if chosen.random() < 0.5 else ids[n] for n in ranking]
        if granularity == "turn":
            assistant = [
                f"{session_id}_{number}"
                for session_id, turns in zip(
                    item["haystack_session_ids"], item["haystack_sessions"], strict=True
                )
                for number, turn in enumerate(turns, 1)
                if turn["role"] == "assistant"
            ]
            for turn_id in assistant:
                named.insert(chosen.randrange(len(named) + 1), turn_id)
        repeats = [(position, named[position]) for position in range(0, len(named), 3)]
        for position, name in reversed(repeats):
            named.insert(chosen.randrange(position + 1, len(named) + 1), name.replace("answer", "noans"))
        rankings[item["question_id"]] = ranking
        predictions.append({"question_id": item["question_id"], "prediction": "x", "retrieved": named})
    return rankings, predictions


def score(build: Path, predictions: list[dict], tmp_path: Path, capsys, *options: str) -> dict:
    file = write_predictions(tmp_path / "p.jsonl", predictions)
    status, _, err = run_score(
        score_argv("longmemeval", str(build), str(file), str(tmp_path / "r.json"), *options),
        capsys,
    )
    assert status == 0, err
    return json.loads((tmp_path / "r.json").read_text())


def assert_as_the_authors(instances: list[dict], build: Path, tmp_path: Path, capsys, seeds=range(3)) -> None:
    for granularity in ("session", "turn"):
        for seed in seeds:
            rankings, predictions = rankings_for(instances, granularity, seed)
            report = score(build, predictions, tmp_path, capsys)
            expected, abstention, no_target = oracle_averages(instances, granularity, rankings)
            assert report["retrieval_protocol"] == "longmemeval"
            assert report["retrieval_left_out"] == {
                "abstention": len(abstention),
                "no_user_evidence": len(no_target),
            }
            counted = len(instances) - len(abstention) - len(no_target)
            levels = ("session", "turn") if granularity == "turn" else ("session",)
            assert report["overall"]["retrieval_questions"] == dict.fromkeys(levels, counted)
            for level in levels:
                assert report["overall"]["retrieval"][level] == pytest.approx(expected[level]), (
                    granularity,
                    seed,
                    level,
                )


def test_fixture_scores_as_the_authors_code(tmp_path, capsys):
    instances = fixture_instances()
    assert_as_the_authors(instances, build_of(instances, tmp_path / "fixture"), tmp_path, capsys)


@pytest.mark.parametrize("subset", ["longmemeval_s", "longmemeval_oracle"])
def test_sample_scores_as_the_authors_code(tmp_path, capsys, subset):
    sample = Path(LongMemEvalBuilder.sample_dir())
    file = sample / subset if (sample / subset).exists() else sample / f"{subset}.json"
    instances = json.loads(file.read_text(encoding="utf-8"))
    build = tmp_path / "build"
    build_source("longmemeval", build, str(sample), ["qa", "turns"], 1, subsets=[subset])
    assert_as_the_authors(instances, build, tmp_path, capsys)


def test_the_convhub_protocol_counts_assistant_evidence(tmp_path, capsys):
    """qa2's only evidence is an assistant turn: the authors' protocol leaves it out, convhub's scores it."""
    build = build_of(fixture_instances(), tmp_path / "fixture")
    predictions = [
        {"question_id": "qa2", "prediction": "x", "retrieved": ["answer_bb_1_2", "sharegpt_y_0_1"]},
        {"question_id": "qa1", "prediction": "x", "retrieved": ["answer_aa_1_2", "answer_aa_1_1"]},
    ]
    paper = score(build, predictions, tmp_path, capsys)
    assert paper["retrieval_left_out"] == {"abstention": 1, "no_user_evidence": 1}
    assert paper["retrieval_passed_over_assistant_turns"] == 1  # qa1's answer_aa_1_2; qa2 is left out
    assert paper["by_category"]["multi-session"]["retrieval"]["turn"]["recall_any@1"] == 1.0
    assert paper["by_category"]["single-session-assistant"]["retrieval_questions"] == {
        "session": 0,
        "turn": 0,
    }
    ours = score(build, predictions, tmp_path, capsys, "--retrieval-protocol", "convhub")
    assert ours["retrieval_protocol"] == "convhub" and ours["retrieval_left_out"] == {"abstention": 1}
    figures = ours["by_category"]["single-session-assistant"]
    assert figures["retrieval_questions"] == {"session": 1, "turn": 1}
    assert figures["retrieval"]["turn"]["recall_any@1"] == 1.0
    assert figures["retrieval"]["session"]["recall_all@1"] == 1.0


def test_retrieval_protocol_is_for_longmemeval_only(locomo_sample, tmp_path, capsys):
    file = write_predictions(tmp_path / "p.jsonl", [])
    argv = score_argv("locomo", str(locomo_sample), str(file), str(tmp_path / "r.json"))
    status, _, err = run_score([*argv, "--retrieval-protocol", "convhub"], capsys)
    assert status == 2 and err == "convhub score: error: --retrieval-protocol applies to longmemeval only\n"


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_session_level_widening_is_linear_in_the_ranking():
    """200,000 turns of 20 sessions: k = 30 and 50 never see 30 distinct sessions, so k widens to the whole
    ranking; recounting the prefix at each step (the authors' loop) would take about 2·10¹⁰ set insertions."""
    sessions = {f"answer_s{n}" if n == 7 else f"filler_s{n}": [] for n in range(20)}
    for session_id, turns in sessions.items():
        turns.extend(
            Turn(f"{session_id}_{number}", U, session_id == "answer_s7" and number == 9_999)
            for number in range(1, 10_001)
        )
    conversation = Conversation(sessions)
    haystack = corpus(
        "longmemeval", "turn", conversation, {"evidence_turn_ids": [], "evidence_session_ids": []}
    )
    ranking = list(range(len(haystack.ids)))[::-1]
    metrics = retrieval_metrics(ranking, "turn", haystack)
    # the one gold turn, answer_s7_9999, is at rank 10,000 × (19 − 7) + 2 = 120,002
    assert metrics["turn"]["recall_any@50"] == 0.0
    assert metrics["session"]["recall_any@50"] == 1.0 and metrics["session"]["recall_all@30"] == 1.0
    assert metrics["session"]["recall_any@10"] == 0.0  # 10 distinct sessions are reached before session 7
