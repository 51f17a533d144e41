"""BEAM's judge prompts, word for word, and the request its evaluation sends (mohammadtavakoli78/BEAM, MIT).

The texts are data: each is BEAM's own, byte for byte, with where it was read.

- :data:`RUBRIC_JUDGE_PROMPT` is ``unified_llm_judge_base_prompt`` of ``src/prompts.py`` at commit
  3e12035532eb85768f1a7cd779832b650c4b2ef9, the version whose inputs name the question
  (``- QUESTION (what the user asked): <question>``) and whose responsiveness rule is "anchored to the
  QUESTION". ``src/evaluation/compute_metrics.py`` fills it with ``.replace("<rubric_item>", item)`` then
  ``.replace("<llm_response>", response)`` and never fills ``<question>``: the judge is sent the literal
  placeholder (:func:`rubric_prompt` does the same). The copy of ``src/prompts.py`` stored at commit
  b2da22eac88bb0874c64665f13457eb99835774a differs from it in exactly the lines :data:`OLDER_DIFFERENCES`
  names (no question line, an unanchored responsiveness rule); ``docs/scoring.md`` says so.
- :data:`EQUIVALENCE_SYSTEM` and :func:`equivalence_user` are ``llm_equivalence``'s two messages in
  ``src/evaluation/compute_metrics.py`` (their indentation, the user message's ``" \\n\\n"`` and its trailing
  spaces, and the typo "exaplanation" are BEAM's).
- The request is the one ``src/llm.py``'s judge (``gpt_llm``: LangChain's ``ChatOpenAI`` with
  ``temperature=0``, no ``max_tokens``) sends through the OpenAI client: ``model``, ``stream`` false, the
  messages (each ``content`` then ``role``) and ``temperature`` 0.0, in that order. Measured with
  langchain-openai 1.7.4 and openai 3.57 against the test judge; ``tests/score/test_beam_requests.py`` runs
  LangChain itself as the oracle where it is installed.
"""

from __future__ import annotations

from typing import Any

#: Where each text was read: repository, file and commit.
RUBRIC_PROMPT_ORIGIN = (
    "BEAM src/prompts.py@3e12035532eb85768f1a7cd779832b650c4b2ef9 unified_llm_judge_base_prompt"
)
EQUIVALENCE_ORIGIN = "BEAM src/evaluation/compute_metrics.py llm_equivalence"

RUBRIC_JUDGE_PROMPT = (
    "\nYou are an expert evaluator tasked with judging whether the LLM's response demonstrates compliance with "
    "the specified RUBRIC CRITERION.\n\n## EVALUATION INPUTS\n- QUESTION (what the user asked): <question>\n"
    "- RUBRIC CRITERION (what to check): <rubric_item>\n- RESPONSE TO EVALUATE: <llm_response>\n\n"
    "## EVALUATION RUBRIC:\nThe rubric defines a specific requirement, constraint, or expected behavior that "
    "the LLM response should demonstrate. \n\n**IMPORTANT**: Pay careful attention to whether the rubric "
    "specifies:\n- **Positive requirements** (things the response SHOULD include/do)\n- **Negative "
    'constraints** (things the response SHOULD NOT include/do, often indicated by "no", "not", "avoid", '
    '"absent")\n\n## RESPONSIVENESS REQUIREMENT (anchored to the QUESTION)\nA compliant response must be '
    "**on-topic with respect to the QUESTION** and attempt to answer it.\n- If the response does not address "
    "the QUESTION, score **0.0** and stop.\n- For negative constraints, both must hold: (a) the response is "
    "responsive to the QUESTION, and (b) the prohibited element is absent.\n\n## SEMANTIC TOLERANCE RULES:\n"
    "Judge by meaning, not exact wording.\n- Accept **paraphrases** and **synonyms** that preserve intent.\n"
    "- **Case/punctuation/whitespace** differences must be ignored.\n- **Numbers/currencies/dates** may appear "
    "in equivalent forms (e.g., \u201c$68,000\u201d, \u201c68k\u201d, \u201c68,000 USD\u201d, or "
    "\u201csixty-eight thousand dollars\u201d). Treat them as equal when numerically equivalent.\n- If the "
    "rubric expects a number or duration, prefer **normalized comparison** (extract and compare values) over "
    "string matching.\n\n## STYLE NEUTRALITY (prevents style contamination):\nIgnore tone, politeness, length, "
    "and flourish unless the rubric explicitly requires a format/structure (e.g., \u201citemized list\u201d, "
    "\u201cno citations\u201d, \u201cone sentence\u201d).\n- Do **not** penalize hedging, voice, or verbosity "
    "if content satisfies the rubric.\n- Only evaluate format when the rubric **explicitly** mandates it.\n\n"
    "## SCORING SCALE:\n- **1.0 (Complete Compliance)**: Fully complies with the rubric criterion.\n  - "
    "Positive: required element present, accurate, properly executed (allowing semantic equivalents).\n  - "
    "Negative: prohibited element **absent** AND response is **responsive**.\n  \n- **0.5 (Partial "
    "Compliance)**: Partially complies.\n  - Positive: element present but minor inaccuracies/incomplete "
    "execution.\n  - Negative: generally responsive and mostly avoids the prohibited element but with "
    "minor/edge violations.\n  \n- **0.0 (No Compliance)**: Fails to comply.\n  - Positive: required element "
    "missing or incorrect.\n  - Negative: prohibited element present **or** response is "
    "non-responsive/evasive even if the element is absent.\n\n## EVALUATION INSTRUCTIONS:\n1. **Understand "
    "the Requirement**: Determine if the rubric is asking for something to be present (positive) or absent "
    "(negative/constraint).\n\n2. **Parse Compound Statements**: If the rubric contains multiple elements "
    'connected by "and" or commas, evaluate whether:\n   - **All elements** must be present for full '
    "compliance (1.0)\n   - **Some elements** present indicates partial compliance (0.5)\n   - **No "
    "elements** present indicates no compliance (0.0)\n   \n3. **Check Compliance**: \n   - For positive "
    "requirements: Look for the presence and quality of the required element\n   - For negative constraints: "
    "Look for the absence of the prohibited element\n\n4. **Assign Score**: Based on compliance with the "
    "specific rubric criterion according to the scoring scale above.\n\n5. **Provide Reasoning**: Explain "
    "whether the rubric criterion was satisfied and justify the score.\n\n## OUTPUT FORMAT:\nReturn your "
    'evaluation in JSON format with two fields:\n\n{\n   "score": [your score: 1.0, 0.5, or 0.0],\n   '
    '"reason": "[detailed explanation of whether the rubric criterion was satisfied and why this justified '
    'the assigned score]"\n}\n\nNOTE: ONLY output the json object, without any explanation before or after '
    "that\n"
)

