"""GigaMemory's scaled benchmark input, found by ``benchmarks/scaled_inputs.py`` (``docs/adding-a-source.md``).

Line ``i`` is a copy of a real line (of the public sample, or of the packaged sample when it is absent) with a new
``id`` and the dialogue number ``i % (lines // 4)``, a real dialogue marked with its number in its first message.
Each dialogue thus has four questions, spread a quarter of the file apart: the worst case for grouping, which must
not hold pending dialogues in memory. ``benchmarks/gigamemory_scaled.py`` is its command line.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

#: The real file the input is made from, under the shared data folder (``CONVHUB_SHARED_DATA``).
REAL_FILE = "gigamemory/format_example.jsonl"
#: ``benchmarks/large_record.py``: the sample file whose first record it grows, and where the record goes.
LARGE_RECORD = ("dialogues.jsonl", "one.jsonl")
QUESTIONS_PER_DIALOGUE = 4
#: Full-scale size (scale 1): ~650 KB a line (the real sample's lines), ~1 GB.
LINES = 1600


def scaled_input(folder: Path, scale: float, real: Path | None) -> tuple[Path, list[Path], list[str]]:
    """One ``.jsonl`` of ~1 GB at scale 1; each dialogue's four questions a quarter of the file apart."""
    lines = max(QUESTIONS_PER_DIALOGUE, round(LINES * scale))
    return folder, [write_scaled(folder / "gigamemory_scaled.jsonl", lines, real)], []


def template_lines(real: Path | None) -> list[dict]:
    """The lines of the real file, else of the packaged sample's ``dialogues.jsonl``."""
    if real is None:
        from convhub.builders.gigamemory.builder import GigamemoryBuilder

        real = Path(GigamemoryBuilder.sample_dir()) / "dialogues.jsonl"
    with open(real, encoding="utf-8") as handle:
        return [json.loads(text) for text in handle if text.strip()]


def write_scaled(path: Path, lines: int, real: Path | None) -> Path:
    """``lines`` lines, streamed to ``path`` (``.gz`` compresses); one line in memory at a time."""
    templates = template_lines(real)
    dialogues = max(1, lines // QUESTIONS_PER_DIALOGUE)
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8") as handle:
        for index in range(lines):
            number = index % dialogues
            template = templates[number % len(templates)]
            first, *rest = template["sessions"]
            message, *messages = first["messages"]
            marked = {**message, "content": f"[диалог {number}] {message['content']}"}
            record = {
                **template,
                "id": index + 1,
                "sessions": [{**first, "messages": [marked, *messages]}, *rest],
            }
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path
