"""LoCoMo's scaled benchmark input, found by ``benchmarks/scaled_inputs.py`` (``docs/adding-a-source.md``): the real
file's conversations copied with new ids, to ~1,000 conversations at scale 1."""

from __future__ import annotations

import json
from pathlib import Path

#: The real file the input is made from, under the shared data folder (``CONVHUB_SHARED_DATA``).
REAL_FILE = "locomo/locomo10.json"
#: ``benchmarks/large_record.py``: the sample file whose first record it grows, and where the record goes.
LARGE_RECORD = ("locomo_sample.json", "one.json")
#: Full-scale size (scale 1).
CONVERSATIONS = 1000


def scaled_input(folder: Path, scale: float, real: Path | None) -> tuple[Path, list[Path], list[str]]:
    """The real locomo10.json (or the packaged sample) replicated to ~1,000 conversations with unique ids,
    written as 4 files so that ``num_proc`` has shards to share."""
    source = real
    if source is None:
        from convhub.builders.locomo.builder import LocomoBuilder

        source = next(Path(LocomoBuilder.sample_dir()).glob("*.json"))
    samples = json.loads(source.read_text(encoding="utf-8"))
    target = max(4, round(CONVERSATIONS * scale))
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
    return folder, files, []
