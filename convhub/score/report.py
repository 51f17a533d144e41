"""The report ``convhub score`` writes: one JSON shape for every benchmark, typed here.

Per category and overall, a :class:`Figures` gives the count of questions, how many had no prediction
(``missing``, scored 0) and each metric. Figures are full-precision floats (the benchmarks' scripts round
only what they print); a metric over no question is ``null``, never 0.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

#: What a question without a prediction scores, written into every report.
MISSING_RULE = "0: a question without a prediction is scored as an empty answer and an empty ranking"


class Figures(TypedDict, total=False):
    """One category's (or all questions') figures; which metrics appear depends on the benchmark."""

    category_id: int | None
    category: str | None
    count: int
    missing: int
    #: questions whose gold answer is absent: left out of the answer figures (LoCoMo's code cannot score them)
    unscorable: int
    f1: float | None
    #: predictions that gave a ``retrieved`` ranking (missing questions count as an empty one)
    retrieved: int
    evidence_recall: float | None
    accuracy: float | None
    #: LongMemEval retrieval: {"session": {"recall_any@5": ...}, "turn": {...}}, over non-abstention questions
    retrieval: dict[str, dict[str, float | None]]
    #: LongMemEval: how many questions each level's retrieval figures are over
    retrieval_questions: dict[str, int]
    #: LoCoMo's ceiling: questions whose answer an audit of the labels corrects, and the share it keeps
    answer_corrected: int
    share: float | None
    #: BEAM: the figure it publishes for the ability (llm_judge_score, or tau_norm for event ordering), that
    #: figure per scale, and event ordering's other figures per scale
    metric: str
    by_scale: dict[str, float | None]
    also: dict[str, dict[str, float | None]]


class JudgeInfo(TypedDict):
    """Which judge gave the accuracy figures, with which prompts, and at what cost (``judge.options.judge_section``
    sets every key but ``protocol`` and ``cost``)."""

    model: str
    #: the base URL, without credentials
    url: str
    #: "mem0-judge" for LoCoMo's J; absent for LongMemEval's and GigaMemory's own judge
    protocol: NotRequired[str]
    prompt_version: str
    #: question category → the prompt used for it
    prompts: dict[str, str]
    #: requests the endpoint answered in this run; replies read from the judge cache instead
    calls: int
    cached: int
    #: times each question was asked (its verdict the majority), and the share of questions whose runs agree
    runs: int
    agreement: float | None
    #: verdicts not obtained after the retries, counted as negative (GigaMemory's contest rule)
    failed_verdicts: int
    #: the ``usage`` of the replies the verdicts rest on ({"prompt": N, "completion": N}), and their cost
    tokens: dict[str, int]
    cost: NotRequired[float]


class NeedsJudge(TypedDict):
    """The figures a report made without a judge leaves out, and the options that give them."""

    figures: list[str]
    give: str


class Report(TypedDict, total=False):
    #: "convhub score": what tells a report convhub may replace from a file of the user's (``score.output``)
    written_by: str
    benchmark: str
    data: str
    #: the subset scored (``--subset``), when one was chosen
    subset: str
    data_hash: str
    #: the build's input files as its card lists them: [{name, bytes, sha256}]; None for an older build
    source_files: list | None
    #: why source_files is None
    source_files_note: str
    predictions: str
    questions: int
    predicted: int
    missing: int
    missing_scored_as: str
    #: LoCoMo: "raw" (its code's own evidence strings) or "normalized" (convhub's evidence_turn_ids)
    evidence: str
    judge: JudgeInfo
    overall: Figures
    #: LoCoMo: every category but 5 (adversarial)
    overall_without_adversarial: Figures
    #: LongMemEval: the mean of the per-type accuracies (its print_qa_metrics.py "Task-averaged Accuracy")
    task_averaged_accuracy: float | None
    #: LongMemEval: the abstention questions (ids holding "_abs") across types
    abstention: Figures
    by_category: dict[str, Figures]
    #: LongMemEval without a judge: the figures left out, and the options that give them
    needs_judge: NeedsJudge
    #: LongMemEval: "longmemeval" (its run_retrieval.py's corpus and gold) or "convhub" (the build's evidence)
    retrieval_protocol: str
    #: LongMemEval: the questions left out of the retrieval averages, by reason (abstention, no_user_evidence)
    retrieval_left_out: dict[str, int]
    #: LongMemEval, its own protocol: ranked assistant turns, which its corpus does not hold (passed over)
    retrieval_passed_over_assistant_turns: int
    #: LoCoMo: "original" or "audited", the labels of the figures above; with an audit in the build, the figures
    #: under each labels and what the original labels leave a perfect system (``convhub.score.locomo``)
    labels: str
    by_labels: dict[str, Report]
    ceiling: dict[str, Any]
    #: BEAM: per scale its conversations, questions and published figure per ability; per conversation its scale
    #: and figure per ability; every question's scores (``convhub.score.beam``)
    by_scale: dict[str, Any]
    by_conversation: dict[str, Any]
    question_scores: list[dict[str, Any]]


#: The retrieval figures the terminal shows per level (the report holds every metric at every k).
SUMMARY_RETRIEVAL = ("recall_any@5", "ndcg_any@10")


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def summary_lines(report: Report) -> list[str]:
    """A few lines for the terminal: each category's count and figures, then the overall ones."""
    lines = []
    rows = [*report.get("by_category", {}).items(), ("overall", report.get("overall", {}))]
    if "overall_without_adversarial" in report:
        rows.append(("overall without adversarial", report["overall_without_adversarial"]))
    if "abstention" in report:
        rows.append(("abstention", report["abstention"]))
    for name, figures in rows:
        shown = [f"{figures.get('count', 0):>5} questions"]
        for metric in ("f1", "evidence_recall", "accuracy"):
            value = figures.get(metric)
            if metric in figures:
                shown.append(f"{metric} {_figure(value)}")
        for level, values in figures.get("retrieval", {}).items():
            shown.extend(f"{level} {name} {_figure(values.get(name))}" for name in SUMMARY_RETRIEVAL)
        if missing := figures.get("missing"):
            shown.append(f"{missing} missing")
        lines.append(f"  {name:<28} " + "  ".join(shown))
    left_out = report.get("retrieval_left_out")
    if left_out is not None:
        reasons = ", ".join(f"{count} {reason.replace('_', ' ')}" for reason, count in left_out.items())
        protocol = report.get("retrieval_protocol")
        lines.append(f"  retrieval ({protocol} protocol) leaves out: {reasons}")
    needs = report.get("needs_judge")
    if needs:
        lines.append(
            f"  not scored: {', '.join(needs['figures'])} (an LLM judge gives them: {needs['give']})"
        )
    return lines
