"""The LLM judge: LongMemEval's published yes/no prompts, asked of any OpenAI-compatible endpoint.

The prompts are those of LongMemEval's ``src/evaluation/evaluate_qa.py`` (xiaowu0162/LongMemEval, MIT
license), word for word, one per question type and one for abstention questions; the request is the one it
sends (one user message, ``temperature`` 0, ``max_tokens`` 10, ``n`` 1) and a reply containing "yes" (any
case) marks the answer correct, as there. GigaMemory's four question types are judged with the prompt of the
LongMemEval type that asks the same thing (``GIGAMEMORY_PROMPTS``); its ``no_info`` questions with the
abstention prompt.

The endpoint is ``--judge-url`` (a base URL such as ``https://api.openai.com/v1`` or a local vLLM's
``http://127.0.0.1:8001/v1``); requests go to ``BASE/chat/completions`` through httpx2 (huggingface_hub's
HTTP client, already installed) with a timeout, retried on a dropped connection, 429 or 5xx. Any failure
ends scoring with one :class:`JudgeError` line.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx2

from convhub.score.inputs import ScoreError

#: Where the prompts come from: the repository, file and commit they were read at.
PROMPT_VERSION = "LongMemEval src/evaluation/evaluate_qa.py@b11ff723381cf41e744c5524be0c52b3a408516c"

_ANSWER_PROMPT = (
    "I will give you a question, a correct answer, and a response from a model. Please answer yes if the "
    "response contains the correct answer. Otherwise, answer no. If the response is equivalent to the correct "
    "answer or contains all the intermediate steps to get the correct answer, you should also answer yes. If "
    "the response only contains a subset of the information required by the answer, answer no. "
)
_QUESTION_PARTS = "\n\nQuestion: {}\n\nCorrect Answer: {}\n\nModel Response: {}\n\n"
_IS_CORRECT = "Is the model response correct? Answer yes or no only."

#: Question type → template (``{}`` three times: question, answer or rubric or explanation, response).
TEMPLATES = {
    "single-session-user": _ANSWER_PROMPT + _QUESTION_PARTS + _IS_CORRECT,
    "temporal-reasoning": _ANSWER_PROMPT
    + "In addition, do not penalize off-by-one errors for the number of days. If the question asks for the "
    "number of days/weeks/months, etc., and the model makes off-by-one errors (e.g., predicting 19 days when "
    "the answer is 18), the model's response is still correct. " + _QUESTION_PARTS + _IS_CORRECT,
    "knowledge-update": "I will give you a question, a correct answer, and a response from a model. Please "
    "answer yes if the response contains the correct answer. Otherwise, answer no. If the response contains "
    "some previous information along with an updated answer, the response should be considered as correct as "
    "long as the updated answer is the required answer." + _QUESTION_PARTS + _IS_CORRECT,
    "single-session-preference": "I will give you a question, a rubric for desired personalized response, "
    "and a response from a model. Please answer yes if the response satisfies the desired response. "
    "Otherwise, answer no. The model does not need to reflect all the points in the rubric. The response is "
    "correct as long as it recalls and utilizes the user's personal information correctly."
    "\n\nQuestion: {}\n\nRubric: {}\n\nModel Response: {}\n\n" + _IS_CORRECT,
    "abstention": "I will give you an unanswerable question, an explanation, and a response from a model. "
    "Please answer yes if the model correctly identifies the question as unanswerable. The model could say "
    "that the information is incomplete, or some other information is given but the asked information is not."
    "\n\nQuestion: {}\n\nExplanation: {}\n\nModel Response: {}\n\n"
    "Does the model correctly identify the question as unanswerable? Answer yes or no only.",
}
TEMPLATES["single-session-assistant"] = TEMPLATES["multi-session"] = TEMPLATES["single-session-user"]

#: GigaMemory's question types → the LongMemEval prompt that asks the same of an answer.
GIGAMEMORY_PROMPTS = {
    "fact_equal_session": "single-session-user",
    "info_consolidation": "multi-session",
    "info_updating": "knowledge-update",
    "no_info": "abstention",
}

RETRIES = 3
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


class JudgeError(ScoreError):
    """The judge could not be asked, or its reply is not a chat completion."""


def judge_prompt(prompt_name: str, question: str, answer: str, response: str) -> str:
    """The prompt LongMemEval's ``get_anscheck_prompt`` builds for a question type (or ``abstention``)."""
    return TEMPLATES[prompt_name].format(question, answer, response)


def longmemeval_prompt_name(question_type: str | None, abstention: bool) -> str:
    """LongMemEval's choice: the abstention prompt for ``_abs`` questions, else the type's own."""
    if abstention:
        return "abstention"
    if question_type not in TEMPLATES or question_type == "abstention":
        raise ScoreError(f"no LongMemEval judge prompt for question type {question_type!r}")
    return question_type


@dataclass
class Judge:
    """An OpenAI-compatible chat endpoint asked LongMemEval's yes/no question for one answer at a time."""

    url: str
    model: str
    api_key: str | None = None
    timeout: float = 60.0
    retries: int = RETRIES
    workers: int = 4
    calls: int = 0

    def __post_init__(self) -> None:
        self.endpoint = self.url.rstrip("/") + "/chat/completions"
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        self._client = httpx2.Client(timeout=self.timeout, headers=headers)

    def close(self) -> None:
        self._client.close()

    def label(self, prompt: str) -> bool:
        """True when the judge's reply to ``prompt`` says yes (LongMemEval: ``'yes' in reply.lower()``)."""
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            "n": 1,
            "temperature": 0,
            "max_tokens": 10,
        }
        reply = self._post(body)
        self.calls += 1
        try:
            content = reply["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise JudgeError(
                f"judge {self.endpoint}: the reply is not a chat completion (no choices[0].message.content)"
            ) from None
        if not isinstance(content, str):
            raise JudgeError(f"judge {self.endpoint}: the reply's message content is not text")
        return "yes" in content.strip().lower()

    def labels(self, prompts: Sequence[str | None]) -> list[bool]:
        """Each prompt's label, asked ``workers`` at a time; None (a missing answer) is False, never asked."""
        asked: Callable[[str | None], bool] = lambda prompt: False if prompt is None else self.label(prompt)  # noqa: E731
        with ThreadPoolExecutor(max_workers=max(1, self.workers)) as pool:
            return list(pool.map(asked, prompts))

    def _post(self, body: dict[str, Any]) -> Any:
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                response = self._client.post(self.endpoint, json=body)
            except httpx2.HTTPError as error:
                if last:
                    raise JudgeError(f"judge {self.endpoint}: {type(error).__name__}: {error}") from None
            else:
                if response.status_code < 400:
                    try:
                        return response.json()
                    except ValueError:
                        raise JudgeError(f"judge {self.endpoint}: the reply is not JSON") from None
                if last or response.status_code not in RETRY_STATUS:
                    text = " ".join(response.text.split())[:200]
                    raise JudgeError(f"judge {self.endpoint}: HTTP {response.status_code}: {text}")
            time.sleep(min(8.0, 0.5 * 2**attempt))
        raise AssertionError("unreachable")
