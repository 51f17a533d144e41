"""``convhub score locomo --labels``: LoCoMo scored against the labels of the audit a build carries (``convhub
build locomo --errata``), checked against LoCoMo's own code fed the corrected answers and evidence (transcribed
below), and the ceiling of the original labels, which the audit states as 93.57% on categories 1-4."""

from __future__ import annotations

import json
import re
import string
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from nltk.stem import PorterStemmer

from convhub.engine.build import build_source
from convhub.score import locomo
from convhub.score.inputs import Prediction, Scored, ScoreError
from tests.score.score_helpers import qa_rows, run_score, write_predictions
from tests.support.data_files import shared_data

#: the fixtures locomo_sample and judge
pytest_plugins = ["tests.score.score_fixtures"]

# -- LoCoMo's own code, transcribed -----------------------------------------------------------------------------
# snap-research/locomo task_eval/evaluation.py (normalize_answer, f1_score, f1, eval_question_answering) with the
# per-question figures rounded to 3 as evaluate_qa.py stores them, and evaluation_stats.py's sums by category
# (rag=True: the recall summed over questions with evidence, divided by every question of the category).

_ps = PorterStemmer()


def _normalize_answer(s):
    s = s.replace(",", "")
    exclude = set(string.punctuation)
    s = "".join(ch for ch in s.lower() if ch not in exclude)
    return " ".join(re.sub(r"\b(a|an|the|and)\b", " ", s).split())


def _f1_score(prediction, ground_truth):
    prediction_tokens = [_ps.stem(w) for w in _normalize_answer(prediction).split()]
    ground_truth_tokens = [_ps.stem(w) for w in _normalize_answer(ground_truth).split()]
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    return (2 * precision * recall) / (precision + recall)


def _f1(prediction, ground_truth):
    predictions = [p.strip() for p in prediction.split(",")]
    ground_truths = [g.strip() for g in ground_truth.split(",")]
    best = [max([_f1_score(prediction, gt) for prediction in predictions]) for gt in ground_truths]
    return sum(best) / len(best)


def _eval_question_answering(lines, eval_key="prediction"):
    all_ems, all_recall = [], []
    for line in lines:
        answer = str(line["answer"])
        if line["category"] == 3:
            answer = answer.split(";")[0].strip()
        output = line[eval_key]
        if line["category"] in [2, 3, 4]:
            all_ems.append(_f1_score(output, answer))
        elif line["category"] in [1]:
            all_ems.append(_f1(output, answer))
        elif line["category"] in [5]:
            said = output.lower()
            all_ems.append(1 if "no information available" in said or "not mentioned" in said else 0)
        if eval_key + "_context" in line and len(line["evidence"]) > 0:
            context = line[eval_key + "_context"]
            if context[0].startswith("S"):
                sessions = [e[1:] for e in context]
                recall_acc = float(sum([ev.split(":")[0][1:] in sessions for ev in line["evidence"]])) / len(
                    line["evidence"]
                )
            else:
                recall_acc = float(sum([ev in context for ev in line["evidence"]])) / len(line["evidence"])
            all_recall.append(recall_acc)
        else:
            all_recall.append(1)
    return all_ems, all_recall


def locomo_reference(lines: list[dict]) -> dict[int, tuple[float, float]]:
    """{category: (F1, evidence recall)} as LoCoMo's scripts give them for ``lines`` (its ``qa`` items with
    ``prediction`` and ``prediction_context``)."""
    ems, recalls = _eval_question_answering(lines)
    totals, f1_sums, recall_sums = defaultdict(int), defaultdict(float), defaultdict(float)
    for line, em, recall in zip(lines, ems, recalls, strict=True):
        totals[line["category"]] += 1
        f1_sums[line["category"]] += round(em, 3)
        if len(line["evidence"]) > 0:
            recall_sums[line["category"]] += round(recall, 3)
    return {k: (f1_sums[k] / totals[k], recall_sums[k] / totals[k]) for k in totals}


# -- helpers ----------------------------------------------------------------------------------------------------


def corrected_lines(rows: list[dict], predictions: dict[str, dict]) -> list[dict]:
    """LoCoMo's qa items with the audit's labels put in, as a user of LoCoMo's code would: the corrected answer
    where the error type changes it, the corrected evidence on every audited question."""
    lines = []
    for row in rows:
        extra = row["extra"] or {}
        answer = (
            extra.get("answer", row["answer"]) if row["answer"] is not None else row["adversarial_answer"]
        )
        evidence = extra.get("evidence", [])
        if row["audit"] is not None:
            entry = row["audit"]["entry"]
            evidence = entry["correct_evidence"]
            if entry["error_type"] != "WRONG_CITATION":
                answer = entry["correct_answer"]
        prediction = predictions[row["question_id"]]
        line = {"answer": answer, "evidence": evidence, "category": row["category_id"]}
        line["prediction"] = prediction["prediction"]
        line["prediction_context"] = prediction["retrieved"]
        lines.append(line)
    return lines


