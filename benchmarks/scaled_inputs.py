"""Scaled benchmark inputs in each source's own format, one ``(folder, scale) -> ScaledInput`` per source.

Scale 1 is the full run of issue 6: LoCoMo's real file replicated to 1,000 conversations, ~1 GB of
GigaMemory records, a MultiWOZ-sized ConvLab dataset (10k dialogues) and ~2 GB of MNBVC multi-turn and
forum shards. The generators are the per-source modules beside this one; this module only decides sizes
and which files the baselines read.

``ScaledInput.files`` are the files ``json.loads`` and ``load_dataset("json")`` read: the same bytes the
builder reads, except for ConvLab, whose ``data.zip`` the generic loader cannot open at all (it is given
the extracted ``dialogues.json``, which is also what ``input MB`` counts for every case of that source).
With ``--workdir``, an input already generated at the same scale is reused.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import beam_scaled
import convlab_multiwoz_like
import gigamemory_scaled
import harness
import mnbvc_synthetic

#: Full-scale sizes (scale 1).
LOCOMO_CONVERSATIONS = 1000
GIGAMEMORY_LINES = 1600  # ~650 KB a line (the real sample's lines): ~1 GB
MNBVC_MULTITURN_MB, MNBVC_MULTITURN_SHARDS = 1536, 8
MNBVC_FORUM_MB, MNBVC_FORUM_SHARDS = 512, 4
#: longmemeval_s: 500 questions, each a haystack of ~40 sessions (~0.5 MB), filler sessions recurring across haystacks.
LONGMEMEVAL_QUESTIONS, LONGMEMEVAL_SESSIONS, LONGMEMEVAL_FILLERS = 500, 40, 400


@dataclass
class ScaledInput:
    data_dir: Path  # what the builder reads (``--data-dir``)
    files: list[Path]  # what the parse floor and the generic loader read
    notes: list[str] = field(default_factory=list)

    @property
    def megabytes(self) -> float:
        return sum(os.path.getsize(path) for path in self.files) / 2**20


def packaged_sample_note(source: str) -> list[str]:
    """A note when the real file is absent and the input was made from convhub's packaged sample instead: its
    records are not the real ones' size (a GigaMemory line of ~1 KB, not ~650 KB), so its figures are not README's."""
    real = harness.real_file(source)
    if real.exists():
        return []
    return [
        f"{source}: {real} is absent (set CONVHUB_SHARED_DATA), so the input is made from convhub's packaged "
        "sample: its records are not the real ones' size and its figures do not compare with README's"
    ]


def locomo(folder: Path, scale: float) -> ScaledInput:
    """The real locomo10.json (or the packaged sample) replicated to ~1,000 conversations with unique ids,
    written as 4 files so that ``num_proc`` has shards to share."""
    source = harness.real_file("locomo")
    if not source.exists():
        from convhub.builders.locomo.builder import LocomoBuilder

        source = next(Path(LocomoBuilder.sample_dir()).glob("*.json"))
    samples = json.loads(source.read_text(encoding="utf-8"))
    target = max(4, round(LOCOMO_CONVERSATIONS * scale))
    files = []
    for part in range(4):
        copies = []
        for index in range(part, target, 4):
            sample = dict(samples[index % len(samples)])
            sample["sample_id"] = f"{sample['sample_id']}-copy{index}"
            copies.append(sample)
        path = folder / f"locomo_part{part}.json"
        path.write_text(json.dumps(copies, ensure_ascii=False), encoding="utf-8")
        files.append(path)
    return ScaledInput(folder, files, packaged_sample_note("locomo"))


def gigamemory(folder: Path, scale: float) -> ScaledInput:
    """One ``.jsonl`` of ~1 GB at scale 1; each dialogue's four questions a quarter of the file apart."""
    lines = max(gigamemory_scaled.QUESTIONS_PER_DIALOGUE, round(GIGAMEMORY_LINES * scale))
    path = gigamemory_scaled.write_scaled(folder / "gigamemory_scaled.jsonl", lines)
    return ScaledInput(folder, [path], packaged_sample_note("gigamemory"))


