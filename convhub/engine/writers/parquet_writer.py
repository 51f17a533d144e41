"""convhub's Parquet writer: every Parquet file a build, a derived view, a subset split, a duplicate drop or a mix
writes, as ``datasets``' own writer would but for the free-text columns (``column_options``). With pyarrow
directly, not through ``datasets``' ``ParquetWriter``: no private method of ``datasets`` is overridden to get
those column options, so a ``datasets`` release cannot change them under convhub.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable
from pathlib import Path

import datasets
import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from convhub import schema as convhub_schema

#: Rows per writer batch (and Parquet row group) where a caller names none: ``datasets``' default batch.
DEFAULT_BATCH_ROWS = 1000

#: Parquet's content-defined chunking, as ``datasets`` turns it on for the files it writes (its
#: ``DEFAULT_CDC_OPTIONS``): pages cut where the content says, so the Hub's storage deduplicates a rebuild's
#: unchanged rows. Kept here, not read from ``datasets``, so the files do not change with its defaults.
CONTENT_DEFINED_CHUNKING = {"min_chunk_size": 256 * 1024, "max_chunk_size": 1024 * 1024, "norm_level": 0}


def leaf_paths(arrow_schema: pa.Schema) -> list[str]:
    """Parquet's leaf column paths (``sessions.list.element.turns.list.element.text``), as its options name them:
    those of the Parquet schema pyarrow makes of ``arrow_schema`` (an empty file's, written in memory), so they
    follow pyarrow's own naming of every nested type."""
    empty = pa.BufferOutputStream()
    pq.write_table(arrow_schema.empty_table(), empty)
    return [column.path for column in pq.ParquetFile(pa.BufferReader(empty.getvalue())).schema]


def column_options(arrow_schema: pa.Schema) -> dict:
    """``pq.ParquetWriter``'s per-column options: Snappy everywhere; a dictionary and min/max statistics for every
    column but free text (``schema.FREE_TEXT``). For a long value Parquet makes several copies to compute
    statistics and one more into the dictionary it then abandons, and a reader decodes that dictionary page too:
    leaving both out bounds the memory of one very large record (docs/performance.md, "One very large record").
    Every other column keeps both, so DuckDB, Polars and pyarrow still skip row groups on ids, indices and
    timestamps."""
    leaves = leaf_paths(arrow_schema)
    kept = [leaf for leaf in leaves if leaf.rsplit(".", 1)[-1] not in convhub_schema.FREE_TEXT]
    return {"compression": "snappy", "use_dictionary": kept, "write_statistics": kept}


class ParquetWriter:
    """One Parquet file of ``features``' rows at ``path`` (a local path or an fsspec URL), written a table at a
    time (``write_table``), each table cut into row groups of ``writer_batch_size`` rows."""

    def __init__(self, features: datasets.Features, path: str, writer_batch_size: int | None = None):
        # the types, with the ``huggingface`` metadata ``load_dataset`` reads
        self.schema = features.arrow_schema
        self.writer_batch_size = writer_batch_size or DEFAULT_BATCH_ROWS
        self.num_rows = self.num_bytes = 0
        # a URL's file is opened, and closed with the writer, by pyarrow through its fsspec file system
        file_system, where = fsspec.core.url_to_fs(path) if "://" in path else (None, path)
        self._writer = pq.ParquetWriter(
            where,
            self.schema,
            filesystem=file_system,
            # pyarrow annotates a bool; its documentation and its code take a dict of the chunker's options
            use_content_defined_chunking=CONTENT_DEFINED_CHUNKING,  # pyright: ignore[reportArgumentType]
            write_page_index=True,
            **column_options(self.schema),
        )
        self._writer.add_key_value_metadata(
            {"content_defined_chunking": json.dumps(CONTENT_DEFINED_CHUNKING)}
        )

    def write_table(self, table: pa.Table) -> None:
        table = table.combine_chunks()
        # made the writer's schema: a reader's table may differ in metadata, a derived one in column order
        if not table.schema.equals(self.schema, check_metadata=False):
            table = table.select(self.schema.names).cast(self.schema)
        self.num_bytes += table.nbytes
        self.num_rows += table.num_rows
        self._writer.write_table(table, self.writer_batch_size)

    def finalize(self) -> tuple[int, int]:
        """Close the file; (rows, bytes) written, the bytes being the tables' Arrow size in memory: what
        ``datasets`` counts as a split's ``num_bytes``."""
        self._writer.close()
        return self.num_rows, self.num_bytes

    def close(self) -> None:
        """Release the file whatever happened (after an error too)."""
        if self._writer.is_open:
            # closing after a failed write: the error that matters is already raised
            with contextlib.suppress(Exception):
                self._writer.close()


def write_parquet(
    path: str | Path, features: datasets.Features, batches: Callable[[int], Iterable[pa.Table]]
) -> tuple[int, int]:
    """One Parquet file as every shard is written (``ParquetWriter``); ``batches(size)`` gives the tables to write,
    ``size`` being the writer's batch size, so a caller that reads rows in batches makes the row groups a build
    would make. Returns (rows, bytes)."""
    writer = ParquetWriter(features=features, path=str(path))
    try:
        for table in batches(writer.writer_batch_size):
            writer.write_table(table)
        return writer.finalize()
    finally:
        writer.close()
