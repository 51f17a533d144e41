"""``convhub score locomo --protocol mem0-judge``: mem0's LLM judge ("J") reproduced exactly.

The oracle is mem0's own code, transcribed here from mem0ai/mem0 ``evaluation/metrics/llm_judge.py`` at
commit 6723043509933fa48d8a6755efd7d155e20dee4f (``ACCURACY_PROMPT``, ``evaluate_llm_judge`` and ``main``'s
loop) with ``evaluation/generate_scores.py``'s overall mean, run with the real OpenAI client against the judge
double: convhub's requests must be the same bytes, and its figures the same numbers.
"""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pytest
from openai import OpenAI

from convhub.score.judge import mem0 as mem0_judge
from convhub.score.judge.client import Judge
from tests.score.score_helpers import qa_rows, run_score, write_predictions

#: the fixtures locomo_sample and judge
pytest_plugins = ["tests.score.score_fixtures"]

# mem0 evaluation/metrics/llm_judge.py@6723043, ACCURACY_PROMPT, transcribed (its trailing spaces as \x20)
ORACLE_PROMPT = (
    "\nYour task is to label an answer to a question as ’CORRECT’ or ’WRONG’. You will be given the following "
    "data:\n    (1) a question (posed by one user to another user),\x20\n    (2) a ’gold’ (ground truth) "
    "answer,\x20\n    (3) a generated answer\nwhich you will score as CORRECT/WRONG.\n\nThe point of the "
    "question is to ask about something one user should know about the other user based on their prior "
    "conversations.\nThe gold answer will usually be a concise and short answer that includes the referenced "
    "topic, for example:\nQuestion: Do you remember what I got the last time I went to Hawaii?\nGold answer: A "
    "shell necklace\nThe generated answer might be much longer, but you should be generous with your grading - "
    "as long as it touches on the same topic as the gold answer, it should be counted as CORRECT.\x20\n\nFor "
    "time related questions, the gold answer will be a specific date, month, year, etc. The generated answer "
    'might be much longer or use relative time references (like "last Tuesday" or "next month"), but you '
    "should be generous with your grading - as long as it refers to the same date or time period as the gold "
    'answer, it should be counted as CORRECT. Even if the format differs (e.g., "May 7th" vs "7 May"), '
    "consider it CORRECT if it's the same date.\n\nNow it’s time for the real question:\nQuestion: "
    "{question}\nGold answer: {gold_answer}\nGenerated answer: {generated_answer}\n\nFirst, provide a short "
    "(one sentence) explanation of your reasoning, then finish with CORRECT or WRONG.\x20\nDo NOT include both "
    "CORRECT and WRONG in your response, or it will break the evaluation script.\n\nJust return the label "
    'CORRECT or WRONG in a json format with the key as "label".\n'
)


def oracle_evaluate_llm_judge(client: OpenAI, question, gold_answer, generated_answer) -> int:
    """mem0's ``evaluate_llm_judge``, word for word but for the client passed in."""
    response = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[
            {
                "role": "user",
                "content": ORACLE_PROMPT.format(
                    question=question, gold_answer=gold_answer, generated_answer=generated_answer
                ),
            }
        ],
        response_format={"type": "json_object"},
        temperature=0.0,
    )
    label = json.loads(response.choices[0].message.content)["label"]
    return 1 if label == "CORRECT" else 0


def oracle_scores(
    client: OpenAI, rows: list[dict], answers: dict[str, str]
) -> tuple[dict[int, float], float]:
    """mem0's ``main`` loop (category 5 skipped, ``str()`` as ``evals.py``) and ``generate_scores.py``'s
    per-category and overall means."""
    llm_judge = defaultdict(list)
    every = []
    for row in rows:
        category = row["category_id"]
        if int(category) == 5:
            continue
        label = oracle_evaluate_llm_judge(
            client, str(row["question"]), str(row["answer"]), str(answers[row["question_id"]])
        )
        llm_judge[category].append(label)
        every.append(label)
    return {category: float(np.mean(labels)) for category, labels in llm_judge.items()}, float(np.mean(every))


def test_the_prompt_is_mem0s():
    assert mem0_judge.ACCURACY_PROMPT == ORACLE_PROMPT
    assert "6723043509933fa48d8a6755efd7d155e20dee4f" in mem0_judge.PROMPT_VERSION


