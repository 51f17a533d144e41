"""Reading a LoCoMo file (one JSON list of samples) one sample at a time, with ``json.loads``'s values."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from convhub.errors import SourceError
from convhub.folders import open_file
from convhub.json_list import scan_json_array


def iter_samples(path: str | Path) -> Iterator[Any]:
    """The samples of one LoCoMo file, in file order; an error names the file, and the byte where it breaks.

    Why one at a time: read whole, a file's objects take about five times its size, so peak memory grew with
    the input (four 52 MB files built with a peak of 525 MiB, files a quarter that size with 354 MiB), which
    misses the benchmark's memory-growth target (input x4 at most 1.25x the memory). The samples before a
    break are yielded before its error (``skip`` keeps them, as other sources do). Each sample is checked by
    the parser, so that one bad sample can be skipped alone.
    """
    count = 0
    with open_file(path) as handle:
        for _, _, sample in scan_json_array(handle, str(path), element="sample"):
            count += 1
            yield sample
    if not count:
        raise SourceError(path, None, None, "no samples: the list is empty")
