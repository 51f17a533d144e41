"""GigaMemory's figures: judged answer accuracy per question type (``category``) and overall.

The contest scores its hidden test set with its own judge, which it does not publish; convhub judges each
answer with the LongMemEval prompt that asks the same of it (``judge.GIGAMEMORY_PROMPTS``: ``no_info``
questions with the abstention prompt, whose "explanation" is the gold answer, e.g. "У меня нет такой
информации"). A question type outside the contest's four is judged with the plain answer prompt.
"""

from __future__ import annotations

from convhub.score.inputs import Scored, mean
from convhub.score.judge.client import GIGAMEMORY_PROMPTS, Judge, judge_prompt, longmemeval_request, says_yes
from convhub.score.report import Figures, Report

DEFAULT_PROMPT = "single-session-user"


def prompt_name(question_type: str | None) -> str:
    """The LongMemEval prompt a GigaMemory question type is judged with."""
    return GIGAMEMORY_PROMPTS.get(question_type or "", DEFAULT_PROMPT)


def score(items: list[Scored], judge: Judge) -> Report:
    """Accuracy per question type and overall; a missing answer is labelled wrong without asking."""
    bodies = [
        None
        if item.prediction is None
        else longmemeval_request(
            judge.model,
            judge_prompt(
                prompt_name(item.question["category"]),
                item.question["question"],
                item.question["answer"] or "",
                item.answer_text,
            ),
        )
        for item in items
    ]
    labels = judge.verdicts(bodies, says_yes, failed_is_negative=True)
    groups: dict[str, list[int]] = {}
    for position, item in enumerate(items):
        groups.setdefault(item.question["category"] or "", []).append(position)

    def figures(positions: list[int]) -> Figures:
        return {
            "count": len(positions),
            "missing": sum(items[p].prediction is None for p in positions),
            "accuracy": mean([float(labels[p]) for p in positions]),
        }

    return {
        "overall": figures(list(range(len(items)))),
        "by_category": {name: {"category": name, **figures(positions)} for name, positions in groups.items()},
    }
