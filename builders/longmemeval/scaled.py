"""LongMemEval's scaled benchmark input, found by ``benchmarks/scaled_inputs.py`` (``docs/adding-a-source.md``):
``longmemeval_s``-sized haystacks around the packaged sample's questions."""

from __future__ import annotations

import json
from pathlib import Path

#: No real file on this machine: the input grows the packaged sample.
REAL_FILE = None
#: ``benchmarks/large_record.py``: the sample file whose first record it grows (a haystack turn), and where it goes.
LARGE_RECORD = ("longmemeval_oracle.json", "longmemeval_oracle.json")
#: longmemeval_s: 500 questions, each a haystack of ~40 sessions (~0.5 MB), filler sessions recurring across haystacks.
QUESTIONS, SESSIONS, FILLERS = 500, 40, 400


def scaled_input(folder: Path, scale: float, real: Path | None) -> tuple[Path, list[Path], list[str]]:
    """``longmemeval_s``-sized haystacks around the packaged sample's questions (no real file is on this machine):
    each question keeps its evidence sessions among ~40 dated sessions drawn from a pool of long filler sessions,
    which recur across haystacks as LongMemEval's do. Two files, one with ``.json`` and one without, so that
    ``num_proc`` has shards to share and both names are read."""
    from convhub.builders.longmemeval.builder import LongMemEvalBuilder

    sample = json.loads((Path(LongMemEvalBuilder.sample_dir()) / "longmemeval_s").read_text(encoding="utf-8"))
    text = "Tell me more about the history of the printing press and how it changed Europe. " * 8
    fillers = [
        [{"role": role, "content": f"{index}: {text}"} for role in ("user", "assistant") * 5]
        for index in range(FILLERS)
    ]
    target = max(2, round(QUESTIONS * scale))
    parts: list[list[dict]] = [[], []]
    for index in range(target):
        instance = json.loads(json.dumps(sample[index % len(sample)]))
        instance["question_id"] = f"copy{index}-{instance['question_id']}"  # an _abs id keeps its ending
        fill = [f"filler_{(index * 7 + n) % FILLERS}" for n in range(SESSIONS)]
        ids = instance["haystack_session_ids"] + [
            i for i in dict.fromkeys(fill) if i not in instance["haystack_session_ids"]
        ]
        sessions = dict(zip(instance["haystack_session_ids"], instance["haystack_sessions"], strict=True))
        instance["haystack_session_ids"] = ids
        instance["haystack_dates"] = [
            f"2023/05/{1 + n * 28 // len(ids):02d} (Mon) 10:{n % 60:02d}" for n in range(len(ids))
        ]
        instance["haystack_sessions"] = [sessions.get(i) or fillers[int(i.split("_")[1])] for i in ids]
        parts[index % 2].append(instance)
    files = [folder / "longmemeval_part0.json", folder / "longmemeval_part1"]
    for path, instances in zip(files, parts, strict=True):
        path.write_text(json.dumps(instances, ensure_ascii=False), encoding="utf-8")
    note = "longmemeval: no real file on this machine; haystacks of long synthetic filler around the sample's questions"
    return folder, files, [note]
