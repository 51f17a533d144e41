"""LongMemEval's retrieval metrics on hand-computed cases (``src/retrieval/eval_utils.py``), and its judge
path on rows of the shared schema through the judge double."""

from __future__ import annotations

import math

import pytest

from convhub.score import longmemeval
from convhub.score import longmemeval_retrieval as retrieval
from convhub.score.inputs import Prediction, Scored, ScoreError
from convhub.score.judge import client as judge_module
from convhub.score.judge.client import Judge
from convhub.score.longmemeval_retrieval import Conversation, Turn, ranking_level

#: the fixture judge
pytest_plugins = ["tests.score.score_fixtures"]


def evaluate(ranking: list[str], gold: list[str], k: int) -> tuple[float, ...]:
    """``evaluate_retrieval`` over a corpus of the ranked ids and the gold ones (the ranking in its order)."""
    ids = list(dict.fromkeys([*ranking, *gold]))
    return retrieval.evaluate_retrieval([ids.index(doc) for doc in ranking], set(gold), ids, k)


def test_recall_and_ndcg_at_k():
    # ranking a, x, b against gold a, b at k = 3: both in → any 1, all 1;
    # DCG = 1 + 0/log2(2) + 1/log2(3); ideal = 1 + 1/log2(2) = 2
    any_, all_, ndcg = evaluate(["a", "x", "b"], ["a", "b"], 3)
    assert (any_, all_) == (1.0, 1.0)
    assert ndcg == pytest.approx((1 + 1 / math.log2(3)) / 2)  # 0.8155
    # k = 1: only a → any 1, all 0; DCG 1, ideal 1 (min(k, 2) ones) → 1
    assert evaluate(["a", "x", "b"], ["a", "b"], 1) == (1.0, 0.0, 1.0)


def test_rank_two_is_not_discounted():
    # their dcg divides ranks 2.. by log2(2), log2(3)...: rank 2 keeps its full gain → x, a scores 1/1
    assert evaluate(["x", "a"], ["a"], 5) == (1.0, 1.0, 1.0)
    # rank 3: 1/log2(3) = 0.6309
    assert evaluate(["x", "y", "a"], ["a"], 5)[2] == pytest.approx(1 / math.log2(3))


def test_no_evidence_is_recall_all_but_not_any():
    assert evaluate(["a"], [], 5) == (0.0, 1.0, 0.0)


def turns_as_sessions(ranking: list[str], corpus: list[str], k: int) -> tuple[float, ...]:
    """A turn ranking at session level; ``corpus``: every turn id, a non-evidence one as ``noans:<id>``."""
    ids = [doc.removeprefix("noans:") for doc in corpus]
    gold = {doc for doc in corpus if not doc.startswith("noans:")}
    return retrieval.evaluate_turns_as_sessions([ids.index(doc) for doc in ranking], gold, corpus, k)


#: gold turns s1_1, s3_1 (sessions s1, s3); the others stand for a "no answer" copy of their session
TURNS = ["s1_1", "noans:s1_2", "noans:s1_3", "noans:s2_1", "s3_1"]


def test_turn_ranking_at_session_level_widens_k():
    # ranking s1_2, s1_3, s1_1: the first two are not evidence, so both stand for "noans s1" → at k = 2 one
    # distinct doc; widened to 3: noans-s1, s1 → any 1, all 0 (s3);
    # DCG over 3 = 1/log2(3) (the evidence turn third); ideal = min(3, 2 evidence turns) ones = 1 + 1 = 2
    values = turns_as_sessions(["s1_2", "s1_3", "s1_1"], TURNS, 2)
    assert values[:2] == (1.0, 0.0)
    assert values[2] == pytest.approx(1 / math.log2(3) / 2)  # 0.3155


def test_turn_ranking_at_session_level_without_widening():
    # ranking s1_2, s1_1, s2_1, s3_1 at k = 2: noans-s1, s1 are already 2 → top {noans-s1, s1}: any 1, all 0;
    # DCG = 0 + 1/log2(2) = 1; ideal = 2 → 0.5
    ranking = ["s1_2", "s1_1", "s2_1", "s3_1"]
    assert turns_as_sessions(ranking, TURNS, 2) == (1.0, 0.0, 0.5)
    # k = 10: never 10 distinct → as wide as the corpus: all four; s1 and s3 in → all 1;
    # DCG = 0 + 1 + 0 + 1/log2(4) = 1.5; ideal 2 → 0.75
    assert turns_as_sessions(ranking, TURNS, 10) == (1.0, 1.0, 0.75)


def user_turns(*turn_ids: str) -> list[Turn]:
    return [Turn(turn_id, "user", False) for turn_id in turn_ids]


CORPUS = Conversation({"s1": user_turns("s1_1", "s1_2"), "s2": user_turns("s2_1"), "s3": user_turns("s3_1")})


def question(question_id: str, question_type: str, answer: str, sessions=(), turns=()) -> dict:
    """A qa row of the shared schema as the LongMemEval builder is to write it."""
    return {
        "conversation_id": "c1",
        "source": "longmemeval",
        "question_id": question_id,
        "question": f"question {question_id}?",
        "answer": answer,
        "category": question_type,
        "evidence_session_ids": list(sessions),
        "evidence_turn_ids": list(turns),
        "extra": None,
    }


