"""Names kept for code that imports them from here (a source's parser: ``ArrowList``; tests): convhub no longer
adapts ``datasets``' private methods. The writer is ``convhub.engine.parquet_writer``, the rows held as Arrow
arrays ``convhub.engine.arrow_rows``, and the local build ``convhub.engine.local_build``; new code imports from
those modules.
"""

from convhub.engine.arrow_rows import ArrowList, has_arrow_turns, rows_table
from convhub.engine.parquet_writer import (
    LARGE_TABLE_BYTES,
    ParquetWriter,
    give_back_pages,
    is_free_text,
    leaf_paths,
    write_parquet,
)

__all__ = [
    "LARGE_TABLE_BYTES",
    "ArrowList",
    "ParquetWriter",
    "give_back_pages",
    "has_arrow_turns",
    "is_free_text",
    "leaf_paths",
    "rows_table",
    "write_parquet",
]
