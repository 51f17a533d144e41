"""Where a build's memory comes from and when it goes back to the system.

Arrow's memory comes from the C library's allocator (glibc's ``malloc`` on Linux), not from pyarrow's default
pool (mimalloc), in convhub's command and every process it starts: the build's workers are forked from it and
inherit the choice, Spark's JVM and Python workers are told through their environment. pyarrow reads its pool
from ``ARROW_DEFAULT_MEMORY_POOL`` once, when it is imported (``pyarrow.set_memory_pool`` later reaches only
pyarrow's Python calls, not its Parquet reader and writer), so the command chooses before anything imports
pyarrow (``convhub.cli``), and this module imports pyarrow only where it is used. Measured on one MNBVC
conversation of 166,667 tiny turns (a 32 MiB file, ``tests/mnbvc/test_mnbvc_many_turns.py``), the build
peaked 234 MiB above a one-row build with mimalloc and 208 MiB with glibc, at the same speed on ordinary input
(``docs/performance.md``): mimalloc keeps pages a large table freed in its own segments, where glibc hands them
back (``give_back_pages``). A user who names a pool in ``ARROW_DEFAULT_MEMORY_POOL`` keeps it.
"""

from __future__ import annotations

import ctypes
import os

#: pyarrow's own variable for its default pool, read once, when pyarrow is imported.
ARROW_POOL_VARIABLE = "ARROW_DEFAULT_MEMORY_POOL"

#: A table at least this large has its memory given back to the system once written (``give_back_pages``).
LARGE_TABLE_BYTES = 16 * 2**20

#: glibc's ``malloc_trim``, or None where the C library has none (macOS, musl).
_C_TRIM = getattr(ctypes.CDLL(None), "malloc_trim", None) if os.name == "posix" else None


def choose_the_system_allocator() -> None:
    """Arrow's memory from the C library's allocator in this process, if pyarrow is not imported yet, and in the
    processes started from it, unless ``ARROW_DEFAULT_MEMORY_POOL`` already names a pool."""
    os.environ.setdefault(ARROW_POOL_VARIABLE, "system")


def give_back_pages() -> None:
    """Hand the free pages of Arrow's memory pool and of the C heap back to the system: after a split or view is
    written, and before and after any table of ``LARGE_TABLE_BYTES`` or more is written.

    An allocator keeps freed pages for reuse, so the memory of one very large record stayed with the process
    through every later step: a 32 MB record's ``turns`` build peaked 256 MB above a small record's, all of it
    free pages of the pool (``benchmarks/large_record.py``). Ordinary writer batches are far smaller than
    ``LARGE_TABLE_BYTES`` and keep the allocator's reuse; the call costs some microseconds when there is nothing
    to give back.

    ``release_unused`` serves a pool of pyarrow's own (mimalloc, jemalloc), ``malloc_trim`` the C heap (glibc,
    where the C library has it): Arrow's memory with the system allocator, and the Python lists and strings of a
    conversation of many tiny turns, which glibc would keep, so that the next step (the derived views, the card)
    started from the last one's peak (a conversation of 166,667 turns: 100 MB).
    """
    import pyarrow as pa  # imported already by any caller; not at this module's top (see the module's docstring)

    pa.default_memory_pool().release_unused()
    if _C_TRIM is not None:
        _C_TRIM(0)
