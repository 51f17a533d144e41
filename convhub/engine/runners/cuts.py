"""Every way the engine cuts a list of work into shards, jobs, tasks or writers' shares, in one place.

Each cut gives runs of consecutive items (a run is a slice), so the rows a build writes, in order, never depend
on how the work was cut, only which file or process holds them; but ``share_files``, whose writers need no order
(the group-by's sort restores it). One cut is not of a list and stays where it runs: a job's writer starts a new
file once it holds more than ``MAX_SHARD_BYTES`` (``runners.local.write_job``: rows stream, nothing is listed).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from itertools import accumulate, pairwise
from typing import Literal


def even_runs(length: int, count: int) -> list[range]:
    """The indices of ``length`` items as ``count`` runs of consecutive ones (or fewer, one per item), the first
    runs one item longer where they do not divide evenly: ``datasets``' cut, where nothing says an item's work."""
    count = max(1, min(count, length))
    runs, start = [], 0
    for run in range(count):
        size = length // count + (run < length % count)
        runs.append(range(start, start + size))
        start += size
    return runs


def balanced_runs(
    weights: Sequence[float], count: int, cut: Literal["nearest", "after"] = "nearest"
) -> list[range]:
    """The indices of ``weights`` as ``count`` runs of consecutive ones (or fewer, one per item, never an empty
    one) whose weights are as even as cuts between items make them. Each cut falls at the item boundary nearest
    its share of the total (``nearest``: the local engine's jobs of shards that say their bytes), or right after
    the item whose running total reaches it (``after``: ConvLab's byte ranges of a file, whose shards were cut so
    before the local engine's jobs were balanced; kept, as the shards a source lists are part of its output's
    layout). With no weight at all, runs of similar numbers of items (``even_runs``)."""
    count = max(1, min(count, len(weights)))
    prefix = [0, *accumulate(weights)]
    total = prefix[-1]
    if total <= 0:
        return even_runs(len(weights), count)
    cuts = [0]
    for run in range(1, count):
        target = total * run / count
        after = bisect_left(prefix, target)  # the first boundary whose running total reaches the target
        nearer_before = prefix[after] - target > target - prefix[after - 1]
        chosen = after - 1 if cut == "nearest" and after - 1 > cuts[-1] and nearer_before else after
        cuts.append(min(max(chosen, cuts[-1] + 1), len(weights) - (count - run)))
    cuts.append(len(weights))
    return [range(start, end) for start, end in pairwise(cuts)]


def runs_by_size(sizes: Sequence[int], limit: int) -> list[range]:
    """The indices of ``sizes`` as runs of consecutive ones, a new run begun once the last holds ``limit`` or more:
    each run holds at least ``limit`` (but the last) and at most ``limit`` plus its last item (GigaMemory's groups
    of lines, whose count is not known before they are read)."""
    runs: list[range] = []
    start, held = 0, 0
    for index, size in enumerate(sizes):
        if index > start and held >= limit:
            runs.append(range(start, index))
            start, held = index, 0
        held += size
    if sizes:
        runs.append(range(start, len(sizes)))
    return runs


def share_files(sizes: list[int], processes: int) -> list[list[int]]:
    """Indices of the files each of ``processes`` writers takes: biggest first to the least loaded (the best
    balance, as order does not matter here). Each writer's list is in file order; writers without a file are left
    out."""
    loads = [0] * max(1, processes)
    shares: list[list[int]] = [[] for _ in loads]
    for index in sorted(range(len(sizes)), key=lambda index: (-sizes[index], index)):
        writer = loads.index(min(loads))
        loads[writer] += sizes[index]
        shares[writer].append(index)
    return [sorted(share) for share in shares if share]
