"""BEAM's per-question rules one by one (``convhub.score.beam_metrics``), each expectation worked out by hand
from BEAM's ``compute_metrics.py`` as ``docs/scoring.md`` ("BEAM") states it."""

from __future__ import annotations

import math

import pytest

from convhub.score.beam_metrics import (
    NoScore,
    aligned,
    item_score,
    ordering_scores,
    reply_json,
    response_lines,
    rubric_mean,
)


@pytest.mark.parametrize(
    ("reply", "ability", "score"),
    [
        ('{"score": 1.0, "reason": "r"}', "abstention", 1.0),
        ('{"score": 0.5, "reason": "r"}', "abstention", 0.0),  # int(0.5)
        ('{"score": 0.5, "reason": "r"}', "event_ordering", 0.5),  # float(0.5)
        ('{"score": "1"}', "summarization", 1.0),  # int("1")
        ('{"score": "0.5"}', "event_ordering", 0.5),  # float("0.5")
        ('{"score": true}', "knowledge_update", 1.0),
        ('```json\n{"score": 1.0}\n```', "temporal_reasoning", 1.0),  # the fence's object
        ('```\n{"score": 1.0}\n```', "temporal_reasoning", 1.0),
        ('Sure. {"score": 1.0, "reason": "x"} Done.', "abstention", 1.0),  # the first {...}
        # the first {...} is cut at the inner "}" and fails: the whole reply is repaired instead
        ('Result: {"score": 1, "detail": {"a": 0}} end', "abstention", 1.0),
        ('{"score": 1.0, "reason": "he said "no""}', "abstention", 1.0),  # json_repair mends the quotes
        ('{"score": 1, "reason": "cut', "abstention", 1.0),
        ('\n  {"score": 0}  \n', "preference_following", 0.0),
    ],
)
def test_a_replys_score(reply, ability, score):
    assert item_score(reply, ability) == score


@pytest.mark.parametrize(
    ("reply", "ability"),
    [
        ("I cannot judge this.", "abstention"),  # nothing to repair
        ('{"score": "0.5"}', "abstention"),  # int("0.5") fails in BEAM's code too
        ('{"reason": "no score"}', "abstention"),
        ('[{"score": 1}]', "abstention"),  # a list: BEAM indexes it with "score" and fails
        ('{"score": NaN}', "abstention"),  # int(nan)
        ('{"score": null}', "event_ordering"),
    ],
)
def test_a_reply_beam_gets_no_score_from(reply, ability):
    with pytest.raises(NoScore):
        item_score(reply, ability)


def test_a_list_is_json_too():
    assert reply_json("[1, 2]") == [1, 2]


def test_rubric_mean():
    assert rubric_mean([1.0, 0.0, 1.0]) == pytest.approx(2 / 3, abs=1e-12)


def test_response_lines_keep_blank_ones():
    assert response_lines("a\n\nb\n") == ["a", "", "b", ""]
    assert response_lines("a\r\nb") == ["a\r", "b"]  # split at "\n" only


def drive(reference, lines, same):
    """Run the alignment against a verdict table, recording every pair asked."""
    asked, alignment = [], aligned(reference, lines)
    try:
        pair = next(alignment)
        while True:
            asked.append(pair)
            pair = alignment.send(pair in same)
    except StopIteration as finished:
        return finished.value, asked


def test_each_line_takes_the_first_unused_match():
    result, asked = drive(["A", "B"], ["x", "y", "z"], {("A", "x"), ("B", "x"), ("A", "y"), ("B", "z")})
    assert result == ["A", "y", "B"]  # y would match A, which x took; B is not the same as y
    assert asked == [("A", "x"), ("B", "y"), ("B", "z")]


def test_a_repeated_line_matches_once():
    result, _ = drive(["A"], ["a", "a"], {("A", "a")})
    assert result == ["A", "a"]


def test_ordering_with_ties_on_one_side():
    # reference [A, B, C]; aligned [B, A, x, ""]: tp 2, fp 2, fn 1; union [A, B, C, x, ""], absent rank 6:
    # ranks (1, 2, 3, 6, 6) and (2, 1, 6, 3, 4): 6 concordant, 3 discordant, one pair tied in the reference only
    scores = ordering_scores(["A", "B", "C"], ["B", "A", "x", ""])
    tau = 3 / math.sqrt(10 * 9)
    expected = {"precision": 0.5, "recall": 2 / 3, "f1": 4 / 7, "tau_norm": (tau + 1) / 2}
    for name, value in expected.items():
        assert abs(scores[name] - value) <= 1e-12, name
    assert abs(scores["final_score"] - (tau + 1) / 2 * 4 / 7) <= 1e-12


def test_ordering_with_ties_on_both_sides():
    # reference [A, B]; aligned [x, y]: nothing matched. union [A, B, x, y], absent rank 5:
    # ranks (1, 2, 5, 5) and (5, 5, 1, 2): 4 discordant pairs, one tie in each list only: tau-b = -4 / sqrt(5 * 5)
    scores = ordering_scores(["A", "B"], ["x", "y"])
    assert (scores["precision"], scores["recall"], scores["f1"], scores["final_score"]) == (
        0.0,
        0.0,
        0.0,
        0.0,
    )
    assert abs(scores["tau_norm"] - (1 - 4 / 5) / 2) <= 1e-12


def test_a_perfect_order():
    scores = ordering_scores(["A", "B", "C"], ["A", "B", "C"])
    assert scores == {"precision": 1.0, "recall": 1.0, "f1": 1.0, "tau_norm": 1.0, "final_score": 1.0}


def test_a_repeated_item_takes_its_last_position():
    # aligned [A, B, A]: rank of A is 3; union [A, B]: ranks (1, 2) and (3, 2): discordant, tau -1
    scores = ordering_scores(["A", "B"], ["A", "B", "A"])
    assert scores["tau_norm"] == 0.0 and scores["f1"] == 1.0


def test_one_item_has_no_tau():
    assert math.isnan(ordering_scores(["A"], ["A"])["tau_norm"])
