"""The LLM judge: LongMemEval's published yes/no prompts, asked of any OpenAI-compatible endpoint.

The prompts are those of LongMemEval's ``src/evaluation/evaluate_qa.py`` (xiaowu0162/LongMemEval, MIT
license), word for word, one per question type and one for abstention questions; the request is the one it
sends (one user message, ``temperature`` 0, ``max_tokens`` 10, ``n`` 1) and a reply containing "yes" (any
case) marks the answer correct, as there. GigaMemory's four question types are judged with the prompt of the
LongMemEval type that asks the same thing (``GIGAMEMORY_PROMPTS``); its ``no_info`` questions with the
abstention prompt.

The endpoint is ``--judge-url`` (a base URL such as ``https://api.openai.com/v1`` or a local vLLM's
``http://127.0.0.1:8001/v1``); requests go to ``BASE/chat/completions`` through httpx2 (huggingface_hub's
HTTP client, already installed), each bounded in time and size and retried a bounded number of times
(``transport``), ``workers`` at once, each reply cached as it arrives (``cache``) and each question
asked ``runs`` times, its verdict the majority. A failed verdict ends the run (one :class:`JudgeError` line)
unless the benchmark's policy counts it as negative (GigaMemory's contest does).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from convhub.score.inputs import ScoreError
from convhub.score.judge.cache import JudgeCache, request_key
from convhub.score.judge.transport import Endpoint, JudgeError, Reply, VerdictFailed

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

__all__ = ["Judge", "JudgeError", "JudgeTally", "VerdictFailed", "judge_prompt", "longmemeval_prompt_name"]


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


def longmemeval_request(model: str, prompt: str) -> dict[str, Any]:
    """The body ``evaluate_qa.py`` sends: one user message, ``n`` 1, ``temperature`` 0, ``max_tokens`` 10."""
    return {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "n": 1,
        "temperature": 0,
        "max_tokens": 10,
    }


def says_yes(content: str) -> bool:
    """LongMemEval's verdict: ``'yes' in reply.lower()``."""
    return "yes" in content.strip().lower()


