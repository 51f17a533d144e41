"""Progress bars that say what they count: ``locomo sessions test: 100%|██| 1/1 shards [00:00, 2 rows]``.

``datasets`` draws one bar per split, ``Generating train split: 0 examples``: no source, no config, and no
total (a split's row count is unknown until it is written). Its bar is ``datasets.builder.hf_tqdm``
(``datasets.utils.tqdm.tqdm``, which ``datasets.disable_progress_bars()`` turns off); while a convhub
builder prepares a split, ``shard_bars`` puts ``ShardBar``, a subclass of it, in its place. The bar counts
the split's shards against their total and shows the rows written beside them.

Its updates are what the builder's ``_prepare_split_single`` yields, passed on by ``datasets`` from each
worker: a ``Progress``, the int of rows ``datasets``' own bar adds up, that also carries the shards finished.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import datasets.builder
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

    def __reduce__(self):  # from a worker process to the bar, through datasets' queue
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


@contextlib.contextmanager
def shard_bars(label: str, shards: int) -> Iterator[None]:
    """While the block runs, ``datasets``' split bar is a ``ShardBar`` for ``label``."""

    def bar(*args, **kwargs) -> ShardBar:
        for generic in ("desc", "total", "unit"):  # "Generating train split", None, " examples"
            kwargs.pop(generic, None)
        return ShardBar(*args, label=label, shards=shards, **kwargs)

    previous = datasets.builder.hf_tqdm
    datasets.builder.hf_tqdm = bar
    try:
        yield
    finally:
        datasets.builder.hf_tqdm = previous
