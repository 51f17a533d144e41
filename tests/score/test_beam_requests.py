"""BEAM's judge requests, byte for byte: the prompts as BEAM's own text fills them, and the request body its
LangChain client sends (``convhub.score.beam_prompts``).

The expected texts are written here independently of the module: ``UPSTREAM_RUBRIC_PROMPT`` is
``unified_llm_judge_base_prompt`` of mohammadtavakoli78/BEAM ``src/prompts.py`` at 3e12035 (as a verbatim
copy naming that commit holds it), ``UPSTREAM_RUBRIC_PROMPT_B2DA22E`` the same variable read from the
repository's own ``src/prompts.py`` at b2da22e; each is filled here as ``compute_metrics.py`` fills it
(``str.replace``, the rubric item first). The bodies' bytes were measured from LangChain's ``ChatOpenAI``
(langchain-openai 1.7.4, openai 3.57), built as BEAM's ``src/llm.py`` builds its judge; where langchain_openai
is installed, the last test runs it as the oracle.
"""

from __future__ import annotations

import json

import pytest

from convhub.score import beam_prompts
from convhub.score.judge.client import Judge

pytest_plugins = ["tests.support.judge_double"]

# Each a JSON string: the prompt's exact text, its trailing spaces and typographic quotes included.
UPSTREAM_RUBRIC_PROMPT = json.loads(
    '"\\nYou are an expert evaluator tasked with judging whether the LLM\'s response demonstrates compliance with the specified RUBRIC CRITERION.\\n\\n## EVALUATION INPUTS\\n- QUESTION (what the user asked): <question>\\n- RUBRIC CRITERION (what to check): <rubric_item>\\n- RESPONSE TO EVALUATE: <llm_response>\\n\\n## EVALUATION RUBRIC:\\nThe rubric defines a specific requirement, constraint, or expected behavior that the LLM response should demonstrate. \\n\\n**IMPORTANT**: Pay careful attention to whether the rubric specifies:\\n- **Positive requirements** (things the response SHOULD include/do)\\n- **Negative constraints** (things the response SHOULD NOT include/do, often indicated by \\"no\\", \\"not\\", \\"avoid\\", \\"absent\\")\\n\\n## RESPONSIVENESS REQUIREMENT (anchored to the QUESTION)\\nA compliant response must be **on-topic with respect to the QUESTION** and attempt to answer it.\\n- If the response does not address the QUESTION, score **0.0** and stop.\\n- For negative constraints, both must hold: (a) the response is responsive to the QUESTION, and (b) the prohibited element is absent.\\n\\n## SEMANTIC TOLERANCE RULES:\\nJudge by meaning, not exact wording.\\n- Accept **paraphrases** and **synonyms** that preserve intent.\\n- **Case/punctuation/whitespace** differences must be ignored.\\n- **Numbers/currencies/dates** may appear in equivalent forms (e.g., “$68,000”, “68k”, “68,000 USD”, or “sixty-eight thousand dollars”). Treat them as equal when numerically equivalent.\\n- If the rubric expects a number or duration, prefer **normalized comparison** (extract and compare values) over string matching.\\n\\n## STYLE NEUTRALITY (prevents style contamination):\\nIgnore tone, politeness, length, and flourish unless the rubric explicitly requires a format/structure (e.g., “itemized list”, “no citations”, “one sentence”).\\n- Do **not** penalize hedging, voice, or verbosity if content satisfies the rubric.\\n- Only evaluate format when the rubric **explicitly** mandates it.\\n\\n## SCORING SCALE:\\n- **1.0 (Complete Compliance)**: Fully complies with the rubric criterion.\\n  - Positive: required element present, accurate, properly executed (allowing semantic equivalents).\\n  - Negative: prohibited element **absent** AND response is **responsive**.\\n  \\n- **0.5 (Partial Compliance)**: Partially complies.\\n  - Positive: element present but minor inaccuracies/incomplete execution.\\n  - Negative: generally responsive and mostly avoids the prohibited element but with minor/edge violations.\\n  \\n- **0.0 (No Compliance)**: Fails to comply.\\n  - Positive: required element missing or incorrect.\\n  - Negative: prohibited element present **or** response is non-responsive/evasive even if the element is absent.\\n\\n## EVALUATION INSTRUCTIONS:\\n1. **Understand the Requirement**: Determine if the rubric is asking for something to be present (positive) or absent (negative/constraint).\\n\\n2. **Parse Compound Statements**: If the rubric contains multiple elements connected by \\"and\\" or commas, evaluate whether:\\n   - **All elements** must be present for full compliance (1.0)\\n   - **Some elements** present indicates partial compliance (0.5)\\n   - **No elements** present indicates no compliance (0.0)\\n   \\n3. **Check Compliance**: \\n   - For positive requirements: Look for the presence and quality of the required element\\n   - For negative constraints: Look for the absence of the prohibited element\\n\\n4. **Assign Score**: Based on compliance with the specific rubric criterion according to the scoring scale above.\\n\\n5. **Provide Reasoning**: Explain whether the rubric criterion was satisfied and justify the score.\\n\\n## OUTPUT FORMAT:\\nReturn your evaluation in JSON format with two fields:\\n\\n{\\n   \\"score\\": [your score: 1.0, 0.5, or 0.0],\\n   \\"reason\\": \\"[detailed explanation of whether the rubric criterion was satisfied and why this justified the assigned score]\\"\\n}\\n\\nNOTE: ONLY output the json object, without any explanation before or after that\\n"'
)
UPSTREAM_RUBRIC_PROMPT_B2DA22E = json.loads(
    '"\\nYou are an expert evaluator tasked with judging whether the LLM\'s response demonstrates compliance with the specified RUBRIC CRITERION.\\n\\n## EVALUATION INPUTS\\n- RUBRIC CRITERION (what to check): <rubric_item>\\n- RESPONSE TO EVALUATE: <llm_response>\\n\\n## EVALUATION RUBRIC:\\nThe rubric defines a specific requirement, constraint, or expected behavior that the LLM response should demonstrate. \\n\\n**IMPORTANT**: Pay careful attention to whether the rubric specifies:\\n- **Positive requirements** (things the response SHOULD include/do)\\n- **Negative constraints** (things the response SHOULD NOT include/do, often indicated by \\"no\\", \\"not\\", \\"avoid\\", \\"absent\\")\\n\\n## RESPONSIVENESS REQUIREMENT\\nA compliant response must be **on-topic** and attempt to answer it.\\n- If the response does not address the QUESTION, score **0.0** and stop.\\n- For negative constraints, both must hold: (a) the response is responsive to the QUESTION, and (b) the prohibited element is absent.\\n\\n## SEMANTIC TOLERANCE RULES:\\nJudge by meaning, not exact wording.\\n- Accept **paraphrases** and **synonyms** that preserve intent.\\n- **Case/punctuation/whitespace** differences must be ignored.\\n- **Numbers/currencies/dates** may appear in equivalent forms (e.g., “$68,000”, “68k”, “68,000 USD”, or “sixty-eight thousand dollars”). Treat them as equal when numerically equivalent.\\n- If the rubric expects a number or duration, prefer **normalized comparison** (extract and compare values) over string matching.\\n\\n## STYLE NEUTRALITY (prevents style contamination):\\nIgnore tone, politeness, length, and flourish unless the rubric explicitly requires a format/structure (e.g., “itemized list”, “no citations”, “one sentence”).\\n- Do **not** penalize hedging, voice, or verbosity if content satisfies the rubric.\\n- Only evaluate format when the rubric **explicitly** mandates it.\\n\\n## SCORING SCALE:\\n- **1.0 (Complete Compliance)**: Fully complies with the rubric criterion.\\n  - Positive: required element present, accurate, properly executed (allowing semantic equivalents).\\n  - Negative: prohibited element **absent** AND response is **responsive**.\\n  \\n- **0.5 (Partial Compliance)**: Partially complies.\\n  - Positive: element present but minor inaccuracies/incomplete execution.\\n  - Negative: generally responsive and mostly avoids the prohibited element but with minor/edge violations.\\n  \\n- **0.0 (No Compliance)**: Fails to comply.\\n  - Positive: required element missing or incorrect.\\n  - Negative: prohibited element present **or** response is non-responsive/evasive even if the element is absent.\\n\\n## EVALUATION INSTRUCTIONS:\\n1. **Understand the Requirement**: Determine if the rubric is asking for something to be present (positive) or absent (negative/constraint).\\n\\n2. **Parse Compound Statements**: If the rubric contains multiple elements connected by \\"and\\" or commas, evaluate whether:\\n   - **All elements** must be present for full compliance (1.0)\\n   - **Some elements** present indicates partial compliance (0.5)\\n   - **No elements** present indicates no compliance (0.0)\\n   \\n3. **Check Compliance**: \\n   - For positive requirements: Look for the presence and quality of the required element\\n   - For negative constraints: Look for the absence of the prohibited element\\n\\n4. **Assign Score**: Based on compliance with the specific rubric criterion according to the scoring scale above.\\n\\n5. **Provide Reasoning**: Explain whether the rubric criterion was satisfied and justify the score.\\n\\n## OUTPUT FORMAT:\\nReturn your evaluation in JSON format with two fields:\\n\\n{\\n   \\"score\\": [your score: 1.0, 0.5, or 0.0],\\n   \\"reason\\": \\"[detailed explanation of whether the rubric criterion was satisfied and why this justified the assigned score]\\"\\n}\\n\\nNOTE: ONLY output the json object, without any explanation before or after that\\n"'
)
# compute_metrics.py's llm_equivalence: a triple-quoted system message indented in its source, and an f-string
# user message whose "\\n" is a newline.
UPSTREAM_EQUIVALENCE_SYSTEM = """
            You are a binary classifier.
            If the TWO snippets describe the SAME event/fact, reply **YES**
            Otherwise reply **NO**. No extra words.
            DO NOT provide any exaplanation.
        """
