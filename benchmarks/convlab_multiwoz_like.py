"""A MultiWOZ-sized ConvLab dataset (10k dialogues, ~140k turns, 200+ MB of JSON) and how the builder copes.

    python benchmarks/convlab_multiwoz_like.py                    # data.zip, as ConvLab publishes it
    python benchmarks/convlab_multiwoz_like.py --layout folder    # an extracted data/ folder

Dialogues are copies of the real MultiWOZ 2.1 ``dummy_data.json`` (or the packaged sample when ../shared/data is
absent) with new ids, padded to 14 turns, split 8,438 / 1,000 / 1,000 like MultiWOZ, written with ``indent=2``
as ConvLab writes ``dialogues.json``. Nothing is written into the project: the files go to a temporary folder
(or ``--workdir``). Prints seconds and peak RSS (largest single process, workers included) per case.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness

SPLITS = (("train", 8438), ("validation", 1000), ("test", 1000))
TURNS = 14


def templates() -> list[dict]:
    source = harness.real_file("convlab")
    if source.exists():
        return json.loads(source.read_text(encoding="utf-8"))
    from convhub.builders.convlab.builder import ConvLabBuilder, find_inputs

    sample = {s.name: s for s in find_inputs(ConvLabBuilder.sample_dir(), None)}["toyhotel"]
    return sample.read_json("dialogues.json")


def synthetic_dialogues(name: str, scale: float = 1.0):
    """One dialogue at a time: ``SPLITS`` dialogues (times ``scale``) of ``TURNS`` turns each."""
    pool = templates()
    index = 0
    for split, full_count in SPLITS:
        count = max(1, round(full_count * scale))
        for number in range(count):
            template = pool[index % len(pool)]
            turns = [dict(turn) for turn in template["turns"]]
            while len(turns) < TURNS:
                turns += [dict(turn) for turn in template["turns"][: TURNS - len(turns)]]
            turns = turns[:TURNS]
            for utt_idx, turn in enumerate(turns):
                turn["utt_idx"] = utt_idx
            yield {
                **template,
                "dataset": name,
                "data_split": split,
                "dialogue_id": f"{name}-{split}-{number}",
                "turns": turns,
            }
            index += 1


def write_dataset(folder: Path, name: str, layout: str, scale: float = 1.0) -> Path:
    """``folder/<name>/data.zip`` (or ``data/``) with ``dialogues.json`` streamed, and an ontology."""
    root = folder / name
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    dialogues = data / "dialogues.json"
    with open(dialogues, "w", encoding="utf-8") as handle:
        handle.write("[\n")
        for position, dialogue in enumerate(synthetic_dialogues(name, scale)):
            if position:
                handle.write(",\n")
            handle.write(json.dumps(dialogue, ensure_ascii=False, indent=2))
        handle.write("\n]")
    ontology = {"domains": {}, "intents": {}, "state": {}, "dialogue_acts": {}}
    (data / "ontology.json").write_text(json.dumps(ontology), encoding="utf-8")
    if layout == "zip":
        with zipfile.ZipFile(root / "data.zip", "w", zipfile.ZIP_DEFLATED) as archive:
            archive.write(dialogues, "data/dialogues.json")
            archive.write(data / "ontology.json", "data/ontology.json")
    return dialogues


def main(argv: list[str] | None = None) -> int:
    import harness  # each case in a fresh process, with its process tree's peak memory

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layout", choices=("zip", "folder"), default="zip")
    parser.add_argument("--workdir", type=Path, help="keep the generated files here (default: a temp folder)")
    parser.add_argument("--num-proc", type=int, default=2)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="convlab-multiwoz-like-") as temp:
        folder = args.workdir or Path(temp)
        dialogues = write_dataset(folder, "multiwoz_like", args.layout)
        size = os.path.getsize(dialogues) / 2**20
        if args.layout == "zip":
            os.remove(dialogues)  # the build must read the archive, not this file
            os.remove(dialogues.parent / "ontology.json")
            os.rmdir(dialogues.parent)
            print(f"data.zip: {os.path.getsize(folder / 'multiwoz_like' / 'data.zip') / 2**20:,.1f} MiB")
        turns = sum(count for _, count in SPLITS) * TURNS
        print(f"dialogues.json: {sum(c for _, c in SPLITS):,} dialogues, {turns:,} turns, {size:,.1f} MiB")
        every = json.dumps(["sessions", "turns", "messages", "dialogues", "ontology"])
        data_dir = str(folder)
        cases = [
            ("build sessions", harness.BUILD, ["convlab", data_dir, '["sessions"]', "1"]),
            (
                f"build sessions, num_proc={args.num_proc}",
                harness.BUILD,
                ["convlab", data_dir, '["sessions"]', str(args.num_proc)],
            ),
            (
                f"build all configs, num_proc={args.num_proc}",
                harness.BUILD,
                ["convlab", data_dir, every, str(args.num_proc)],
            ),
        ]
        if args.layout == "folder":
            cases.insert(0, ("json.load (parse floor)", harness.PARSE_FLOOR, [str(dialogues)]))
        harness.print_cases(cases, size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
