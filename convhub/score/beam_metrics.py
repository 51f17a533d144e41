"""BEAM's per-question arithmetic: the judge reply's score, a question's rubric mean, event ordering's F1 and
normalized Kendall tau-b, each as ``src/evaluation/compute_metrics.py`` of mohammadtavakoli78/BEAM computes it
(``parse_json_response``, the ``evaluate_*`` functions, ``align_with_llm`` and ``event_ordering_score``).

Rules reproduced, including those that look like mistakes (``docs/scoring.md``, "BEAM", names each):

- **The reply's JSON** is read leniently: the reply stripped; a reply opening with a code fence has the
  fence's ``[...]`` or ``{...}`` taken (greedy); that parsed as JSON, else the first ``{...}`` or ``[...]``
  (shortest); and if either fails, the *whole stripped reply* passed through ``json_repair.repair_json`` (the
  library BEAM uses) and parsed.
- **The score** is that JSON's ``"score"``: nine abilities add ``int(score)`` (Python's: 0.5 and 0.9 count 0,
  ``"1"`` counts 1, ``"0.5"`` is no score), event ordering adds ``float(score)``. A question's
  ``llm_judge_score`` is the sum over its rubric items divided by their number.
- **Event ordering's ordering score** compares the response split at ``"\\n"`` (blank lines kept, each a
  line) with the *rubric* as the reference list: each line, in order, takes the first reference item not yet
  taken that the judge calls the same event (``"yes"`` anywhere in its lowercased reply) and is replaced by
  it; an unmatched line stays as it is. Then precision, recall and F1 of the matched items (set overlap
  against counts, as BEAM computes them), and Kendall's tau-b (``scipy.stats.kendalltau``, variant "b") of the
  two lists' ranks over their union, where an item a list lacks takes the tied rank ``len(union) + 1`` and a
  repeated item its last position; ``tau_norm = (tau + 1) / 2`` (NaN where tau is undefined, as in BEAM:
  a union of one item), and ``final_score = tau_norm * f1``.
"""

from __future__ import annotations

import json
import math
import re
import warnings
from collections.abc import Generator
from typing import Any

from json_repair import repair_json

#: The ability whose rubric items add ``float(score)`` and which has an ordering score.
EVENT_ORDERING = "event_ordering"
#: BEAM's ten abilities, the keys ``run_evaluation.py`` dispatches on (it has no rule for any other).
ABILITIES = (
    "abstention",
    "contradiction_resolution",
    EVENT_ORDERING,
    "information_extraction",
    "instruction_following",
    "knowledge_update",
    "multi_session_reasoning",
    "preference_following",
    "summarization",
    "temporal_reasoning",
)

_FENCED = re.compile(r"```(?:json)?\s*(\[.*\]|\{.*\})\s*```", re.DOTALL)
_FIRST_OBJECT = re.compile(r"(\{.*?\}|\[.*?\])", re.DOTALL)


class NoScore(ValueError):
    """A judge reply from which BEAM's code gets no score (it stops there with an exception)."""


def _strict(text: str) -> Any:
    """BEAM's ``parse_json_response``: the value, or ValueError."""
    text = text.strip()
    if text.startswith("```"):
        fenced = _FENCED.search(text)
        if fenced:
            text = fenced.group(1).strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    found = _FIRST_OBJECT.search(text)
    if found:
        return json.loads(found.group(1))
    raise ValueError("no JSON in the reply")


def reply_json(content: str) -> Any:
    """The judge reply's JSON as BEAM reads it: strict first, then ``repair_json`` of the whole reply."""
    content = content.strip()
    try:
        return _strict(content)
    except (ValueError, RecursionError):
        try:
            return json.loads(repair_json(content))
        except (ValueError, RecursionError) as error:
            raise NoScore(f"no JSON even after repair: {error}") from None


def item_score(content: str, ability: str) -> float:
    """One rubric item's score from the judge's reply: ``int(score)``, or ``float(score)`` for event ordering."""
    parsed = reply_json(content)
    try:
        value = parsed["score"]
        return float(value) if ability == EVENT_ORDERING else float(int(value))
    except (KeyError, TypeError, ValueError, OverflowError, IndexError) as error:
        raise NoScore(f"no usable 'score' ({type(error).__name__}: {error})") from None


def rubric_mean(scores: list[float]) -> float:
    """A question's ``llm_judge_score``: the rubric items' scores summed, divided by their number."""
    return sum(scores) / len(scores)


def response_lines(response: str) -> list[str]:
    """The response as event ordering's list: split at ``"\\n"`` only, blank lines kept."""
    return response.split("\n")


#: What :func:`aligned` yields: a (reference item, response line) pair to ask the judge about.
Ask = tuple[str, str]


def aligned(reference: list[str], lines: list[str]) -> Generator[Ask, bool, list[str]]:
    """Each line replaced by the first reference item not yet taken that the judge calls the same event.

    A generator, so that many questions' alignments advance together: it yields each pair in BEAM's order,
    is sent the judge's verdict on it, and returns the aligned lines."""
    taken: set[int] = set()
    result = []
    for line in lines:
        match = None
        for index, item in enumerate(reference):
            if index not in taken and (yield (item, line)):
                match = index
                break
        if match is None:
            result.append(line)
        else:
            taken.add(match)
            result.append(reference[match])
    return result


def ordering_scores(reference: list[str], system: list[str]) -> dict[str, float]:
    """Precision, recall, F1, ``tau_norm`` and ``final_score`` of an aligned response against the rubric."""
    true_positives = len(set(reference) & set(system))
    false_positives = sum(item not in reference for item in system)
    false_negatives = sum(item not in system for item in reference)
    found = true_positives + false_positives
    expected = true_positives + false_negatives
    precision = true_positives / found if found else 0.0
    recall = true_positives / expected if expected else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    union = list(dict.fromkeys(reference + system))
    absent = len(union) + 1

    def ranks(sequence: list[str]) -> list[int]:
        position = {item: index + 1 for index, item in enumerate(sequence)}
        return [position.get(item, absent) for item in union]

    # scipy's import takes a second and loads extension modules: only a BEAM score pays it, not every command's start
    from scipy.stats import kendalltau

    with warnings.catch_warnings():  # one item: scipy warns and gives NaN, as in BEAM
        warnings.simplefilter("ignore")
        tau: Any = kendalltau(ranks(reference), ranks(system), variant="b", method="auto")[0]
    tau_norm = (float(tau) + 1) / 2
    return {
        "precision": float(precision),
        "recall": float(recall),
        "f1": float(f1),
        "tau_norm": tau_norm,
        "final_score": tau_norm * f1,
    }


def finite(value: float | None) -> float | None:
    """A figure for the report: NaN (BEAM's undefined tau) becomes null, as JSON has no NaN."""
    return None if value is None or math.isnan(value) else value
