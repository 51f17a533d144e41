"""examples/memory_prompts.py, run as README shows it, on the LoCoMo sample build."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import datasets
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_example_prints_the_whole_history_the_question_and_its_answer(sample_builds):
    folder = sample_builds["locomo"].output
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "memory_prompts.py"), str(folder)],
        capture_output=True,
        text=True,
        check=True,
    )
    question = datasets.load_dataset(str(folder), "qa", split="test")[0]
    conversation = next(
        row
        for row in datasets.load_dataset(str(folder), "sessions", split="test")
        if row["conversation_id"] == question["conversation_id"]
    )
    prompt, _, answer = done.stdout.rpartition("\nreference answer: ")
    position = 0
    for session in conversation["sessions"]:
        position = prompt.index(f"[{session['date_time']}]", position)
        for turn in session["turns"]:
            position = prompt.index(f"{turn['speaker']}: {turn['text']}", position)  # every turn, in order
    assert prompt.rstrip().endswith(f"answer: {question['question']}")
    expected = question["answer"] if question["answer"] is not None else question["adversarial_answer"]
    assert answer.strip() == expected
