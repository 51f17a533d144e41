"""BEAM's figures (mohammadtavakoli78/BEAM, "Beyond a Million Tokens"), as its ``src/evaluation`` computes them.

Per question (``convhub.score.beam_metrics``): each rubric item judged with BEAM's prompt
(``convhub.score.beam_prompts``), the question's ``llm_judge_score`` the mean over its items; event ordering
also aligned line by line with the rubric by the yes/no equivalence prompt, giving precision, recall, F1,
``tau_norm`` and ``final_score``. Published figures (``src/evaluation/report_results.py``): per conversation,
each ability's mean over its questions of ``llm_judge_score``, except event ordering's, the mean ``tau_norm``;
then each ability's mean over a scale's conversations. The report gives those per ability and scale, per
conversation, and every question's scores.

The build's ``qa`` rows are BEAM's probing questions: ``category`` the ability, ``subset`` the scale, and
``extra.probing_question`` the question object as BEAM's ``probing_questions.json`` holds it, whose
``rubric`` (a list of strings) is all the evaluation reads. The predictions' ``prediction`` is BEAM's
``llm_response``.

convhub's own rules on top, each in ``docs/scoring.md``: a question without a prediction scores 0 on every
figure without being asked (``report.MISSING_RULE``); a judge reply BEAM's code could get no score from ends
the run in one line (BEAM's stops with an exception), naming the question and the rubric item; with
``--judge-runs N`` an item's score is the lower median of its runs' scores and an equivalence the majority
(a tie is no match).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Generator
from typing import Any

from convhub.score.beam_metrics import (
    ABILITIES,
    EVENT_ORDERING,
    Ask,
    NoScore,
    aligned,
    finite,
    item_score,
    ordering_scores,
    response_lines,
    rubric_mean,
)
from convhub.score.beam_prompts import (
    EQUIVALENCE_ORIGIN,
    RUBRIC_PROMPT_ORIGIN,
    equivalence_request,
    rubric_request,
)
from convhub.score.inputs import Row, Scored, ScoreError, mean
from convhub.score.judge.client import Judge, JudgeError
from convhub.score.report import Report

#: The figure BEAM publishes per ability: ``tau_norm`` for event ordering, ``llm_judge_score`` for the others.
ORDERING_FIGURES = ("llm_judge_score", "precision", "recall", "f1", "tau_norm", "final_score")
#: How much of a reply a message shows.
SHOWN_CHARS = 200
#: Where the prompts and rules come from, for the report's ``judge.prompt_version``.
PROMPT_VERSION = f"{RUBRIC_PROMPT_ORIGIN}; {EQUIVALENCE_ORIGIN}"


def prompt_names(ability: str) -> str:
    """The prompts an ability is judged with (the report's ``judge.prompts``)."""
    if ability == EVENT_ORDERING:
        return "unified_llm_judge_base_prompt, llm_equivalence"
    return "unified_llm_judge_base_prompt"


def published_metric(ability: str) -> str:
    """The per-question figure ``report_results.py`` averages for an ability."""
    return "tau_norm" if ability == EVENT_ORDERING else "llm_judge_score"


def rubric_of(question: Row, where: str) -> list[str]:
    """The question's rubric, from ``extra.probing_question`` (a list of strings BEAM's code can fill in), once
    its ``category`` is one of BEAM's abilities."""
    if question.get("category") not in ABILITIES:
        raise ScoreError(
            f"{where}: question {question['question_id']!r}, field 'category': {question.get('category')!r} is "
            f"none of BEAM's abilities ({', '.join(ABILITIES)}), whose rules its evaluation has"
        )
    extra = question.get("extra")
    name = f"{where}: question {question['question_id']!r}, field 'extra'"
    if isinstance(extra, str):
        try:
            extra = json.loads(extra)
        except ValueError as error:
            raise ScoreError(f"{name}: not JSON ({error})") from None
    probing = extra.get("probing_question") if isinstance(extra, dict) else None
    if not isinstance(probing, dict):
        raise ScoreError(f"{name}: no 'probing_question' object (is this a build of BEAM?)")
    rubric = probing.get("rubric")
    if not isinstance(rubric, list) or not rubric or not all(isinstance(item, str) for item in rubric):
        raise ScoreError(
            f"{name}.probing_question.rubric: expected a non-empty list of strings, got "
            f"{json.dumps(rubric, ensure_ascii=False)[:SHOWN_CHARS]} (BEAM's evaluation cannot score it)"
        )
    return rubric


def _judged_items(items: list[Scored], rubrics: list[list[str]], judge: Judge) -> list[list[float] | None]:
    """Every answered question's rubric item scores (None for a missing answer, never asked)."""
    places = [
        (position, index)
        for position, item in enumerate(items)
        if item.prediction is not None
        for index in range(len(rubrics[position]))
    ]
    bodies = [
        rubric_request(judge.model, rubrics[position][index], items[position].answer_text)
        for position, index in places
    ]
    replies = judge.replies(bodies)
    scores: list[list[float] | None] = [None if item.prediction is None else [] for item in items]
    for (position, index), runs in zip(places, replies, strict=True):
        ability = items[position].question["category"] or ""
        values = []
        for content in runs or []:
            try:
                values.append(item_score(content or "", ability))
            except NoScore as problem:
                raise JudgeError(
                    f"judge {judge.endpoint}: its reply on question {items[position].question['question_id']!r}, "
                    f"rubric item {index + 1}, gives no score as BEAM reads it ({problem}): "
                    f"{(content or '')[:SHOWN_CHARS]!r}"
                ) from None
        judge.tally.questions += 1
        judge.tally.unanimous += len(set(values)) == 1
        scores[position].append(statistics.median_low(values))  # type: ignore[union-attr]
    return scores


def says_yes(content: str) -> bool:
    """``llm_equivalence``'s verdict: ``"yes" in reply.lower()``."""
    return "yes" in content.lower()


def _alignments(items: list[Scored], rubrics: list[list[str]], judge: Judge) -> dict[int, list[str]]:
    """Each answered event-ordering question's aligned response lines. The questions advance together: each
    round asks every unfinished question's next (reference item, line) pair at once."""
    running: dict[int, Generator[Ask, bool, list[str]]] = {}
    pending: dict[int, Ask] = {}
    done: dict[int, list[str]] = {}

    def advance(position: int, verdict: bool | None) -> None:
        """Send the verdict on the question's last pair (None: start it) and keep its next pair, or its end."""
        alignment = running[position]
        try:
            pair = next(alignment) if verdict is None else alignment.send(verdict)
        except StopIteration as finished:
            done[position] = finished.value
            del running[position]
            pending.pop(position, None)
        else:
            pending[position] = pair

    for position, item in enumerate(items):
        if item.prediction is not None and item.question["category"] == EVENT_ORDERING:
            running[position] = aligned(rubrics[position], response_lines(item.answer_text))
            advance(position, None)
    while pending:
        asked = list(pending.items())
        verdicts = judge.verdicts(
            [equivalence_request(judge.model, reference, line) for _, (reference, line) in asked], says_yes
        )
        for (position, _), verdict in zip(asked, verdicts, strict=True):
            advance(position, verdict)
    return done


def question_scores(items: list[Scored], judge: Judge, where: str) -> list[dict[str, Any]]:
    """Every question's record: its ids, scale and ability, its rubric items' scores, ``llm_judge_score``,
    and for event ordering the ordering figures (a missing answer: every figure 0, never asked)."""
    rubrics = [rubric_of(item.question, where) for item in items]
    scores = _judged_items(items, rubrics, judge)
    alignments = _alignments(items, rubrics, judge)
    records = []
    for position, item in enumerate(items):
        ability = item.question["category"] or ""
        record: dict[str, Any] = {
            "question_id": item.question["question_id"],
            "conversation_id": item.question["conversation_id"],
            "scale": item.question.get("subset") or "",
            "ability": ability,
            "missing": item.prediction is None,
            "rubric_scores": (judged := scores[position]),
            "llm_judge_score": 0.0 if judged is None else rubric_mean(judged),
        }
        if ability == EVENT_ORDERING:
            if position in alignments:
                record.update(ordering_scores(rubrics[position], alignments[position]))
                record["aligned_lines"] = alignments[position]
            else:
                record.update(dict.fromkeys(ORDERING_FIGURES[1:], 0.0))
        records.append(record)
    return records


def _by_conversation(records: list[dict[str, Any]], metric_of) -> dict[str, dict[str, Any]]:
    """Per conversation: its scale and, per ability, the mean over its questions of ``metric_of(ability)``."""
    found: dict[str, dict[str, Any]] = {}
    for record in records:
        conversation = found.setdefault(record["conversation_id"], {"scale": record["scale"], "values": {}})
        metric = metric_of(record["ability"])
        if metric in record:
            conversation["values"].setdefault(record["ability"], []).append(record[metric])
    return {
        name: {
            "scale": entry["scale"],
            "by_ability": {a: mean(v) for a, v in sorted(entry["values"].items())},
        }
        for name, entry in found.items()
    }


def _by_scale(conversations: dict[str, dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Per scale and ability: the mean over the scale's conversations that have the ability."""
    values: dict[str, dict[str, list[float]]] = {}
    for entry in conversations.values():
        for ability, value in entry["by_ability"].items():
            values.setdefault(entry["scale"], {}).setdefault(ability, []).append(value)
    return {scale: {a: mean(v) for a, v in sorted(found.items())} for scale, found in sorted(values.items())}


def _finite_tree(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _finite_tree(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite_tree(item) for item in value]
    return finite(value) if isinstance(value, float) else value


def score(items: list[Scored], judge: Judge, where: str) -> Report:
    """BEAM's report: the published figure per ability and scale, per conversation, and every question."""
    records = question_scores(items, judge, where)
    conversations = _by_conversation(records, published_metric)
    scales = _by_scale(conversations)
    scale_names = sorted({record["scale"] for record in records})
    by_category: dict[str, Any] = {}
    for ability in sorted({record["ability"] for record in records}):
        mine = [record for record in records if record["ability"] == ability]
        by_category[ability] = {
            "category": ability,
            "count": len(mine),
            "missing": sum(record["missing"] for record in mine),
            "metric": published_metric(ability),
            "by_scale": {
                scale: scales[scale].get(ability) for scale in scale_names if ability in scales[scale]
            },
        }
    ordering = [record for record in records if record["ability"] == EVENT_ORDERING]
    if ordering:  # the figures BEAM computes for event ordering beside the published one
        by_category[EVENT_ORDERING]["also"] = {
            metric: {
                scale: figures[EVENT_ORDERING]
                for scale, figures in _by_scale(_by_conversation(ordering, lambda _, m=metric: m)).items()
            }
            for metric in ORDERING_FIGURES
            if metric != "tau_norm"
        }
    by_scale = {
        scale: {
            "conversations": sum(entry["scale"] == scale for entry in conversations.values()),
            "count": sum(record["scale"] == scale for record in records),
            "missing": sum(record["scale"] == scale and record["missing"] for record in records),
            "by_ability": scales.get(scale, {}),
        }
        for scale in scale_names
    }
    report: Report = {
        "overall": {"count": len(records), "missing": sum(record["missing"] for record in records)},
        "by_category": by_category,
        "by_scale": by_scale,
        "by_conversation": conversations,
        "question_scores": records,
    }
    return _finite_tree(report)


def summary_lines(report: Report) -> list[str]:
    """The terminal's table: each ability's published figure per scale."""
    by_scale, by_category = report.get("by_scale"), report.get("by_category", {})
    if by_scale is None:
        return []
    scales = list(by_scale)
    lines = ["  BEAM figure by scale: " + "  ".join(f"{scale:>8}" for scale in scales)]
    for ability, figures in by_category.items():
        shown = [
            f"{'-' if (value := figures.get('by_scale', {}).get(scale)) is None else f'{value:.3f}':>8}"
            for scale in scales
        ]
        lines.append(f"  {ability:<24} ({figures.get('metric', ''):<15})" + "  ".join(shown))
    return lines
