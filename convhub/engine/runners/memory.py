"""Where a build's memory comes from and when it goes back to the system.

On Linux, Arrow's memory comes from pyarrow's jemalloc pool with freed pages handed back within 100 ms
(:data:`JEMALLOC_CONF`); elsewhere from the C library's allocator (``malloc``). The choice holds in convhub's
command and every process it starts: the build's workers are forked from it and inherit it, Spark's JVM and Python
workers are told through their environment (:data:`ARROW_VARIABLES`). pyarrow reads its pool from
``ARROW_DEFAULT_MEMORY_POOL`` once, when it is imported, and jemalloc its settings from ``JE_ARROW_MALLOC_CONF``
when it starts (``pyarrow.set_memory_pool`` and ``jemalloc_set_decay_ms`` later reach only pyarrow's Python calls
or new arenas, not its Parquet reader and writer), so the command chooses before anything imports pyarrow
(``convhub.cli``), and this module imports pyarrow only where it is used. A user who names a pool in
``ARROW_DEFAULT_MEMORY_POOL``, or jemalloc settings in ``JE_ARROW_MALLOC_CONF``, keeps them.

Why jemalloc, and why a short decay (the figures: ``docs/performance.md``, round 8): pyarrow's system allocator
cannot grow an aligned buffer in place, so a buffer that grows is copied, the old one beside the new, and Parquet's
writer grows a buffer for each page it makes. A record is never cut across pages, so one MNBVC conversation of many
tiny turns (``tests/mnbvc/test_mnbvc_many_turns.py``) is written from pages as large as its columns, and that copy
put its build past the 6x line large records keep. jemalloc grows in place. As pyarrow configures it, it keeps freed
pages for a second, which raised the peaks of other steps; 100 ms gives them back between a build's steps, at the
speed of ordinary builds. mimalloc keeps pages a large table freed in its own segments. A pyarrow built without
jemalloc says so in one line and uses its default pool (``ARROW_DEFAULT_MEMORY_POOL=system`` then chooses).
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
    """Hand the free pages of Arrow's memory pool and of the C heap back to the system: after a split or view is
    written, and before and after any table of ``LARGE_TABLE_BYTES`` or more is written.

    An allocator keeps freed pages for reuse, so the memory of one very large record stayed with the process
    through every later step (``benchmarks/large_record.py``; the figures: docs/performance.md, "One very large
    record"). Ordinary writer batches are far smaller than ``LARGE_TABLE_BYTES`` and keep the allocator's reuse;
    the call is cheap when there is nothing to give back.

    ``release_unused`` serves a pool of pyarrow's own (mimalloc, jemalloc), ``malloc_trim`` the C heap (glibc,
    where the C library has it): Arrow's memory with the system allocator, and the Python lists and strings of a
    conversation of many tiny turns, which glibc would keep, so that the next step (the derived views, the card)
    started from the last one's peak.
    """
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
    """Run Python's cycle collector less often while a build parses.

    Parsers allocate millions of small dicts and lists that reference counting frees (records hold no
    cycles); at the default threshold the collector ran every 700 of them and walked the survivors each
    time. A lower threshold than 500,000 still let a LoCoMo sample (hundreds of thousands of objects) go through
    several young passes and be promoted into full ones (the figures: docs/performance.md, "The cycle
    collector").
    """
    previous = gc.get_threshold()
    gc.set_threshold(max(GC_YOUNG_THRESHOLD, previous[0]), *previous[1:])
    try:
        yield
    finally:
        gc.set_threshold(*previous)