#: What the copy at b2da22ea has instead (``src/prompts.py`` there): the question line absent, and these two
#: lines in place of the anchored ones.
OLDER_DIFFERENCES = {
    "commit": "b2da22eac88bb0874c64665f13457eb99835774a",
    "absent": "- QUESTION (what the user asked): <question>\n",
    "heading": (
        "## RESPONSIVENESS REQUIREMENT (anchored to the QUESTION)\n",
        "## RESPONSIVENESS REQUIREMENT\n",
    ),
    "rule": (
        "A compliant response must be **on-topic with respect to the QUESTION** and attempt to answer it.\n",
        "A compliant response must be **on-topic** and attempt to answer it.\n",
    ),
}

EQUIVALENCE_SYSTEM = (
    "\n            You are a binary classifier.\n            If the TWO snippets describe the SAME event/fact, "
    "reply **YES**\n            Otherwise reply **NO**. No extra words.\n            DO NOT provide any "
    "exaplanation.\n        "
)


def rubric_prompt(rubric_item: str, response: str) -> str:
    """The prompt BEAM judges one rubric item with: the item put in first, then the response (so a response
    holding ``<rubric_item>`` is not filled, and an item holding ``<llm_response>`` is), ``<question>`` left
    as it is."""
    return RUBRIC_JUDGE_PROMPT.replace("<rubric_item>", rubric_item).replace("<llm_response>", response)


def equivalence_user(reference_item: str, response_line: str) -> str:
    """``llm_equivalence``'s user message: the reference item first, the response's line second."""
    return (
        f"First snippet: {reference_item} \n\n                       Second snippet: {response_line}\n"
        "                    "
    )


def request_body(model: str, messages: list[tuple[str, str]]) -> dict[str, Any]:
    """The body BEAM's judge client sends for ``messages`` ((role, content) pairs), key for key."""
    return {
        "model": model,
        "stream": False,
        "messages": [{"content": content, "role": role} for role, content in messages],
        "temperature": 0.0,
    }


def rubric_request(model: str, rubric_item: str, response: str) -> dict[str, Any]:
    """One rubric item's request: the filled prompt as a single user message."""
    return request_body(model, [("user", rubric_prompt(rubric_item, response))])


def equivalence_request(model: str, reference_item: str, response_line: str) -> dict[str, Any]:
    """One equivalence question's request: BEAM's system message, then the two snippets."""
    return request_body(
        model, [("system", EQUIVALENCE_SYSTEM), ("user", equivalence_user(reference_item, response_line))]
    )
