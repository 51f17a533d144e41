"""LongMemEval's figures (xiaowu0162/LongMemEval): retrieval recall and NDCG, and judged answer accuracy.

Retrieval, as ``src/retrieval/eval_utils.py`` and ``run_retrieval.py`` compute it, at k = 1, 3, 5, 10, 30,
50, over the ranking a prediction's ``retrieved`` gives (best first, each id once: a repeat is dropped):

* ``recall_any@k``: 1 when some evidence id is in the top k; ``recall_all@k``: 1 when every one is (1 for
  a question with no evidence, as Python's ``all``); ``ndcg_any@k``: binary relevance, the first rank
  undiscounted and rank r ≥ 2 divided by log2(r), over the ideal order of the evidence (every evidence id
  is in the haystack, so the ideal is min(k, #evidence) ones).
* a ranking of session ids is scored against ``evidence_session_ids``; a ranking of turn ids against
  ``evidence_turn_ids``, and again at session level (``evaluate_retrieval_turn2session``): each turn
  becomes its session, except that a turn that is not evidence stands for a "no answer" copy of its session
  (LongMemEval renames it ``noans_...``), and k widens until k distinct ones are covered.
* abstention questions (an id holding ``_abs``) are left out, as ``run_retrieval.py`` averages.

Accuracy, as ``src/evaluation/evaluate_qa.py`` and ``print_qa_metrics.py``: the judge's label per question
with the prompt of its type (abstention questions their own), the mean per type, overall, task-averaged,
and over abstention questions. The rows are the shared schema's: ``category`` is the question type.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from convhub.score.inputs import Scored, ScoreError, mean
from convhub.score.judge import Judge, judge_prompt, longmemeval_prompt_name
from convhub.score.report import Figures, Report

KS = (1, 3, 5, 10, 30, 50)
LEVELS = ("session", "turn")
METRICS = ("recall_any", "recall_all", "ndcg_any")


def dcg(relevances: Sequence[float], k: int) -> float:
    """Discounted cumulative gain at k: the first relevance as is, rank r ≥ 2 divided by log2(r)."""
    top = list(relevances)[:k]
    if not top:
        return 0.0
    return top[0] + sum(value / math.log2(rank) for rank, value in enumerate(top[1:], 2))


def evaluate_retrieval(ranking: Sequence[Hashable], gold: Sequence[Hashable], k: int) -> tuple[float, ...]:
    """(recall_any, recall_all, ndcg_any) at k of one ranking (``eval_utils.evaluate_retrieval``)."""
    top = set(ranking[:k])
    recall_any = float(any(doc in top for doc in gold))
    recall_all = float(all(doc in top for doc in gold))
    relevant = set(gold)
    ideal = dcg([1.0] * len(relevant), k)
    actual = dcg([1.0 if doc in relevant else 0.0 for doc in ranking[:k]], k)
    return recall_any, recall_all, (actual / ideal if ideal else 0.0)


def evaluate_turns_as_sessions(
    ranking: Sequence[str], gold_turns: Sequence[str], session_of: Callable[[str], str], k: int
) -> tuple[float, ...]:
    """A turn ranking scored at session level (``eval_utils.evaluate_retrieval_turn2session``)."""
    evidence = set(gold_turns)
    # a turn that is not evidence strips to LongMemEval's "noans_" copy of its session, never a gold one
    docs: list[Hashable] = [
        session_of(turn) if turn in evidence else ("noans", session_of(turn)) for turn in ranking
    ]
    gold_sessions = list(dict.fromkeys(session_of(turn) for turn in gold_turns))
    effective_k = k
    while effective_k <= len(docs) and len(set(docs[:effective_k])) < k:
        effective_k += 1
    if len(set(docs[:effective_k])) < k:
        # LongMemEval widens k up to its whole corpus, which holds every evidence turn: as wide as that
        effective_k = max(effective_k, len(docs) + len(evidence) + 1)
    top = set(docs[:effective_k])
    recall_any = float(any(doc in top for doc in gold_sessions))
    recall_all = float(all(doc in top for doc in gold_sessions))
    # each evidence turn is one relevant corpus entry (its session is correct), each non-evidence turn none
    ideal = dcg([1.0] * len(evidence), effective_k)
    actual = dcg([1.0 if turn in evidence else 0.0 for turn in ranking[:effective_k]], effective_k)
    return recall_any, recall_all, (actual / ideal if ideal else 0.0)


@dataclass
class Corpus:
    """One conversation's ids: its sessions, and each turn's session (from the build's ``turns`` config)."""

    sessions: set[str] = field(default_factory=set)
    turn_session: dict[str, str] = field(default_factory=dict)


def read_corpora(rows: Iterable[dict[str, Any]]) -> dict[str, Corpus]:
    """Each conversation's session and turn ids, from the rows of a build's ``turns`` config."""
    corpora: dict[str, Corpus] = {}
    for row in rows:
        corpus = corpora.setdefault(row["conversation_id"], Corpus())
        corpus.sessions.add(row["session_id"])
        corpus.turn_session[row["turn_id"]] = row["session_id"]
    return corpora


def ranking_level(retrieved: Sequence[str], corpus: Corpus, where: str) -> str:
    """Whether a ranking holds session or turn ids of its conversation; a stranger or a mix is an error."""
    kinds = set()
    for item in retrieved:
        if item in corpus.sessions:
            kinds.add("session")
        elif item in corpus.turn_session:
            kinds.add("turn")
        else:
            raise ScoreError(
                f"{where}, field 'retrieved': {item!r} is neither a session nor a turn of its conversation"
            )
    if len(kinds) > 1:
        raise ScoreError(f"{where}, field 'retrieved': mixes session and turn ids (rank one kind)")
    return kinds.pop() if kinds else ""


def retrieval_metrics(
    ranking: Sequence[str], level: str, question: dict[str, Any], corpus: Corpus
) -> dict[str, dict[str, float]]:
    """Every metric at every k for one question: {level: {"recall_any@5": ...}} (turn rankings: both)."""
    ranking = list(dict.fromkeys(ranking))

    def session_of(turn: str) -> str:
        # an evidence turn the build holds no row for: LongMemEval's own rule, "<session id>_<n>"
        return corpus.turn_session.get(turn) or "_".join(turn.split("_")[:-1])

    results: dict[str, dict[str, float]] = {}
    gold_key = "evidence_session_ids" if level == "session" else "evidence_turn_ids"
    for k in KS:
        values = evaluate_retrieval(ranking, question[gold_key] or [], k)
        results.setdefault(level, {}).update(zip((f"{m}@{k}" for m in METRICS), values, strict=True))
        if level == "turn":
            values = evaluate_turns_as_sessions(ranking, question["evidence_turn_ids"] or [], session_of, k)
            results.setdefault("session", {}).update(zip((f"{m}@{k}" for m in METRICS), values, strict=True))
    return results


def is_abstention(question: dict[str, Any]) -> bool:
    """LongMemEval's test (``'_abs' in question_id``), or an ``abstention`` flag a builder put in ``extra``."""
    return "_abs" in question["question_id"] or bool((question.get("extra") or {}).get("abstention"))


def _retrieval_figures(per_question: list[dict[str, dict[str, float]]], levels: list[str]) -> Figures:
    figures: Figures = {"retrieval": {}, "retrieval_questions": {}}
    for level in levels:
        rows = [metrics[level] for metrics in per_question if level in metrics]
        names = [f"{m}@{k}" for k in KS for m in METRICS]
        figures["retrieval"][level] = {name: mean([row[name] for row in rows]) for name in names}
        figures["retrieval_questions"][level] = len(rows)
    return figures


def score(
    items: list[Scored], judge: Judge | None, corpora: dict[str, Corpus], predictions_file: str
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
    metrics: list[dict[str, dict[str, float]] | None] = []
    levels: set[str] = set()
    for item in items:
        if item.prediction is None or item.prediction.retrieved is None or is_abstention(item.question):
            metrics.append(None)
            continue
        corpus = corpora.get(item.question["conversation_id"], Corpus())
        where = f"{predictions_file} line {item.prediction.line}"
        level = ranking_level(item.prediction.retrieved, corpus, where) or "session"
        levels.add(level)
        metrics.append(retrieval_metrics(item.prediction.retrieved, level, item.question, corpus))
    shown_levels = [level for level in LEVELS if level in levels or (level == "session" and "turn" in levels)]
    # a missing question (an empty ranking) counts at every level the predictions were scored at
    for position, item in enumerate(items):
        if item.prediction is None and shown_levels and not is_abstention(item.question):
            metrics[position] = {
                level: retrieval_metrics([], level, item.question, Corpus())[level] for level in shown_levels
            }
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
        if shown_levels:
            result.update(_retrieval_figures([m for p in positions if (m := metrics[p])], shown_levels))
        return result

    by_category = {name: {"category": name, **figures(positions)} for name, positions in groups.items()}
    report: Report = {"overall": figures(list(range(len(items)))), "by_category": by_category}
    if labels is not None:
        report["task_averaged_accuracy"] = mean(
            [f["accuracy"] for f in by_category.values() if f["accuracy"] is not None]
        )
        report["abstention"] = figures([p for p, item in enumerate(items) if is_abstention(item.question)])
    return report
