"""Where a build's memory comes from and when it goes back to the system.

pyarrow reads its pool once, when it is imported, and jemalloc its settings once, when it starts
(``pyarrow.set_memory_pool`` and ``jemalloc_set_decay_ms`` later reach only pyarrow's Python calls or new arenas,
not its Parquet reader and writer), so the command chooses before anything imports pyarrow (``convhub.cli``), and
this module imports pyarrow only where it is used. Why jemalloc with a 100 ms decay (pyarrow's system allocator
copies a growing buffer, and Parquet's writer grows one a page; jemalloc's own decay of a second raised other
steps' peaks; mimalloc keeps a large table's freed pages in its own segments): docs/performance.md, round 8. A
pyarrow built without jemalloc says so in one line and uses its default pool (``ARROW_DEFAULT_MEMORY_POOL=system``
then chooses).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any

#: pyarrow's own variable for its default pool, read once, when pyarrow is imported.
ARROW_POOL_VARIABLE = "ARROW_DEFAULT_MEMORY_POOL"
#: The settings of pyarrow's jemalloc (its ``je_arrow_`` prefix), read once, when it starts. They add to pyarrow's
#: own, among them ``background_thread:true``: a thread of jemalloc's gives the pages back.
JEMALLOC_CONF_VARIABLE = "JE_ARROW_MALLOC_CONF"
#: Freed pages back to the system within 100 ms, not pyarrow's 1,000; none kept as "muzzy" (still resident).
JEMALLOC_CONF = "dirty_decay_ms:100,muzzy_decay_ms:0"
#: What the command sets for pyarrow, and what Spark's executors are told.
ARROW_VARIABLES = (ARROW_POOL_VARIABLE, JEMALLOC_CONF_VARIABLE)

#: A table at least this large has its memory given back to the system once written (``give_back_pages``).
LARGE_TABLE_BYTES = 16 * 2**20

#: glibc's ``malloc_trim``, or None where the C library has none (macOS, musl).
_C_TRIM = getattr(ctypes.CDLL(None), "malloc_trim", None) if os.name == "posix" else None


def choose_the_allocator() -> None:
    """Arrow's memory from jemalloc with a short decay on Linux, else from the C library's allocator, in this
    process, if pyarrow is not imported yet, and in the processes started from it; a pool or jemalloc settings the
    user named are kept."""
    if sys.platform.startswith("linux"):  # pyarrow's wheels for Linux have jemalloc; others may not
        os.environ.setdefault(ARROW_POOL_VARIABLE, "jemalloc")
        os.environ.setdefault(JEMALLOC_CONF_VARIABLE, JEMALLOC_CONF)
    else:
        os.environ.setdefault(ARROW_POOL_VARIABLE, "system")


def give_back_pages() -> None:
    """Hand the free pages of Arrow's pool (``release_unused``) and of the C heap (glibc's ``malloc_trim``: Arrow's
    memory on the system allocator, a long conversation's Python objects) back to the system. An allocator keeps
    them for reuse: without this, each step started from the last one's peak (docs/performance.md, "One very large
    record"). Ordinary writer batches, far under ``LARGE_TABLE_BYTES``, keep the allocator's reuse; the call is
    cheap when there is nothing to give back (it follows every file and split written)."""
    import pyarrow as pa  # imported already by any caller; not at this module's top (see the module's docstring)

    pa.default_memory_pool().release_unused()
    if _C_TRIM is not None:
        _C_TRIM(0)


#: Allocations between two young-generation collections while a builder prepares (Python's default: 700).
GC_YOUNG_THRESHOLD = 500_000


def each_made_with_fewer_collections(items: Iterable[Any]) -> Iterator[Any]:
    """``items``, each one made under ``fewer_collections`` but never across a yield: in a stream, the reader's
    own code between two rows runs with the collector as the reader set it. (A build relaxes it for its whole run
    already, and ``local_shards`` while it lists.)"""
    iterator = iter(items)
    while True:
        with fewer_collections():
            try:
                item = next(iterator)
            except StopIteration:
                return
        yield item


@contextlib.contextmanager
def fewer_collections():
    """Run Python's cycle collector less often while a build parses: records hold no cycles, and the collector
    walked the survivors every 700 of their allocations (docs/performance.md, "The cycle collector"). Below
    ``GC_YOUNG_THRESHOLD``, a LoCoMo sample (hundreds of thousands of objects) still reached full collections."""
    previous = gc.get_threshold()
    gc.set_threshold(max(GC_YOUNG_THRESHOLD, previous[0]), *previous[1:])
    try:
        yield
    finally:
        gc.set_threshold(*previous)
