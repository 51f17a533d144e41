"""ConvLab's scaled benchmark input, found by ``benchmarks/scaled_inputs.py`` (``docs/adding-a-source.md``): a
MultiWOZ-sized dataset (10k dialogues, ~140k turns, 200+ MB of JSON) in a ``data.zip``.

Dialogues are copies of the real MultiWOZ 2.1 ``dummy_data.json`` (or the packaged sample when it is absent) with
new ids, padded to 14 turns, split 8,438 / 1,000 / 1,000 like MultiWOZ, written with ``indent=2`` as ConvLab
writes ``dialogues.json``. ``benchmarks/convlab_multiwoz_like.py`` is its command line.
"""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from pathlib import Path

#: The real file the input is made from, under the shared data folder (``CONVHUB_SHARED_DATA``).
REAL_FILE = "convlab/multiwoz21/dummy_data.json"
#: ``benchmarks/large_record.py``: the sample file whose first record it grows, where the record goes, and the
#: sample files that go beside it (a ConvLab dataset is read with its ontology).
LARGE_RECORD = ("toychat/data/dialogues.json", "toychat/data/dialogues.json")
LARGE_RECORD_COMPANIONS = ("toychat/data/ontology.json",)
SPLITS = (("train", 8438), ("validation", 1000), ("test", 1000))
TURNS = 14


def scaled_input(folder: Path, scale: float, real: Path | None) -> tuple[Path, list[Path], list[str]]:
    """A MultiWOZ-sized ``data.zip`` for the builder; its ``dialogues.json`` extracted for the baselines, which
    cannot read the archive."""
    data_dir = folder / "data_dir"
    shutil.rmtree(data_dir, ignore_errors=True)
    dialogues = write_dataset(data_dir, "multiwoz_like", "zip", scale, real)
    extracted = folder / "dialogues.json"
    os.replace(dialogues, extracted)
    shutil.rmtree(dialogues.parent)  # the builder reads data.zip only
    note = "convlab: load_dataset('json') cannot read data.zip; baselines read the extracted dialogues.json"
    return data_dir, [extracted], [note]


def templates(real: Path | None) -> list[dict]:
    """The dialogues of the real file, else of the packaged sample's ``toyhotel`` dataset."""
    if real is not None:
        return json.loads(real.read_text(encoding="utf-8"))
    from convhub.builders.convlab.builder import ConvLabBuilder, find_inputs

    sample = {s.name: s for s in find_inputs(ConvLabBuilder.sample_dir(), None)}["toyhotel"]
    return sample.read_json("dialogues.json")


def synthetic_dialogues(name: str, scale: float = 1.0, real: Path | None = None):
    """One dialogue at a time: ``SPLITS`` dialogues (times ``scale``) of ``TURNS`` turns each."""
    pool = templates(real)
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


def write_dataset(folder: Path, name: str, layout: str, scale: float = 1.0, real: Path | None = None) -> Path:
    """``folder/<name>/data.zip`` (or ``data/``) with ``dialogues.json`` streamed, and an ontology."""
    root = folder / name
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    dialogues = data / "dialogues.json"
    with open(dialogues, "w", encoding="utf-8") as handle:
        handle.write("[\n")
        for position, dialogue in enumerate(synthetic_dialogues(name, scale, real)):
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
