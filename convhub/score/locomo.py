"""LoCoMo's own QA figures (snap-research/LoCoMo, ``task_eval/evaluation.py`` and ``evaluation_stats.py``).

Reproduced exactly, quirks included, so that a convhub report and the paper's tables are the same numbers:

* answers: lower-cased, ASCII punctuation and commas removed, the words a/an/the/and dropped, split on
  whitespace, each word Porter-stemmed (nltk); token F1 between prediction and gold. Category 3's gold is cut
  at its first ``;``. Category 1 splits both on commas and averages, over the gold parts, the best F1 of any
  predicted part. Category 5 scores 1 when the prediction says "no information available" or "not
  mentioned". The gold is ``answer``, else ``adversarial_answer`` (the later version of the code).
* each question's figure is rounded to 3 decimals (``evaluate_qa.py`` stores ``round(f1, 3)``); a
  category's figure is the sum over its questions divided by its count.
* evidence recall (``eval_question_answering``): with a ranking and evidence, the share of the evidence ids
  found in it; when the first retrieved id starts with ``S`` the ranking holds sessions (``S3``) and an
  evidence id counts when its session is among them. Without a ranking (or without evidence) a question
  scores 1, but ``evaluation_stats.py`` then adds up only questions with evidence and divides by *every*
  question of the category. The raw evidence strings are used, so ``"D8:6; D9:17"`` never matches a turn;
  ``evidence="normalized"`` uses convhub's ``evidence_turn_ids`` instead (the ids those strings mean).

convhub's own session ids (``session_3``) are read as LoCoMo's ``S3``. A question with no gold answer in
categories 1-4 (LoCoMo's code stops at one) is left out of the F1 figures and counted as ``unscorable``.

Labels: ``original`` (LoCoMo's) or ``audited``, where a build carries an audit of them (``convhub build locomo
--errata``, the questions' ``audit``): an audited question is scored against the audit's answer where its error
type changes the answer (every type but ``WRONG_CITATION``) and against its corrected evidence (the raw list the
audit writes, or its normalized ids), which is exactly LoCoMo's code fed the corrected labels. A build with an
audit gets the figures under both labels and the ceiling the original labels leave a perfect system
(:func:`ceiling`).
"""

from __future__ import annotations

import functools
import json
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, Literal

import regex

from convhub.score.inputs import Scored, ScoreError
from convhub.score.report import Figures, Report

#: Category ids → names, as LoCoMo's code writes them (convhub's ``category`` is the same, lower-cased).
CATEGORY_NAMES = {1: "Multi-hop", 2: "Temporal", 3: "Open-domain", 4: "Single-hop", 5: "Adversarial"}
#: The order of ``evaluation_stats.py``'s table.
CATEGORY_ORDER = (4, 1, 2, 3, 5)
ADVERSARIAL = 5
EvidenceMode = Literal["raw", "normalized"]
Labels = Literal["original", "audited"]
LABELS = ("original", "audited")

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = regex.compile(r"\b(a|an|the|and)\b")


def normalize_answer(text: str) -> str:
    """LoCoMo's ``normalize_answer``: commas out, lower case, punctuation out, a/an/the/and out, spaces."""
    text = text.replace(",", "").lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


@functools.cache
def _stemmer():
    """nltk's Porter stemmer, imported when first scored: every ``convhub`` command builds the score command's
    options, and nltk's import took 0.15 s of each start."""
    from nltk.stem import PorterStemmer

    return PorterStemmer()


def _stems(text: str) -> list[str]:
    stem = _stemmer().stem
    return [stem(word) for word in normalize_answer(text).split()]


def f1_score(prediction: str, ground_truth: str) -> float:
    """Token F1 of the stemmed, normalized words (0 when no word is shared, as LoCoMo's ``f1_score``)."""
    predicted, gold = _stems(prediction), _stems(ground_truth)
    same = sum((Counter(predicted) & Counter(gold)).values())
    if same == 0:
        return 0
    precision, recall = same / len(predicted), same / len(gold)
    return (2 * precision * recall) / (precision + recall)


def f1_multi(prediction: str, ground_truth: str) -> float:
    """Category 1 (LoCoMo's ``f1``): the mean over comma-separated gold parts of the best part's F1."""
    predictions = [part.strip() for part in prediction.split(",")]
    golds = [part.strip() for part in ground_truth.split(",")]
    best = [max(f1_score(part, gold) for part in predictions) for gold in golds]
    return sum(best) / len(best)