MODEL = "gpt-4.1-mini"


def upstream_fill(rubric_item: str, response: str) -> str:
    return UPSTREAM_RUBRIC_PROMPT.replace("<rubric_item>", rubric_item).replace("<llm_response>", response)


def upstream_user(first: str, second: str) -> str:
    return f"""First snippet: {first} \n
                       Second snippet: {second}
                    """


def body_bytes(messages: list[tuple[str, str]]) -> bytes:
    """The body LangChain's ChatOpenAI sent (measured): compact JSON, UTF-8 unescaped, keys in this order."""
    listed = ",".join(
        '{"content":' + json.dumps(content, ensure_ascii=False) + ',"role":"' + role + '"}'
        for role, content in messages
    )
    return ('{"model":"' + MODEL + '","stream":false,"messages":[' + listed + '],"temperature":0.0}').encode()


def test_the_prompt_is_beams_text():
    assert beam_prompts.RUBRIC_JUDGE_PROMPT == UPSTREAM_RUBRIC_PROMPT
    assert UPSTREAM_RUBRIC_PROMPT.count("<question>") == 1


def test_the_older_copy_differs_only_where_the_module_says():
    differences = beam_prompts.OLDER_DIFFERENCES
    derived = (
        UPSTREAM_RUBRIC_PROMPT.replace(differences["absent"], "")
        .replace(*differences["heading"])
        .replace(*differences["rule"])
    )
    assert derived == UPSTREAM_RUBRIC_PROMPT_B2DA22E
    assert "<question>" not in UPSTREAM_RUBRIC_PROMPT_B2DA22E