def varied_predictions(rows: list[dict]) -> list[dict]:
    """Answers of every kind: the original gold, the audited one, a part of it, a wrong one; rankings holding the
    original evidence, the audited evidence, sessions, or nothing found."""
    predictions = []
    for number, row in enumerate(rows):
        audit = row["audit"]
        gold = row["answer"] or "not mentioned"
        answers = [gold, audit["answer"] if audit else gold, " ".join(gold.split()[:2]), "zzz"]
        rankings = [
            row["evidence_turn_ids"],
            audit["evidence_turn_ids"] if audit else row["evidence_turn_ids"],
            [f"S{turn.split(':')[0][1:]}" for turn in row["evidence_turn_ids"]] or ["S1"],
            ["D1:1"],
        ]
        retrieved = rankings[number // 4 % 4] or ["D1:1"]
        predictions.append(
            {"question_id": row["question_id"], "prediction": answers[number % 4], "retrieved": retrieved}
        )
    return predictions


def score(data: Path, predictions: list[dict], tmp_path: Path, capsys, *options: str) -> tuple[dict, str]:
    file = write_predictions(tmp_path / "predictions.jsonl", predictions)
    report = tmp_path / "report.json"
    argv = ["locomo", "--data", str(data), "--predictions", str(file), "--output", str(report), *options]
    status, out, err = run_score(argv, capsys)
    assert (status, err) == (0, "")
    return json.loads(report.read_text()), out


# -- the real files ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def audited_build(tmp_path_factory) -> Path:
    output = tmp_path_factory.mktemp("audited") / "locomo"
    data, errata = shared_data("locomo", "locomo10.json"), shared_data("locomo-audit", "errors.json")
    build_source("locomo", output, str(data), configs=["qa"], num_proc=1, errata=str(errata))
    return output


@pytest.mark.slow
def test_audited_figures_are_locomos_code_fed_the_corrected_labels(audited_build, tmp_path, capsys):
    rows = qa_rows(audited_build)
    predictions = varied_predictions(rows)
    report, out = score(audited_build, predictions, tmp_path, capsys, "--labels", "audited")
    assert report["labels"] == "audited" and report["overall"] == report["by_labels"]["audited"]["overall"]
    by_id = {item["question_id"]: item for item in predictions}
    expected = locomo_reference(corrected_lines(rows, by_id))
    for figures in report["by_category"].values():
        f1, recall = expected[figures["category_id"]]
        assert figures["f1"] == pytest.approx(f1, abs=1e-12), figures["category"]
        assert figures["evidence_recall"] == pytest.approx(recall, abs=1e-12), figures["category"]
    # the original labels, in the same report, are LoCoMo's code on the file as it is
    original = locomo_reference(corrected_lines([{**row, "audit": None} for row in rows], by_id))
    for figures in report["by_labels"]["original"]["by_category"].values():
        assert (figures["f1"], figures["evidence_recall"]) == pytest.approx(original[figures["category_id"]])
    assert report["by_labels"]["original"]["overall"]["f1"] != report["overall"]["f1"]
    assert "audited labels, f1 without adversarial" in out and "ceiling of the original labels" in out


@pytest.mark.slow
def test_the_ceiling_of_the_original_labels_is_the_audits_figure(audited_build, tmp_path, capsys):
    rows = qa_rows(audited_build)
    predictions = [{"question_id": row["question_id"], "prediction": row["answer"] or "-"} for row in rows]
    report, out = score(audited_build, predictions, tmp_path, capsys)
    assert report["labels"] == "original" and report["overall"] == report["by_labels"]["original"]["overall"]
    ceiling = report["ceiling"]
    top = ceiling["overall_without_adversarial"]
    assert (top["count"], top["answer_corrected"]) == (1540, 99)
    assert top["share"] == pytest.approx(1441 / 1540) and round(top["share"], 4) == 0.9357
    # the category ceilings the audit states: single-hop 95.72%, multi-hop 90.07%
    assert round(ceiling["by_category"]["Single-hop"]["share"], 4) == 0.9572
    assert round(ceiling["by_category"]["Multi-hop"]["share"], 4) == 0.9007
    assert sum(row["answer_corrected"] for row in ceiling["by_category"].values()) == 99
    # F1 of the audited answers against the original ones: below 1, above the share (partial credit)
    assert top["share"] < top["f1"] < 1
    assert "0.9357 of the questions keep their answer (99 corrected by the audit)" in out


# -- small cases ------------------------------------------------------------------------------------------------


def _question(number: int, category_id: int, answer: str, evidence: list[str], audit: dict | None) -> dict:
    return {
        "question_id": f"q{number}",
        "category_id": category_id,
        "answer": answer,
        "adversarial_answer": None,
        "evidence_turn_ids": evidence,
        "extra": {"evidence": evidence},
        "audit": audit,
    }


def _audit(error_type: str, answer: str, evidence: list[str]) -> dict:
    entry = {"error_type": error_type, "correct_answer": answer, "correct_evidence": evidence}
    return {
        "error_type": error_type,
        "answer_changed": error_type != "WRONG_CITATION",
        "answer": answer,
        "evidence_turn_ids": evidence,
        "entry": json.dumps(entry),  # JSON text, as a build's row holds it before decoding
    }


def _scored(question: dict, answer: str, retrieved: list[str]) -> Scored:
    return Scored(question, Prediction(question["question_id"], answer, tuple(retrieved), 1))


def test_a_citation_only_verdict_changes_the_evidence_not_the_answer():
    cited = _question(1, 4, "Porto", ["D1:1"], _audit("WRONG_CITATION", "Porto (citation wrong)", ["D1:2"]))
    corrected = _question(2, 2, "2022", ["D2:1"], _audit("TEMPORAL_ERROR", "2021", ["D2:1", "D2:2"]))
    items = [_scored(cited, "Porto", ["D1:2"]), _scored(corrected, "2021", ["D2:1"])]
    report = locomo.score(items, "raw", "audited")
    audited, original = report["by_labels"]["audited"], report["by_labels"]["original"]
    # Porto against Porto (not against the audit's comment): 1; 2021 against 2021: 1
    assert audited["by_category"]["Single-hop"]["f1"] == 1 and audited["by_category"]["Temporal"]["f1"] == 1
    assert original["by_category"]["Temporal"]["f1"] == 0
    # evidence: D1:2 is the audit's evidence (1 of 1), not LoCoMo's (0 of 1); D2:1 is 1 of 2 audited ones
    assert audited["by_category"]["Single-hop"]["evidence_recall"] == 1
    assert original["by_category"]["Single-hop"]["evidence_recall"] == 0
    assert audited["by_category"]["Temporal"]["evidence_recall"] == 0.5
    assert report["ceiling"]["overall_without_adversarial"] == {
        "count": 2,
        "answer_corrected": 1,
        "share": 0.5,
        "f1": 0.5,  # Porto against Porto 1, 2021 against 2022 0
    }


def test_audited_labels_need_an_audit_in_the_build():
    plain = _question(1, 4, "Porto", ["D1:1"], None)
    with pytest.raises(ScoreError, match="--labels audited: the build carries no audit"):
        locomo.score([_scored(plain, "Porto", [])], "raw", "audited")
    report = locomo.score([_scored(plain, "Porto", [])])
    assert report["labels"] == "original" and "by_labels" not in report and "ceiling" not in report


def test_the_command_says_what_is_wrong_in_one_line(locomo_sample, tmp_path, capsys):
    rows = qa_rows(locomo_sample)
    file = write_predictions(
        tmp_path / "p.jsonl", [{"question_id": rows[0]["question_id"], "prediction": "x"}]
    )
    argv = ["--data", str(locomo_sample), "--predictions", str(file), "--output", str(tmp_path / "r.json")]
    status, _, err = run_score(["locomo", *argv, "--labels", "audited"], capsys)
    assert status == 1 and err.startswith(
        "convhub score: error: --labels audited: the build carries no audit"
    )
    assert err.count("\n") == 1
    status, _, err = run_score(["longmemeval", *argv, "--labels", "audited"], capsys)
    assert (status, err) == (2, "convhub score: error: --labels applies to locomo only\n")
    assert not (tmp_path / "r.json").exists()


def test_the_judge_is_given_the_labels_scored(audited_build, tmp_path, capsys, judge):
    """``--protocol mem0-judge`` with ``--labels audited``: the gold answer in the judge's request is the
    audit's where it corrects LoCoMo's (conv-26:qa2), LoCoMo's where only the citation was wrong (conv-26:qa1)."""
    predictions = [
        {"question_id": "conv-26:qa1", "prediction": "2022"},
        {"question_id": "conv-26:qa2", "prediction": "counseling"},
    ]
    judged = ["--protocol", "mem0-judge", "--judge-url", judge.url, "--judge-model", "gpt-4o-mini"]
    score(audited_build, predictions, tmp_path, capsys, "--labels", "audited", *judged)
    asked = " ".join(message["content"] for body in judge.requests for message in body["messages"])
    assert "Gold answer: 2022" in asked and "Gold answer: Counseling or mental health" in asked
    assert "Psychology, counseling certification" not in asked