def convlab(folder: Path, scale: float) -> ScaledInput:
    """A MultiWOZ-sized ``data.zip`` for the builder; its ``dialogues.json`` extracted for the baselines."""
    data_dir = folder / "data_dir"
    shutil.rmtree(data_dir, ignore_errors=True)
    dialogues = convlab_multiwoz_like.write_dataset(data_dir, "multiwoz_like", "zip", scale)
    extracted = folder / "dialogues.json"
    os.replace(dialogues, extracted)
    shutil.rmtree(dialogues.parent)  # the builder reads data.zip only
    note = "convlab: load_dataset('json') cannot read data.zip; baselines read the extracted dialogues.json"
    return ScaledInput(data_dir, [extracted], [note, *packaged_sample_note("convlab")])


def mnbvc(folder: Path, scale: float) -> ScaledInput:
    """多轮对话 shards (each conversation's rows spread over the shards) and 论坛 shards, ~2 GB at scale 1."""
    for kind in ("multiturn", "forum"):
        shutil.rmtree(folder / kind, ignore_errors=True)
    mnbvc_synthetic.generate(
        folder / "multiturn", MNBVC_MULTITURN_MB * scale, MNBVC_MULTITURN_SHARDS, use_gzip=False, seed=0
    )
    mnbvc_synthetic.generate_forum(folder / "forum", MNBVC_FORUM_MB * scale, MNBVC_FORUM_SHARDS, seed=1)
    files = sorted((folder / "multiturn").glob("*.jsonl")) + sorted((folder / "forum").glob("*.jsonl"))
    return ScaledInput(folder, files)


def longmemeval(folder: Path, scale: float) -> ScaledInput:
    """``longmemeval_s``-sized haystacks around the packaged sample's questions (no real file is on this machine):
    each question keeps its evidence sessions among ~40 dated sessions drawn from a pool of long filler sessions,
    which recur across haystacks as LongMemEval's do. Two files, one with ``.json`` and one without, so that
    ``num_proc`` has shards to share and both names are read."""
    from convhub.builders.longmemeval.builder import LongMemEvalBuilder

    sample = json.loads((Path(LongMemEvalBuilder.sample_dir()) / "longmemeval_s").read_text(encoding="utf-8"))
    text = "Tell me more about the history of the printing press and how it changed Europe. " * 8
    fillers = [
        [{"role": role, "content": f"{index}: {text}"} for role in ("user", "assistant") * 5]
        for index in range(LONGMEMEVAL_FILLERS)
    ]
    target = max(2, round(LONGMEMEVAL_QUESTIONS * scale))
    parts: list[list[dict]] = [[], []]
    for index in range(target):
        instance = json.loads(json.dumps(sample[index % len(sample)]))
        instance["question_id"] = f"copy{index}-{instance['question_id']}"  # an _abs id keeps its ending
        fill = [f"filler_{(index * 7 + n) % LONGMEMEVAL_FILLERS}" for n in range(LONGMEMEVAL_SESSIONS)]
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
    return ScaledInput(folder, files, [note])


GENERATORS = {
    "locomo": locomo,
    "gigamemory": gigamemory,
    "convlab": convlab,
    "mnbvc": mnbvc,
    "longmemeval": longmemeval,
    "beam": beam_scaled.generate,
}


def make(source: str, folder: Path, scale: float) -> ScaledInput:
    """Generate ``source``'s input at ``scale`` in ``folder`` (reused when ``folder`` already holds it)."""
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder.parent / f"{folder.name}.scaled-input.json"  # beside: the builder reads every *.json
    if marker.exists():
        saved = json.loads(marker.read_text(encoding="utf-8"))
        if saved["scale"] == scale and all(Path(path).exists() for path in saved["files"]):
            return ScaledInput(Path(saved["data_dir"]), [Path(p) for p in saved["files"]], saved["notes"])
    made = GENERATORS[source](folder, scale)
    saved = {"scale": scale, "data_dir": str(made.data_dir), "files": [str(p) for p in made.files]}
    marker.write_text(json.dumps({**saved, "notes": made.notes}), encoding="utf-8")
    return made
