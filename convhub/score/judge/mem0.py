"""mem0's LLM judge for LoCoMo ("J"), as most memory-system papers report LoCoMo.

Reproduced from mem0ai/mem0 ``evaluation/metrics/llm_judge.py`` at commit
6723043509933fa48d8a6755efd7d155e20dee4f (Apache-2.0), with ``evaluation/evals.py`` (which calls it) and
``evaluation/generate_scores.py`` (which averages it):

* category 5 (adversarial) is skipped;
* one request per question: a single user message, ``ACCURACY_PROMPT`` filled with the question, the gold
  answer and the generated answer (each ``str()``-ed, as ``evals.py`` does), ``response_format`` a JSON
  object, ``temperature`` 0.0, the body's keys in the order the OpenAI client sends them;
* the reply's content parsed as JSON: its ``label`` equal to ``"CORRECT"`` scores 1, anything else 0 (mem0's
  script stops on a reply that is not JSON; convhub scores it 0, "anything else");
* J per category is the mean of its labels; overall, the mean over every judged question
  (``generate_scores.py``: ``df.agg({'llm_score': 'mean'})``), i.e. LoCoMo without category 5.

convhub's own rules on top: a question without a prediction scores 0 without being asked
(``report.MISSING_RULE``), and one without a gold answer is left out, as from LoCoMo's F1.
"""

from __future__ import annotations

import json

from convhub.score.inputs import Scored, mean
from convhub.score.judge.client import Judge
from convhub.score.locomo import ADVERSARIAL, CATEGORY_NAMES, gold_answer
from convhub.score.report import Report

#: Where the prompt and request come from: the repository, file and commit they were read at.
PROMPT_VERSION = "mem0 evaluation/metrics/llm_judge.py@6723043509933fa48d8a6755efd7d155e20dee4f"

# The prompt word for word: its typographic quotes (’) and the spaces ending four of its lines (``\x20``, so that
# no editor strips them) are mem0's.
ACCURACY_PROMPT = """
Your task is to label an answer to a question as ’CORRECT’ or ’WRONG’. You will be given the following data:
    (1) a question (posed by one user to another user),\x20
    (2) a ’gold’ (ground truth) answer,\x20
    (3) a generated answer
which you will score as CORRECT/WRONG.

The point of the question is to ask about something one user should know about the other user based on their prior conversations.
The gold answer will usually be a concise and short answer that includes the referenced topic, for example:
Question: Do you remember what I got the last time I went to Hawaii?
Gold answer: A shell necklace
The generated answer might be much longer, but you should be generous with your grading - as long as it touches on the same topic as the gold answer, it should be counted as CORRECT.\x20

For time related questions, the gold answer will be a specific date, month, year, etc. The generated answer might be much longer or use relative time references (like "last Tuesday" or "next month"), but you should be generous with your grading - as long as it refers to the same date or time period as the gold answer, it should be counted as CORRECT. Even if the format differs (e.g., "May 7th" vs "7 May"), consider it CORRECT if it's the same date.

Now it’s time for the real question:
Question: {question}
Gold answer: {gold_answer}
Generated answer: {generated_answer}

First, provide a short (one sentence) explanation of your reasoning, then finish with CORRECT or WRONG.\x20
Do NOT include both CORRECT and WRONG in your response, or it will break the evaluation script.

Just return the label CORRECT or WRONG in a json format with the key as "label".
"""


def request_body(model: str, question: str, gold: str, generated: str) -> dict:
    """The body of ``evaluate_llm_judge``'s ``client.chat.completions.create`` call."""
    content = ACCURACY_PROMPT.format(question=question, gold_answer=gold, generated_answer=generated)
    return {  # the keys in the order the OpenAI client (openai 3.57) serializes them
        "model": model,
        "messages": [{"role": "user", "content": content}],
        "response_format": {"type": "json_object"},
        "temperature": 0.0,
    }


def is_correct(content: str) -> bool:
    """``json.loads(content)["label"] == "CORRECT"``; a reply that is not such JSON is not correct."""
    try:
        return json.loads(content)["label"] == "CORRECT"
    except (ValueError, RecursionError, KeyError, TypeError, IndexError):
        return False


def judged(item: Scored) -> bool:
    """Whether mem0's judge scores this question: not category 5, and a gold answer to compare with."""
    return item.question["category_id"] != ADVERSARIAL and gold_answer(item.question) is not None


def add_accuracy(report: Report, items: list[Scored], judge: Judge) -> None:
    """Add J (``accuracy``) to LoCoMo's report: per category 1-4 and overall without category 5."""
    scored = [item for item in items if judged(item)]
    bodies = [
        None
        if item.prediction is None
        else request_body(
            judge.model, str(item.question["question"]), str(gold_answer(item.question)), item.answer_text
        )
        for item in scored
    ]
    labels = judge.verdicts(bodies, is_correct)
    by_category: dict[int, list[float]] = {}
    for item, label in zip(scored, labels, strict=True):
        by_category.setdefault(item.question["category_id"], []).append(float(label))
    for category_id, values in by_category.items():
        figures = report.get("by_category", {}).get(CATEGORY_NAMES[category_id])
        if figures is not None:
            figures["accuracy"] = mean(values)
    report.setdefault("overall_without_adversarial", {})["accuracy"] = mean(
        [float(label) for label in labels]
    )
