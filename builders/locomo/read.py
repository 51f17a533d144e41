"""Reading a LoCoMo file (one JSON list of samples) one sample at a time, with ``json.loads``'s values."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from convhub.engine.json_list import OnBreak, scan_json_array
from convhub.errors import SourceError
from convhub.storage.folders import open_file


def iter_samples(path: str | Path, on_break: OnBreak | None = None) -> Iterator[tuple[int, Any]]:
    """(position in the file, sample) of each sample of one LoCoMo file, in file order; an error names the file,
    and the byte where it breaks.

    Why one at a time: read whole, a file's objects take about five times its size, so peak memory grew with
    the input (four 52 MB files built with a peak of 525 MiB, files a quarter that size with 354 MiB), which
    misses the benchmark's memory-growth target (input x4 at most 1.25x the memory). The samples before a
    break come before its error. Given ``on_break`` (``--on-bad-record skip``), a break costs only the samples
    it holds: reading goes on at the next sample, ``on_break`` gets the error, the exact bytes skipped and the
    samples they held, and positions count those (the scan's), so they stay positions in the file.
    """
    read = lost = 0

    def counted(error: SourceError, raw: bytes, held: int) -> None:
        nonlocal lost
        lost += held
        on_break(error, raw, held)

    with open_file(path) as handle:
        samples = scan_json_array(
            handle, str(path), on_break=counted if on_break else None, element="sample", key="sample_id"
        )
        for _, _, position, sample in samples:
            read += 1
            yield position, sample
    if not read and not lost:  # (a list whose every sample a break lost is not an empty one)
        raise SourceError(path, None, None, "no samples: the list is empty")
