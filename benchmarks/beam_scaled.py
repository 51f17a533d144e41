"""A scaled BEAM input in the repository's layout: ``chats/100K/<n>/`` folders copied from the two real chats
(``../shared/data/beam/chats/100K``, or the packaged sample's chats when it is absent), renumbered so that every
conversation id is new. Scale 1 is BEAM's 100 chats (~55 MB from the real chats); ``scaled_inputs`` calls
``generate``. Files are copied byte for byte: the builder reads them as the real ones."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness

CHATS = 100


def template_chats() -> list[Path]:
    real = harness.real_file("beam")
    if real.exists():
        return sorted(path for path in real.iterdir() if path.is_dir())
    from convhub.builders.beam.builder import BeamBuilder

    return sorted(
        path for path in (Path(BeamBuilder.sample_dir()) / "chats" / "100K").iterdir() if path.is_dir()
    )


def generate(folder: Path, scale: float):
    """``max(2, 100 * scale)`` chats under ``folder/chats/100K``; the baselines read each chat's JSON files."""
    from scaled_inputs import ScaledInput, packaged_sample_note

    root = folder / "chats" / "100K"
    shutil.rmtree(folder / "chats", ignore_errors=True)
    templates = template_chats()
    for number in range(1, max(2, round(CHATS * scale)) + 1):
        shutil.copytree(templates[number % len(templates)], root / str(number))
    files = sorted(root.glob("*/chat.json")) + sorted(root.glob("*/probing_questions/*.json"))
    return ScaledInput(folder, files, packaged_sample_note("beam"))
