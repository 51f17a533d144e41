"""LoCoMo's figures on hand-computed cases, each derived in a comment from ``task_eval/evaluation.py``."""

from __future__ import annotations

import pytest

from convhub.score import locomo
from convhub.score.inputs import Prediction, Scored


def test_normalize_drops_commas_punctuation_articles_and_and():
    assert locomo.normalize_answer("The cat, and a Dog!") == "cat dog"
    # "an" only as a word: "banana" keeps its letters
    assert locomo.normalize_answer("An apple; a banana.") == "apple banana"


def test_f1_stems_before_counting():
    # prediction stems: carolin, went, run; gold: carolin, ran → 1 shared; P = 1/3, R = 1/2;
    # F1 = 2·(1/3)(1/2) / (1/3 + 1/2) = (1/3) / (5/6) = 0.4
    assert locomo.f1_score("Caroline went running", "Caroline ran") == pytest.approx(0.4)
    # "running" and "runs" both stem to "run": all shared
    assert locomo.f1_score("runs", "running") == 1.0
    assert locomo.f1_score("nothing shared", "Miso") == 0


def test_multi_hop_averages_the_best_part_over_the_gold_parts():
    # gold parts: pottery (best 1 from "pottery"), guitar (best 0) → mean 0.5
    assert locomo.answer_score(1, "pottery, painting", "pottery, guitar") == 0.5
    # one predicted part vs two gold parts: pottery → F1("pottery and guitar", "pottery"): "and" is dropped,
    # P = 1/2, R = 1 → 2/3; guitar → 2/3 as well; mean 2/3, stored rounded to 3 decimals
    assert locomo.answer_score(1, "pottery and guitar", "pottery, guitar") == 0.667


def test_open_domain_gold_is_cut_at_the_first_semicolon():
    # gold "Likely yes; she enjoys pottery" → "Likely yes" → stems like, ye; prediction "yes" → ye:
    # P = 1, R = 1/2 → F1 = 2/3 → 0.667 (the uncut gold would give 2·1·(1/5)/(6/5) = 1/3)
    assert locomo.answer_score(3, "yes", "Likely yes; she enjoys pottery") == 0.667
    assert locomo.answer_score(2, "yes", "Likely yes; she enjoys pottery") == 0.333


def test_adversarial_scores_the_refusal_phrases_only():
    assert locomo.answer_score(5, "That is Not Mentioned in the conversation.", "Miso") == 1
    assert locomo.answer_score(5, "There is no information available", None) == 1
    assert locomo.answer_score(5, "Miso", "Miso") == 0
    assert locomo.answer_score(5, "no info", "Miso") == 0


def test_evidence_recall_as_its_code_computes_it():
    # a raw string holding two ids never equals a retrieved turn id
    assert locomo.evidence_recall(["D8:6; D9:17"], ["D8:6", "D9:17"]) == 0
    # the ids it means do: 2 of 2
    assert locomo.evidence_recall(["D8:6", "D9:17"], ["D8:6", "D9:17"]) == 1
    # session rankings ("S8"): "D8:6; D9:17".split(":")[0][1:] is "8", in the sessions → 1 of 1
    assert locomo.evidence_recall(["D8:6; D9:17"], ["S8"]) == 1
    # convhub's own session id reads as S9: of D8:6 and D9:17 only session 9 → 1/2
    assert locomo.evidence_recall(["D8:6", "D9:17"], ["session_9", "session_1"]) == 0.5
    # 1 of 3 found, stored rounded to 3 decimals
    assert locomo.evidence_recall(["D1:1", "D1:2", "D1:3"], ["D1:2"]) == 0.333
    # no ranking at all: LoCoMo's 1; an empty ranking finds nothing
    assert locomo.evidence_recall(["D1:1"], None) == 1
    assert locomo.evidence_recall(["D1:1"], []) == 0


def _item(number: int, category_id: int, answer, prediction, evidence, retrieved=None) -> Scored:
    question = {
        "question_id": f"q{number}",
        "category_id": category_id,
        "answer": answer,
        "adversarial_answer": None,
        "evidence_turn_ids": [item for item in evidence if ";" not in item],
        "extra": {"evidence": evidence},
    }
    found = None if prediction is None else Prediction(f"q{number}", prediction, retrieved, number)
    return Scored(question, found)


def test_category_figures_add_up_as_evaluation_stats_does():
    items = [
        _item(1, 4, "Miso", "Miso", ["D1:1", "D1:2"], ["D1:1"]),  # F1 1, recall 1/2
        _item(2, 4, "Lisbon", "Porto", [], ["D1:1"]),  # F1 0, no evidence: left out of the recall sum
        _item(3, 4, "a cafe", None, ["D2:1"]),  # missing: F1 0, empty ranking → recall 0
        _item(4, 2, "2022", "in 2022", ["D8:6; D9:17"], ["D8:6"]),  # F1 2·(1/2)·1/(3/2) = 0.667, raw recall 0
        _item(5, 5, None, "not mentioned", ["D3:1"]),  # 1; no ranking given → recall 1
    ]
    report = locomo.score(items)
    single = report["by_category"]["Single-hop"]
    assert (single["count"], single["missing"]) == (3, 1)
    assert single["f1"] == pytest.approx(1 / 3)  # (1 + 0 + 0) / 3
    assert single["evidence_recall"] == pytest.approx(0.5 / 3)  # (0.5 + 0) / 3: every question counts below
    assert report["by_category"]["Temporal"]["f1"] == 0.667
    assert report["overall"]["f1"] == pytest.approx((1 + 0.667 + 1) / 5)
    assert report["overall_without_adversarial"]["f1"] == pytest.approx(1.667 / 4)
    assert report["overall"]["evidence_recall"] == pytest.approx((0.5 + 0 + 1) / 5)
    assert list(report["by_category"]) == ["Single-hop", "Temporal", "Adversarial"]
    # normalized: question 4 has no normalized ids here (the helper keeps only plain ids), so it adds
    # nothing; single-hop is unchanged (its evidence is plain ids)
    normalized = locomo.score(items, "normalized")
    assert normalized["by_category"]["Temporal"]["evidence_recall"] == 0
    assert normalized["by_category"]["Single-hop"]["evidence_recall"] == pytest.approx(0.5 / 3)
    assert normalized["evidence"] == "normalized"


def test_no_ranking_anywhere_gives_no_recall_figure():
    report = locomo.score([_item(1, 4, "Miso", "Miso", ["D1:1"])])
    assert "evidence_recall" not in report["overall"]
    assert report["overall"]["f1"] == 1.0


def test_a_question_without_gold_is_counted_not_scored():
    report = locomo.score([_item(1, 4, None, "Miso", []), _item(2, 4, "Miso", "Miso", [])])
    assert report["overall"]["unscorable"] == 1
    assert report["overall"]["f1"] == 1.0