def answer_score(category_id: int, prediction: str, gold: str | None) -> float | None:
    """One question's F1 as ``evaluate_qa.py`` stores it (rounded to 3); None when no gold can score it."""
    if category_id == ADVERSARIAL:
        said = prediction.lower()
        return 1 if "no information available" in said or "not mentioned" in said else 0
    if gold is None:
        return None
    if category_id == 3:
        gold = gold.split(";")[0].strip()
    if category_id == 1:
        return round(f1_multi(prediction, gold), 3)
    if category_id in (2, 3, 4):
        return round(f1_score(prediction, gold), 3)
    raise ScoreError(f"unknown LoCoMo category {category_id!r}")


def locomo_ids(retrieved: Iterable[str]) -> list[str]:
    """Retrieved ids as LoCoMo's code expects them: convhub's ``session_3`` becomes ``S3``."""
    return [f"S{item[len('session_') :]}" if item.startswith("session_") else item for item in retrieved]


def evidence_recall(evidence: Sequence[str], retrieved: Sequence[str] | None) -> float:
    """One question's recall as ``eval_question_answering`` computes it, rounded to 3 as it is stored.

    ``retrieved`` None (no ranking) or no evidence: 1, as LoCoMo's code. An empty ranking (a missing
    question, or a system that retrieved nothing) finds nothing: 0 (LoCoMo's code would stop on it).
    """
    if retrieved is None or not evidence:
        return 1
    if not retrieved:
        return 0
    context = locomo_ids(retrieved)
    if context[0].startswith("S"):
        sessions = [item[1:] for item in context]
        found = sum(item.split(":")[0][1:] in sessions for item in evidence)
    else:
        found = sum(item in context for item in evidence)
    return round(found / len(evidence), 3)


def question_evidence(question: dict[str, Any], mode: EvidenceMode) -> list[str]:
    """The evidence a question's recall is computed on: the source's raw strings, or convhub's turn ids."""
    if mode == "normalized":
        return list(question["evidence_turn_ids"] or [])
    raw = (question.get("extra") or {}).get("evidence") or []
    return [raw] if isinstance(raw, str) else [str(item) for item in raw]


def gold_answer(question: dict[str, Any]) -> str | None:
    """``answer``, else ``adversarial_answer`` (the later ``evaluation.py``)."""
    answer = question.get("answer")
    return answer if answer is not None else question.get("adversarial_answer")


