"""The project's ConvLab-3 sample (``builders/convlab/sample/``): where it is and its dialogues as read; a turn's
``extra``."""

from __future__ import annotations

import json
from pathlib import Path

from builders.convlab.builder import ConvLabBuilder, find_inputs

SAMPLE = Path(ConvLabBuilder.sample_dir())


def sample_dialogues(name: str) -> list[dict]:
    source = {s.name: s for s in find_inputs(str(SAMPLE), None)}[name]
    return source.read_json("dialogues.json")


def turn_extra(turn: dict) -> dict:
    """A built turn's ``extra`` JSON as a dict (``{}`` when it has none)."""
    return json.loads(turn["extra"]) if turn["extra"] else {}