def test_request_bodies_are_byte_equal_to_mem0s(judge):
    cases = [
        ("When did Tomas start learning guitar?", "2022", "He started in 2022."),
        ("Où vit Ada ?", "Lisbonne", 'À "Lisbonne", je crois — ✓'),
    ]
    client = OpenAI(base_url=judge.url, api_key="sk-test", max_retries=0)
    for question, gold, generated in cases:
        assert oracle_evaluate_llm_judge(client, question, gold, generated) == 1
    theirs = list(judge.raw)
    scorer = Judge(judge.url, "gpt-4o-mini", api_key="sk-test", retries=0)
    bodies = [mem0_judge.request_body("gpt-4o-mini", *case) for case in cases]
    assert scorer.verdicts(bodies, mem0_judge.is_correct) == [True, True]
    ours = judge.raw[len(theirs) :]
    assert sorted(ours) == sorted(theirs) and len(ours) == 2  # sent at once: in any order
    assert json.loads(ours[0])["temperature"] == 0.0 and b'"temperature":0.0' in ours[0]


def test_verdict_parsing_is_mem0s():
    assert mem0_judge.is_correct('{"label": "CORRECT"}')
    for reply in (
        '{"label": "correct"}',
        '{"label": "WRONG"}',
        "CORRECT",
        '{"verdict": "CORRECT"}',
        "[1]",
        "",
    ):
        assert not mem0_judge.is_correct(reply), reply
    assert not mem0_judge.is_correct("[" * 100_000 + "]" * 100_000)


def test_locomo_f1_and_j_from_one_predictions_file(locomo_sample, tmp_path, capsys, judge):
    rows = qa_rows(locomo_sample)
    answers = {row["question_id"]: f"I think {row['answer'] or 'nothing'}." for row in rows}
    answers["conv-s1:qa2"] = "a red cup"  # single-hop, wrong
    answers["conv-s1:qa1"] = "two songs"  # multi-hop, wrong
    file = write_predictions(
        tmp_path / "p.jsonl", [{"question_id": key, "prediction": value} for key, value in answers.items()]
    )
    status, out, err = run_score(
        [
            "locomo",
            "--data",
            str(locomo_sample),
            "--predictions",
            str(file),
            "--output",
            str(tmp_path / "r.json"),
            "--protocol",
            "mem0-judge",
            "--judge-url",
            judge.url,
            "--judge-model",
            "gpt-4o-mini",
        ],
        capsys,
    )
    assert (status, err) == (0, ""), err
    report = json.loads((tmp_path / "r.json").read_text())
    judged = [row for row in rows if row["category_id"] != 5]
    assert report["judge"]["calls"] == len(judged) == len(judge.requests)
    assert report["judge"]["protocol"] == "mem0-judge" and "mem0" in report["judge"]["prompt_version"]
    convhub_requests = list(judge.raw)
    client = OpenAI(base_url=judge.url, api_key="sk-test", max_retries=0)
    per_category, overall = oracle_scores(client, rows, answers)
    assert sorted(judge.raw[len(convhub_requests) :]) == sorted(convhub_requests)
    for figures in report["by_category"].values():
        if figures["category_id"] == 5:
            assert "accuracy" not in figures
        else:
            assert figures["accuracy"] == pytest.approx(per_category[figures["category_id"]])
            assert "f1" in figures
    assert report["overall_without_adversarial"]["accuracy"] == pytest.approx(overall)
    assert 0 < overall < 1 and "accuracy" not in report["overall"]
    assert report["by_category"]["Single-hop"]["accuracy"] == pytest.approx(4 / 5)
    assert "judge: 10 judge requests" in out


def test_mem0_judge_needs_a_judge_and_applies_to_locomo(locomo_sample, tmp_path, capsys):
    file = write_predictions(tmp_path / "p.jsonl", [{"question_id": "conv-s1:qa0", "prediction": "2022"}])
    base = ["--data", str(locomo_sample), "--predictions", str(file), "--output", str(tmp_path / "r.json")]
    status, _, err = run_score(["locomo", *base, "--protocol", "mem0-judge"], capsys)
    assert status == 2 and "--protocol mem0-judge asks a judge" in err
    status, _, err = run_score(["longmemeval", *base, "--protocol", "mem0-judge"], capsys)
    assert status == 2 and "--protocol applies to locomo only" in err
    status, _, err = run_score(
        ["locomo", *base, "--judge-url", "http://127.0.0.1:9/v1", "--judge-model", "m"], capsys
    )
    assert status == 2 and "give --protocol mem0-judge" in err
    assert not (tmp_path / "r.json").exists()