def test_ranking_level_and_its_errors():
    assert ranking_level(["s1", "s3"], CORPUS, "p line 1") == "session"
    assert ranking_level(["s1_1"], CORPUS, "p line 1") == "turn"
    with pytest.raises(ScoreError, match=r"^p line 2, field 'retrieved': 'zz' is neither"):
        ranking_level(["s1", "zz"], CORPUS, "p line 2")
    with pytest.raises(ScoreError, match="mixes session and turn ids"):
        ranking_level(["s1", "s1_1"], CORPUS, "p line 3")


def test_judged_accuracy_and_retrieval_on_shared_schema_rows(judge):
    rows = [
        question("q1", "single-session-user", "Miso", sessions=["s1"], turns=["s1_1"]),
        question("q2", "temporal-reasoning", "18 days", sessions=["s2", "s3"], turns=["s2_1", "s3_1"]),
        question("q3_abs", "temporal-reasoning", "The trip is never mentioned", sessions=["s3"]),
        question("q4", "knowledge-update", "Lisbon", sessions=["s2"], turns=["s2_1"]),
    ]
    items = [
        Scored(rows[0], Prediction("q1", "Your cat is Miso.", ("s1_2", "s1_1"), 1)),
        Scored(rows[1], Prediction("q2", "19 days", ("s3_1", "s1_1", "s2_1"), 2)),
        Scored(rows[2], Prediction("q3_abs", "The trip is never mentioned at all.", ("s1_1",), 3)),
        Scored(rows[3], None),
    ]
    scorer = Judge(judge.url, "judge-model", api_key="sk-test", retries=0)
    try:
        report = longmemeval.score(items, scorer, {"c1": CORPUS}, "p.jsonl", "convhub")
    finally:
        scorer.close()
    # the double says yes when the response holds the gold text: q1 yes, q2 no ("19 days"), q3 yes; q4 missing
    assert scorer.calls == 3 and len(judge.requests) == 3
    prompts = [request["messages"][0]["content"] for request in judge.requests]
    assert any("do not penalize off-by-one errors" in prompt for prompt in prompts)
    assert any(prompt.startswith("I will give you an unanswerable question") for prompt in prompts)
    assert {(r["temperature"], r["max_tokens"], r["n"], r["model"]) for r in judge.requests} == {
        (0, 10, 1, "judge-model")
    }
    assert {h["Authorization"] for h in judge.headers} == {"Bearer sk-test"}
    assert report["overall"]["accuracy"] == 0.5  # 2 of 4
    assert report["by_category"]["temporal-reasoning"]["accuracy"] == 0.5  # q2 no, q3_abs yes
    assert report["by_category"]["knowledge-update"]["missing"] == 1
    assert report["task_averaged_accuracy"] == pytest.approx((1 + 0.5 + 0) / 3)
    assert report["abstention"]["count"] == 1 and report["abstention"]["accuracy"] == 1.0
    overall = report["overall"]
    # retrieval over q1, q2 and the missing q4 (an empty ranking); q3_abs is left out
    assert overall["retrieval_questions"] == {"session": 3, "turn": 3}
    # turn recall_any@1: q1 top s1_2 (no), q2 top s3_1 (yes), q4 none → 1/3
    assert overall["retrieval"]["turn"]["recall_any@1"] == pytest.approx(1 / 3)
    # turn recall_all@5: q1 yes, q2 yes (s2_1, s3_1 both in), q4 no → 2/3
    assert overall["retrieval"]["turn"]["recall_all@5"] == pytest.approx(2 / 3)
    # q1 turn ndcg@5: s1_1 at rank 2 → 1/1 = 1; q2: ranks 1 and 3 → (1 + 1/log2 3) / 2; q4 0
    expected = (1 + (1 + 1 / math.log2(3)) / 2 + 0) / 3
    assert overall["retrieval"]["turn"]["ndcg_any@5"] == pytest.approx(expected)


def test_prompts_are_longmemevals_word_for_word():
    prompt = judge_module.judge_prompt("knowledge-update", "Where do I live?", "Lisbon", "Porto, then Lisbon")
    assert prompt == (
        "I will give you a question, a correct answer, and a response from a model. Please answer yes if the "
        "response contains the correct answer. Otherwise, answer no. If the response contains some previous "
        "information along with an updated answer, the response should be considered as correct as long as "
        "the updated answer is the required answer.\n\nQuestion: Where do I live?\n\nCorrect Answer: Lisbon"
        "\n\nModel Response: Porto, then Lisbon\n\nIs the model response correct? Answer yes or no only."
    )
    assert judge_module.judge_prompt("multi-session", "Q", "A", "R") == (
        "I will give you a question, a correct answer, and a response from a model. Please answer yes if the "
        "response contains the correct answer. Otherwise, answer no. If the response is equivalent to the "
        "correct answer or contains all the intermediate steps to get the correct answer, you should also "
        "answer yes. If the response only contains a subset of the information required by the answer, answer "
        "no. \n\nQuestion: Q\n\nCorrect Answer: A\n\nModel Response: R\n\nIs the model response correct? "
        "Answer yes or no only."
    )
