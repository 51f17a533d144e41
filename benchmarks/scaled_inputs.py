"""Scaled benchmark inputs in each source's own format.

``make(source, folder, scale)`` returns the data dir to build from and the files a generic loader reads.
"""

from __future__ import annotations

import json
from pathlib import Path

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def locomo(folder: Path, scale: float) -> list[Path]:
    """The real locomo10.json (or the packaged sample) replicated to ~1,000 conversations with unique ids,
    written as 4 files so that ``num_proc`` has shards to share."""
    source = SHARED_DATA / "locomo" / "locomo10.json"
    if not source.exists():
        from builders.locomo.builder import LocomoBuilder

        source = next(Path(LocomoBuilder.sample_dir()).glob("*.json"))
    samples = json.loads(source.read_text(encoding="utf-8"))
    target = max(4, round(1000 * scale))
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
    return files


GENERATORS = {"locomo": locomo}


def make(source: str, folder: Path, scale: float) -> tuple[Path, list[Path]]:
    folder.mkdir(parents=True, exist_ok=True)
    files = GENERATORS[source](folder, scale)
    return folder, files