class _Tally:
    """The sums one category (or several) adds up, as ``evaluation_stats.py`` does."""

    def __init__(self) -> None:
        self.count = self.missing = self.unscorable = self.retrieved = 0
        self.f1_sum = self.recall_sum = 0.0

    def add(self, item: Scored, mode: EvidenceMode) -> None:
        question = item.question
        self.count += 1
        self.missing += item.prediction is None
        score = answer_score(question["category_id"], item.answer_text, gold_answer(question))
        if score is None:
            self.unscorable += 1
        else:
            self.f1_sum += score
        self.retrieved += item.retrieved is not None
        evidence = question_evidence(question, mode)
        if evidence:  # evaluation_stats.py adds a question's recall only when it has evidence
            self.recall_sum += evidence_recall(evidence, item.retrieved)

    def merge(self, other: _Tally) -> None:
        for name in ("count", "missing", "unscorable", "retrieved", "f1_sum", "recall_sum"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def figures(self, with_recall: bool) -> Figures:
        scored = self.count - self.unscorable
        figures: Figures = {
            "count": self.count,
            "missing": self.missing,
            "unscorable": self.unscorable,
            "f1": self.f1_sum / scored if scored else None,
        }
        if with_recall:
            figures["retrieved"] = self.retrieved
            figures["evidence_recall"] = self.recall_sum / self.count if self.count else None
        return figures


def audit_entry(audit: dict[str, Any]) -> dict[str, Any]:
    """The audit's whole entry (JSON text in the build; decoded where the build's rows were read)."""
    entry = audit["entry"]
    return json.loads(entry) if isinstance(entry, str) else entry


def relabeled(question: dict[str, Any]) -> dict[str, Any]:
    """``question`` as the audit labels it: the audit's answer where it changes the answer, its corrected
    evidence (raw in ``extra.evidence``, normalized in ``evidence_turn_ids``); an unaudited question as it is."""
    audit = question.get("audit")
    if audit is None:
        return question
    extra = dict(question.get("extra") or {})
    extra["evidence"] = audit_entry(audit)["correct_evidence"]
    changed = {"extra": extra, "evidence_turn_ids": list(audit["evidence_turn_ids"] or [])}
    if audit["answer_changed"]:
        changed["answer"] = audit["answer"]
    return {**question, **changed}


def labeled(items: list[Scored], labels: Labels) -> list[Scored]:
    """``items`` with their questions as ``labels`` label them (what a judge is given too)."""
    if labels == "original":
        return items
    return [Scored(relabeled(item.question), item.prediction) for item in items]


def score(items: list[Scored], evidence: EvidenceMode = "raw", labels: Labels = "original") -> Report:
    """The report's figures for LoCoMo under ``labels``; where the build carries an audit, also the figures under
    each labels (``by_labels``) and the ``ceiling`` of the original labels. ``labels="audited"`` without an audit is
    an error."""
    audited = any(item.question.get("audit") is not None for item in items)
    if labels == "audited" and not audited:
        raise ScoreError(
            "--labels audited: the build carries no audit of LoCoMo's labels (build it with convhub build locomo "
            "--errata PATH, see docs/sources.md)"
        )
    if not audited:
        return {"labels": "original", **figures(items, evidence)}
    by_labels = {
        "original": figures(items, evidence),
        "audited": figures(labeled(items, "audited"), evidence),
    }
    return {"labels": labels, **by_labels[labels], "by_labels": by_labels, "ceiling": ceiling(items)}


def ceiling(items: list[Scored]) -> dict[str, Any]:
    """What a perfect system (one that answers as the audit says) can reach under the original labels, per
    category 1-4 and over them: the share of questions whose original answer the audit keeps (the audit's own
    figure, 0.9357 on locomo10.json), and LoCoMo's F1 of the audited answers against the original ones."""
    rows: dict[str, Figures] = {}
    totals = {"count": 0, "answer_corrected": 0, "f1_sum": 0.0, "scored": 0}
    for category_id in CATEGORY_ORDER:
        if category_id == ADVERSARIAL:
            continue
        questions = [item.question for item in items if item.question["category_id"] == category_id]
        if not questions:
            continue
        corrected = sum(1 for question in questions if (question.get("audit") or {}).get("answer_changed"))
        scores = [
            answer_score(category_id, gold_answer(relabeled(question)) or "", gold_answer(question))
            for question in questions
        ]
        scored = [value for value in scores if value is not None]
        figures_here = {
            "count": len(questions),
            "answer_corrected": corrected,
            "f1_sum": sum(scored),
            "scored": len(scored),
        }
        for key, value in figures_here.items():
            totals[key] += value
        rows[CATEGORY_NAMES[category_id]] = _ceiling_figures(category_id, figures_here)
    return {"overall_without_adversarial": _ceiling_figures(None, totals), "by_category": rows}


def label_lines(report: Report) -> list[str]:
    """Terminal lines for a build with an audit: the other labels' overall F1, and the ceiling."""
    if "ceiling" not in report:
        return []
    lines = []
    for name, labeled in report.get("by_labels", {}).items():
        value = labeled.get("overall_without_adversarial", {}).get("f1")
        lines.append(f"  {name} labels, f1 without adversarial: {'-' if value is None else f'{value:.3f}'}")
    top = report["ceiling"]["overall_without_adversarial"]
    lines.append(
        f"  ceiling of the original labels (categories 1-4): {top['share']:.4f} of the questions keep their answer"
        f" ({top['answer_corrected']} corrected by the audit)"
    )
    return lines


def _ceiling_figures(category_id: int | None, sums: dict[str, Any]) -> Figures:
    count = sums["count"]
    found: Figures = {} if category_id is None else {"category_id": category_id}
    found.update(
        count=count,
        answer_corrected=sums["answer_corrected"],
        share=(count - sums["answer_corrected"]) / count if count else None,
        f1=sums["f1_sum"] / sums["scored"] if sums["scored"] else None,
    )
    return found


def figures(items: list[Scored], evidence: EvidenceMode = "raw") -> Report:
    """The figures of one set of labels: per category, overall, and overall without category 5.

    Evidence recall is given only when some prediction holds a ``retrieved`` ranking (LoCoMo reports it
    only for its retrieval-augmented runs); otherwise every question would score LoCoMo's default 1.
    """
    tallies: dict[int, _Tally] = {}
    for item in items:
        category_id = item.question["category_id"]
        if category_id not in CATEGORY_NAMES:
            raise ScoreError(
                f"question {item.question['question_id']!r} has LoCoMo category {category_id!r}, not 1-5"
            )
        tallies.setdefault(category_id, _Tally()).add(item, evidence)
    with_recall = any(item.prediction is not None and item.retrieved is not None for item in items)
    overall, without = _Tally(), _Tally()
    by_category: dict[str, Figures] = {}
    for category_id in CATEGORY_ORDER:
        if category_id not in tallies:
            continue
        tally = tallies[category_id]
        overall.merge(tally)
        if category_id != ADVERSARIAL:
            without.merge(tally)
        by_category[CATEGORY_NAMES[category_id]] = {
            "category_id": category_id,
            "category": CATEGORY_NAMES[category_id].lower(),
            **tally.figures(with_recall),
        }
    return {
        "evidence": evidence,
        "overall": overall.figures(with_recall),
        "overall_without_adversarial": without.figures(with_recall),
        "by_category": by_category,
    }
