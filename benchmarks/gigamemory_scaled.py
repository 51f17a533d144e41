"""A large GigaMemory file, and how the builder copes with it (seconds, peak RSS).

    python benchmarks/gigamemory_scaled.py --lines 1000            # ~375 MB .jsonl, a few minutes
    python benchmarks/gigamemory_scaled.py --lines 1000 --gzip     # the same as .jsonl.gz

The file is made from the real public sample (or the packaged sample when ../shared/data is absent): line ``i``
is a copy of a real line with a new ``id`` and the dialogue number ``i % (lines // 4)``, a real dialogue marked
with its number in its first message. Each dialogue thus has four questions, spread a quarter of the file
apart: the worst case for grouping, which must not hold pending dialogues in memory. Nothing is written
into the project; the file goes to a temporary folder (or ``--workdir``).

``benchmarks/scaled_inputs.py`` calls ``write_scaled`` for ``bench.py`` (scale 1 = 1,600 lines, ~1 GB).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness

QUESTIONS_PER_DIALOGUE = 4


def template_lines() -> list[dict]:
    source = harness.real_file("gigamemory")
    if not source.exists():
        from convhub.builders.gigamemory.builder import GigamemoryBuilder

        source = Path(GigamemoryBuilder.sample_dir()) / "dialogues.jsonl"
    with open(source, encoding="utf-8") as handle:
        return [json.loads(text) for text in handle if text.strip()]


def write_scaled(path: Path, lines: int) -> Path:
    """``lines`` lines, streamed to ``path`` (``.gz`` compresses); one line in memory at a time."""
    templates = template_lines()
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


def main(argv: list[str] | None = None) -> int:
    import harness  # each case in a fresh process, with its process tree's peak memory

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1000)
    parser.add_argument("--gzip", action="store_true", help="write the file as .jsonl.gz")
    parser.add_argument("--workdir", type=Path, help="keep the generated file here (default: a temp folder)")
    parser.add_argument("--num-proc", type=int, default=2)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="gigamemory-scaled-") as temp:
        folder = args.workdir or Path(temp)
        folder.mkdir(parents=True, exist_ok=True)
        path = write_scaled(folder / ("scaled.jsonl.gz" if args.gzip else "scaled.jsonl"), args.lines)
        size = os.path.getsize(path) / 2**20
        print(f"{path.name}: {args.lines:,} lines, {size:,.1f} MiB on disk")
        every = json.dumps(["sessions", "turns", "qa", "messages"])
        cases = [
            ("json.loads (parse floor)", harness.PARSE_FLOOR, [str(path)]),
            ("build sessions", harness.BUILD, ["gigamemory", str(folder), '["sessions"]', "1"]),
            ("build all shared configs", harness.BUILD, ["gigamemory", str(folder), every, "1"]),
            (
                f"build all, num_proc={args.num_proc}",
                harness.BUILD,
                ["gigamemory", str(folder), every, str(args.num_proc)],
            ),
        ]
        harness.print_cases(cases, size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
