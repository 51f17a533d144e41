"""Memory-evaluation prompts from a convhub build: a conversation's whole history, then one question.

    python examples/memory_prompts.py out/locomo-unified      # prints the first prompt and its answer

``sessions`` holds each conversation with its dated sessions; ``qa`` one row per question, naming its
conversation. A prompt is the history as dated sessions of ``speaker: text`` lines, then the question; the
reference answer is the ``qa`` row's ``answer`` (``adversarial_answer`` for LoCoMo's category 5).
"""

from __future__ import annotations

import sys

from datasets import load_dataset


def history(conversation: dict) -> str:
    """Every session of a conversation, in order: its date, then one ``speaker: text`` line per turn."""
    blocks = []
    for session in conversation["sessions"]:
        lines = [f"[{session['date_time'] or session['session_id']}]"]
        lines += [f"{turn['speaker']}: {turn['text']}" for turn in session["turns"]]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def memory_prompt(conversation: dict, question: dict) -> str:
    return f"{history(conversation)}\n\nBased on the conversation above, answer: {question['question']}"


def prompts(folder: str, split: str = "test"):
    """(prompt, reference answer) for every question of a build folder or Hub repo."""
    conversations = {row["conversation_id"]: row for row in load_dataset(folder, "sessions", split=split)}
    for question in load_dataset(folder, "qa", split=split):
        answer = question["answer"] if question["answer"] is not None else question["adversarial_answer"]
        yield memory_prompt(conversations[question["conversation_id"]], question), answer


if __name__ == "__main__":
    prompt, answer = next(prompts(sys.argv[1]))
    print(prompt)
    print(f"\nreference answer: {answer}")
