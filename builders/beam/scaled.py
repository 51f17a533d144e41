"""BEAM's benchmark input (``benchmarks/scaled_inputs.py``): chat folders copied byte for byte from the two
real chats (or the sample's), 100 at scale 1. No ``LARGE_RECORD``: a chat is a folder, not a JSON record."""

import shutil
from pathlib import Path

REAL_FILE = "beam/chats/100K"


def scaled_input(folder: Path, scale: float, real: Path | None) -> tuple[Path, list[Path], list[str]]:
    """``max(2, 100 * scale)`` chats ``chats/100K/<n>/``; the baselines read each ``chat.json`` (the bulk; the
    generic JSON loader cannot read ``probing_questions.json``, an object of lists of differing shapes)."""
    chats = sorted(p for p in (real or Path(__file__).parent / "sample/chats/100K").iterdir() if p.is_dir())
    shutil.rmtree(folder / "chats", ignore_errors=True)
    for number in range(1, max(2, round(100 * scale)) + 1):
        shutil.copytree(chats[number % len(chats)], folder / "chats" / "100K" / str(number))
    return folder, sorted((folder / "chats").glob("100K/*/chat.json")), []