@dataclass
class JudgeTally:
    """What the verdicts cost and how the runs agreed, for the report's ``judge`` section."""

    #: requests the endpoint answered in this run (a cached reply is no request)
    calls: int = 0
    #: replies read from the cache instead
    cached: int = 0
    #: verdicts not obtained after the retries (GigaMemory: counted as negative)
    failed: int = 0
    #: questions judged, and those whose runs all gave the same verdict
    questions: int = 0
    unanimous: int = 0
    #: the ``usage`` of every reply the verdicts rest on, cached ones included
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class Judge:
    """An OpenAI-compatible chat endpoint, asked for one verdict per answer (``runs`` times each)."""

    url: str
    model: str
    api_key: str | None = None
    timeout: float = 60.0
    retries: int = RETRIES
    workers: int = 4
    runs: int = 1
    cache: JudgeCache | None = None
    tally: JudgeTally = field(default_factory=JudgeTally)
    #: whether the plain-http warning (``transport.clear_text_warning``) was printed: once, before a request
    warned: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        self.http = Endpoint(self.url, self.api_key, self.timeout, self.retries)
        #: ``BASE/chat/completions`` without credentials: what messages and the cache key show
        self.endpoint = self.http.shown

    @property
    def calls(self) -> int:
        return self.tally.calls

    def close(self) -> None:
        """Nothing to release: each batch of verdicts opens and closes its own connections."""

    def label(self, prompt: str) -> bool:
        """True when the judge's reply to LongMemEval's ``prompt`` says yes."""
        return self.labels([prompt])[0]

    def labels(self, prompts: Sequence[str | None]) -> list[bool]:
        """LongMemEval's verdict for each prompt; None (a missing answer) is False, never asked."""
        bodies = [None if prompt is None else longmemeval_request(self.model, prompt) for prompt in prompts]
        return self.verdicts(bodies, says_yes)

    def verdicts(
        self,
        bodies: Sequence[dict[str, Any] | None],
        is_correct: Callable[[str], bool],
        failed_is_negative: bool = False,
    ) -> list[bool]:
        """Each request's verdict (``is_correct`` of the reply's content), the majority of ``runs`` replies
        (a tie is negative); None is False, never asked. A verdict that fails after its retries ends the
        run, or with ``failed_is_negative`` counts as a negative vote, unless every verdict failed."""
        results = []
        for runs in self.replies(bodies, failed_is_negative):
            if runs is None:
                results.append(False)
                continue
            votes = [content is not None and is_correct(content) for content in runs]
            self.tally.questions += 1
            self.tally.unanimous += len(set(votes)) == 1
            results.append(sum(votes) * 2 > self.runs)
        return results

    def replies(
        self, bodies: Sequence[dict[str, Any] | None], failed_is_negative: bool = False
    ) -> list[list[str | None] | None]:
        """The content of each request's ``runs`` replies (None for a failed one, with ``failed_is_negative``);
        None for a None body, never asked. A benchmark whose verdict is no yes/no (BEAM's rubric scores)
        reads the replies themselves; :meth:`verdicts` counts votes over them."""
        jobs = [
            (position, run, body) for position, body in enumerate(bodies) if body for run in range(self.runs)
        ]
        replies, last_failure = asyncio.run(self._ask_all(jobs, failed_is_negative))
        if jobs and all(reply is None for reply in replies.values()):
            raise JudgeError(f"{last_failure}; no verdict was obtained")
        return [
            None
            if not body
            else [
                None if (reply := replies[(position, run)]) is None else reply.content
                for run in range(self.runs)
            ]
            for position, body in enumerate(bodies)
        ]

    async def _ask_all(
        self, jobs: list[tuple[int, int, dict[str, Any]]], failed_is_negative: bool
    ) -> tuple[dict[tuple[int, int], Reply | None], str]:
        """Every job's reply (None: failed), ``workers`` requests at once; the first error that ends the run
        cancels the others."""
        slots = asyncio.Semaphore(max(1, self.workers))
        replies: dict[tuple[int, int], Reply | None] = {}
        failures: list[str] = []
        async with self.http.client() as client:

            async def ask(position: int, run: int, body: dict[str, Any]) -> None:
                try:
                    replies[(position, run)] = await self._reply(client, slots, body, run)
                except VerdictFailed as failure:
                    if not failed_is_negative:
                        raise
                    self.tally.failed += 1
                    failures.append(str(failure))
                    replies[(position, run)] = None

            tasks = [asyncio.ensure_future(ask(*job)) for job in jobs]
            try:
                done, _ = (
                    await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION) if tasks else ((), ())
                )
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
            for task in done:
                if not task.cancelled() and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
        return replies, failures[-1] if failures else ""

    def _warn_before_sending(self) -> None:
        """Say once, before the first request leaves (none for cached replies), that its credential goes out
        unencrypted (``--judge-url http://`` to another machine with a key)."""
        if self.http.clear_text and not self.warned:
            self.warned = True
            print(self.http.clear_text, file=sys.stderr)

    async def _reply(self, client, slots: asyncio.Semaphore, body: dict[str, Any], run: int) -> Reply:
        """The cached reply to this request and run, else the endpoint's (stored as soon as it arrives)."""
        key = request_key(self.endpoint, body, run) if self.cache else ""
        reply = self.cache.get(key, self.endpoint, body, run) if self.cache else None
        if reply is not None:
            self.tally.cached += 1
        else:
            self._warn_before_sending()
            async with slots:
                reply = await self.http.complete(client, body)
            self.tally.calls += 1
            if self.cache:
                self.cache.put(key, self.endpoint, body, run, reply)
        self.tally.prompt_tokens += reply.prompt_tokens
        self.tally.completion_tokens += reply.completion_tokens
        return reply
