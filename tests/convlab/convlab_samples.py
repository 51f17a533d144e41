"""The project's ConvLab-3 sample (``builders/convlab/sample/``): where it is and its dialogues as read; a turn's
``extra``; the index the build makes of a ``dialogues.json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO

from convhub.builders.convlab import parse
from convhub.builders.convlab.builder import ConvLabBuilder, find_inputs
from convhub.engine.readers import byte_ranges
from convhub.engine.readers.json_list import CHUNK_BYTES
from convhub.errors import Reject, raise_error

SAMPLE = Path(ConvLabBuilder.sample_dir())


def sample_dialogues(name: str) -> list[dict]:
    source = {s.name: s for s in find_inputs(str(SAMPLE), None)}[name]
    return source.read_json("dialogues.json")


def turn_extra(turn: dict) -> dict:
    """A built turn's ``extra`` JSON as a dict (``{}`` when it has none)."""
    return json.loads(turn["extra"]) if turn["extra"] else {}


def index_dialogues(
    stream: IO[bytes],
    path: str,
    reject: Reject = raise_error,
    recover: bool = False,
    chunk_size: int = CHUNK_BYTES,
) -> dict[str, list[byte_ranges.Range]]:
    """Split → the byte ranges of its dialogues in a ``dialogues.json`` stream, as the builder's ``shards`` index it."""
    checker = parse.split_checker(path)
    return byte_ranges.index_list(
        stream, path, checker, reject, recover, "dialogue", "dialogue_id", chunk_size
    )
