"""LongMemEval's figures (xiaowu0162/LongMemEval): retrieval recall and NDCG, and judged answer accuracy.

Retrieval (``convhub.score.longmemeval_retrieval``: the authors' metric functions and the protocols that say
what the corpus and the gold are), at k = 1, 3, 5, 10, 30, 50, over the ranking a prediction's ``retrieved``
gives (best first; a repeat is dropped): a ranking of session ids is scored at session level, a ranking of turn
ids at turn level and again at session level. The report names the protocol and counts the questions it left
out of the averages, by reason.

Accuracy, as ``src/evaluation/evaluate_qa.py`` and ``print_qa_metrics.py``: the judge's label per question
with the prompt of its type (abstention questions their own), the mean per type, overall, task-averaged,
and over abstention questions. The rows are the shared schema's: ``category`` is the question type.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from convhub.score.inputs import Scored, mean
from convhub.score.judge.client import Judge, judge_prompt, longmemeval_prompt_name
from convhub.score.longmemeval_retrieval import (
    ABSTENTION,
    KS,
    LEVELS,
    METRICS,
    NO_USER_EVIDENCE,
    Conversation,
    corpus,
    is_abstention,
    left_out,
    positions,
    ranking_level,
    retrieval_metrics,
)
from convhub.score.report import Figures, Report

__all__ = ["is_abstention", "score"]

PerQuestion = dict[str, dict[str, float]]


def _retrieval_figures(per_question: list[PerQuestion], levels: list[str]) -> Figures:
    figures: Figures = {"retrieval": {}, "retrieval_questions": {}}
    for level in levels:
        rows = [metrics[level] for metrics in per_question if level in metrics]
        names = [f"{m}@{k}" for k in KS for m in METRICS]
        figures["retrieval"][level] = {name: mean([row[name] for row in rows]) for name in names}
        figures["retrieval_questions"][level] = len(rows)
    return figures


@dataclass
class Retrieval:
    """Each question's retrieval metrics (None: not scored), the levels scored, and what was left out."""

    metrics: list[PerQuestion | None] = field(default_factory=list)
    levels: list[str] = field(default_factory=list)
    left_out: Counter = field(default_factory=Counter)
    passed_over: int = 0


def retrieval(
    items: list[Scored], conversations: dict[str, Conversation], predictions_file: str, protocol: str
) -> Retrieval:
    """The retrieval metrics of every question whose prediction ranks ids, under ``protocol``; a missing
    question (an empty ranking) counts at every level the predictions were scored at."""
    found = Retrieval()
    reasons, levels = [], set()
    for item in items:
        conversation = conversations.get(item.question["conversation_id"], Conversation())
        reasons.append(left_out(protocol, item.question, conversation))
        if item.prediction is None or item.prediction.retrieved is None:
            found.metrics.append(None)
            continue
        where = f"{predictions_file} line {item.prediction.line}"
        level = ranking_level(item.prediction.retrieved, conversation, where) or "session"
        levels.add(level)
        if reasons[-1]:
            found.metrics.append(None)
            continue
        haystack = corpus(protocol, level, conversation, item.question)
        ranking, passed = positions(item.prediction.retrieved, haystack)
        found.passed_over += passed
        found.metrics.append(retrieval_metrics(ranking, level, haystack))
    found.levels = [level for level in LEVELS if level in levels or (level == "session" and "turn" in levels)]
    if not found.levels:
        return found
    found.left_out.update(reason for reason in reasons if reason)
    for position, item in enumerate(items):
        if item.prediction is None and not reasons[position]:
            conversation = conversations.get(item.question["conversation_id"], Conversation())
            found.metrics[position] = {
                level: retrieval_metrics([], level, corpus(protocol, level, conversation, item.question))[
                    level
                ]
                for level in found.levels
            }
    return found


def score(
    items: list[Scored],
    judge: Judge | None,
    conversations: dict[str, Conversation],
    predictions_file: str,
    protocol: str = "longmemeval",
) -> Report:
    """LongMemEval's report: accuracy by the judge (when given), retrieval when predictions rank ids."""
    labels: list[bool] | None = None
    if judge is not None:
        prompts = [
            None
            if item.prediction is None
            else judge_prompt(
                longmemeval_prompt_name(item.question["category"], is_abstention(item.question)),
                item.question["question"],
                item.question["answer"] or "",
                item.answer_text,
            )
            for item in items
        ]
        labels = judge.labels(prompts)
    scored = retrieval(items, conversations, predictions_file, protocol)
    groups: dict[str, list[int]] = {}
    for position, item in enumerate(items):
        groups.setdefault(item.question["category"] or "", []).append(position)

    def figures(positions: list[int]) -> Figures:
        result: Figures = {
            "count": len(positions),
            "missing": sum(items[p].prediction is None for p in positions),
        }
        if labels is not None:
            result["accuracy"] = mean([float(labels[p]) for p in positions])
        if scored.levels:
            result.update(
                _retrieval_figures([m for p in positions if (m := scored.metrics[p])], scored.levels)
            )
        return result

    by_category: dict[str, Figures] = {
        name: {"category": name, **figures(positions)} for name, positions in groups.items()
    }
    report: Report = {"overall": figures(list(range(len(items)))), "by_category": by_category}
    if scored.levels:
        report["retrieval_protocol"] = protocol
        reasons = (ABSTENTION, NO_USER_EVIDENCE) if protocol == "longmemeval" else (ABSTENTION,)
        report["retrieval_left_out"] = {reason: scored.left_out[reason] for reason in reasons}
        if protocol == "longmemeval":
            report["retrieval_passed_over_assistant_turns"] = scored.passed_over
    if labels is not None:
        report["task_averaged_accuracy"] = mean(
            [accuracy for f in by_category.values() if (accuracy := f.get("accuracy")) is not None]
        )
        report["abstention"] = figures([p for p, item in enumerate(items) if is_abstention(item.question)])
    return report
