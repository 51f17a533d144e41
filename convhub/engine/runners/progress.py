"""Progress bars that say what they count: ``locomo sessions test: 100%|██| 1/1 shards [00:00, 2 rows]``.

``datasets`` draws one bar per split, ``Generating train split: 0 examples``: no source, no config, and no
total (a split's row count is unknown until it is written). The local engine (``convhub.engine.runners.local``)
draws a ``ShardBar`` per split instead: the split's shards counted against their total, the rows written so far
beside them. It is a ``datasets.utils.tqdm.tqdm``, so ``datasets.disable_progress_bars()`` turns it off too.

Its updates are what each job of the split yields: a ``Progress``, the rows written since the last update, that
also carries the shards finished since then.
"""

from __future__ import annotations

from datasets.utils.tqdm import tqdm as hf_tqdm


def rows(count: int) -> str:
    return f"{count:,} row{'' if count == 1 else 's'}"


class Progress(int):
    """Rows written since the last update (its int value) and ``shards`` finished since then."""

    shards: int

    def __new__(cls, rows: int, shards: int = 0) -> Progress:
        update = super().__new__(cls, rows)
        update.shards = shards
        return update

    def __reduce__(self):  # a worker's update, pickled on its way to the bar
        return Progress, (int(self), self.shards)


class ShardBar(hf_tqdm):
    """A split's bar: shards done of the total, rows so far as its postfix."""

    def __init__(self, *args, label: str, shards: int, **kwargs) -> None:
        kwargs.update(desc=label, total=shards, unit=" shards")
        super().__init__(*args, **kwargs)
        self.rows = 0
        self.set_postfix_str(rows(0), refresh=False)

    def update(self, n: float | None = 1) -> bool | None:
        self.rows += int(n or 0)
        self.set_postfix_str(rows(self.rows), refresh=False)
        return super().update(getattr(n, "shards", 0))