@pytest.mark.parametrize(
    ("item", "response"),
    [
        ("Mentions the $2,200 quote", "It was $2,200.\nThen \u201cmore\u201d."),
        # the item goes in first: a response holding <rubric_item> stays so, an item holding <llm_response> is filled
        ("Says <llm_response> twice", "<rubric_item> and <question>"),
        ("", ""),
    ],
)
def test_rubric_prompt_is_filled_as_beam_fills_it(item, response):
    filled = beam_prompts.rubric_prompt(item, response)
    assert filled == upstream_fill(item, response)
    assert "- QUESTION (what the user asked): <question>\n" in filled  # never filled, as in BEAM


def test_equivalence_messages_are_beams():
    assert beam_prompts.EQUIVALENCE_SYSTEM == UPSTREAM_EQUIVALENCE_SYSTEM
    assert beam_prompts.equivalence_user("Booked the venue", "") == upstream_user("Booked the venue", "")


def test_request_bytes_on_the_wire(judge):
    """What convhub sends through its judge client equals, byte for byte, the body BEAM's client sends."""
    item, response = "Names the \u201cvenue\u201d \u00e9", 'R\u00e9ponse\n\n- a\t"b"'
    asked = Judge(judge.url, MODEL)
    asked.replies(
        [
            beam_prompts.rubric_request(MODEL, item, response),
            beam_prompts.equivalence_request(MODEL, item, "- a"),
        ]
    )
    # sent concurrently, so in either order
    assert sorted(judge.raw) == sorted(
        [
            body_bytes([("user", upstream_fill(item, response))]),
            body_bytes([("system", UPSTREAM_EQUIVALENCE_SYSTEM), ("user", upstream_user(item, "- a"))]),
        ]
    )


def test_langchain_sends_the_same_bytes(judge):
    """BEAM's own client, built as ``src/llm.py`` builds ``gpt_llm``, as the oracle (skipped without it)."""
    chat_openai = pytest.importorskip("langchain_openai").ChatOpenAI
    llm = chat_openai(
        model=MODEL,
        openai_api_key="k",
        openai_api_base=judge.url,
        temperature=0,
        extra_body=None,
        max_tokens=None,
    )
    item, response = "Gives \u201c68k\u201d", "line 1\n\nline \u00e9"
    llm.invoke(upstream_fill(item, response))
    llm.invoke(
        [
            {"role": "system", "content": UPSTREAM_EQUIVALENCE_SYSTEM},
            {"role": "user", "content": upstream_user(item, "x")},
        ]
    )
    Judge(judge.url, MODEL).replies(
        [
            beam_prompts.rubric_request(MODEL, item, response),
            beam_prompts.equivalence_request(MODEL, item, "x"),
        ]
    )
    assert sorted(judge.raw[2:]) == sorted(judge.raw[:2])  # convhub sends its two at once: either order
