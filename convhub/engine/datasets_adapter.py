"""The one place convhub overrides private methods of ``datasets``: ``GeneratorBasedBuilder._prepare_split_single``,
``DatasetBuilder._prepare_split`` and ``ParquetWriter._build_writer``.

Why:
- ``datasets`` encodes each example on its own, which took a quarter of a build; ``BatchWriting`` writes the
  same rows a writer batch at a time (see ``_write_split``).
- A split's preparation is where ``datasets`` runs its workers: ``BatchWriting._prepare_split`` runs it inside
  the builder's ``preparing_split`` (convhub's own hook: a progress bar that counts shards, which replaces
  ``datasets.builder.hf_tqdm`` for the while; LoCoMo's check of sample ids across its workers' files).
- ``datasets``' Parquet writer keeps min/max statistics and a dictionary for every column, and for a long text
  Parquet copies the value about six times for them; ``ParquetWriter`` leaves them out for free-text columns,
  which bounds the memory of one very large record.

Everything else convhub asks of ``datasets`` is public (a builder's ``_info``, ``_split_generators`` and
``_generate_examples`` are the hooks ``datasets`` documents). ``problem_with_datasets`` says what changed when a
``datasets`` release no longer calls these methods the way this module expects (names, parameters, callers, the
body ``ParquetWriter._build_writer`` copies); ``tests/test_datasets_adapter.py`` runs it, so such a release fails
one named test before it fails a build, and checks that no builder overrides another private method. The pin in
pyproject.toml (``datasets>=5.1,<6``) spans the releases this check and the test suite were run on (5.1.0 and
5.2.0); widen it when they pass on a newer one. (5.0 and older cannot go with convhub's ``huggingface_hub>=2.4``:
they require ``huggingface_hub<2``.)
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import inspect
import json
import textwrap
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from datasets import arrow_writer
from datasets.arrow_writer import ArrowWriter, get_parquet_column_options
from datasets.builder import Key

from convhub import schema
from convhub.engine import progress

#: ``GeneratorBasedBuilder._prepare_split_single``'s parameters, as ``_write_split`` takes them.
PARAMETERS = ("self", "gen_kwargs", "fpath", "file_format", "max_shard_size", "split_info", "job_id")


def problem_with_datasets() -> str | None:
    """None when the installed ``datasets`` calls ``_prepare_split_single`` as this module expects; else what differs."""
    method = getattr(datasets.GeneratorBasedBuilder, "_prepare_split_single", None)
    if method is None:
        return f"datasets {datasets.__version__} has no GeneratorBasedBuilder._prepare_split_single"
    found = tuple(inspect.signature(method).parameters)
    if found != PARAMETERS:
        return f"datasets {datasets.__version__}: _prepare_split_single{found}, expected {PARAMETERS}"
    prepare_split = getattr(datasets.GeneratorBasedBuilder, "_prepare_split", None)
    if prepare_split is None:
        return f"datasets {datasets.__version__} has no GeneratorBasedBuilder._prepare_split"
    found = tuple(inspect.signature(prepare_split).parameters)[:2]
    if found != ("self", "split_generator"):
        return f"datasets {datasets.__version__}: _prepare_split{found}, expected ('self', 'split_generator', ...)"
    source = inspect.getsource(prepare_split)
    if "_prepare_split_single" not in source:
        return f"datasets {datasets.__version__}: _prepare_split no longer calls _prepare_split_single"
    if "hf_tqdm(" not in source or not hasattr(datasets.builder, "hf_tqdm"):
        return f"datasets {datasets.__version__}: _prepare_split no longer makes its bar with builder.hf_tqdm"
    if "self._prepare_split(" not in inspect.getsource(datasets.DatasetBuilder._download_and_prepare):
        return f"datasets {datasets.__version__}: _download_and_prepare no longer calls _prepare_split"
    if body_digest(arrow_writer.ParquetWriter._build_writer) != COPIED_BUILD_WRITER:
        return (
            f"datasets {datasets.__version__} changed ParquetWriter._build_writer, which "
            "convhub.engine.datasets_adapter.ParquetWriter copies: compare the two and update the copy"
        )
    return None


def body_digest(function) -> str:
    """sha256 of a function's syntax tree: the same for the same code, whatever its comments and layout."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()


#: ``body_digest`` of ``datasets.arrow_writer.ParquetWriter._build_writer`` in the releases checked (5.1.0, 5.2.0).
COPIED_BUILD_WRITER = "3713bfff8504f5548d06d1fff40f2457af4938deb6f2226e4e88a1424ccffc5a"


def leaf_paths(arrow_schema: pa.Schema) -> list[str]:
    """Parquet's leaf column paths (``sessions.list.element.turns.list.element.text``), as its options name them."""

    def leaves(path: str, pa_type: pa.DataType):
        if pa.types.is_struct(pa_type):
            for field in pa_type:
                yield from leaves(f"{path}.{field.name}", field.type)
        elif pa.types.is_list(pa_type) or pa.types.is_large_list(pa_type):
            yield from leaves(f"{path}.list.element", pa_type.value_type)
        else:
            yield path

    return [path for field in arrow_schema for path in leaves(field.name, field.type)]


def is_free_text(leaf_path: str) -> bool:
    return leaf_path.rsplit(".", 1)[-1] in schema.FREE_TEXT


#: A table at least this large has its memory given back to the system once written (``give_back_pages``).
LARGE_TABLE_BYTES = 16 * 2**20


def give_back_pages() -> None:
    """Hand the free pages of Arrow's memory pool back to the system: after a split or view is written, and
    after any table of ``LARGE_TABLE_BYTES`` or more.

    pyarrow's default pool (mimalloc) keeps freed pages for reuse, so the memory of one very large record stayed
    with the process through every later step: a 32 MB record's ``turns`` build peaked 256 MB above a small
    record's, all of it free pages of the pool (``benchmarks/large_record.py``). Ordinary writer batches are far
    smaller than ``LARGE_TABLE_BYTES`` and keep the pool's reuse; the call costs about a microsecond when there is
    nothing to give back.
    """
    pa.default_memory_pool().release_unused()


class ArrowList(Sequence):
    """A list of a record held as one Arrow array (a very long conversation's turns), for a parser that would
    otherwise make a Python dict of each element: about 700 bytes of Python objects for a tiny turn of 100 bytes.

    Read as a sequence of plain values (``as_py``, a slice at a time), so whatever walks a record (statistics,
    language detection, ``datasets``' encoding, ``pa.Table.from_pylist``) sees what a list would hold; the writer
    (``rows_table``) puts the array into the table as it is. It holds no string UTF-8 cannot encode: Arrow
    refuses one when the array is made (``__arrow_array__`` is pyarrow's protocol, which ``jsonio`` knows too).
    """

    #: Elements made Python values at a time while iterating.
    CHUNK = 1024

    def __init__(self, array: pa.Array):
        self.array = array

    def __arrow_array__(self, type=None):
        return self.array if type is None else self.array.cast(type)

    def __len__(self) -> int:
        return len(self.array)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[position] for position in range(*index.indices(len(self)))]
        return self.array[index].as_py()

    def __iter__(self) -> Iterator[Any]:
        for start in range(0, len(self.array), self.CHUNK):
            yield from self.array.slice(start, self.CHUNK).to_pylist()

    def __repr__(self) -> str:
        return f"ArrowList({len(self)} {self.array.type})"


def has_arrow_turns(row: dict) -> bool:
    """Whether some session of ``row`` (a ``sessions`` row) holds its turns as an ``ArrowList``."""
    sessions = row.get("sessions")
    return isinstance(sessions, list) and any(
        isinstance(session, dict) and isinstance(session.get("turns"), ArrowList) for session in sessions
    )


def rows_table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    """``pa.Table.from_pylist(rows, schema=schema)``, but a row whose turns are an ``ArrowList`` becomes a table
    of its own around that array (``_arrow_turns_table``), not Python dicts: the same values, rows and types."""
    if not any(has_arrow_turns(row) for row in rows):
        return pa.Table.from_pylist(rows, schema=schema)
    tables, run = [], []
    for row in rows:
        if has_arrow_turns(row):
            if run:
                tables.append(pa.Table.from_pylist(run, schema=schema))
                run = []
            tables.append(_arrow_turns_table(row, schema))
        else:
            run.append(row)
    if run:
        tables.append(pa.Table.from_pylist(run, schema=schema))
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables)


def _arrow_turns_table(row: dict, schema: pa.Schema) -> pa.Table:
    """One ``sessions`` row as a table: everything but the turns by ``from_pylist``, then each session's turns
    (its ``ArrowList``, or a list converted here) put in as one list array."""
    sessions = row["sessions"]
    shell = {**row, "sessions": [{**session, "turns": []} for session in sessions]}
    table = pa.Table.from_pylist([shell], schema=schema)
    index = schema.get_field_index("sessions")
    column = table.column(index).combine_chunks()
    session_type = column.type.value_type
    turns_type = session_type.field("turns").type
    values = [
        session["turns"].array
        if isinstance(session["turns"], ArrowList)
        else pa.array(session["turns"], turns_type.value_type)
        for session in sessions
    ]
    lengths = [len(value) for value in values]
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32), pa.int32())
    joined = values[0] if len(values) == 1 else pa.concat_arrays(values)  # one session: no copy
    turns = pa.ListArray.from_arrays(offsets, joined, type=turns_type)
    structs = column.values  # one row, one list: its values are the row's sessions
    fields = [turns if field.name == "turns" else structs.field(i) for i, field in enumerate(session_type)]
    rebuilt = pa.StructArray.from_arrays(fields, fields=list(session_type))
    return table.set_column(
        index, schema.field(index), pa.ListArray.from_arrays(column.offsets, rebuilt, type=column.type)
    )


class ParquetWriter(arrow_writer.ParquetWriter):
    """``datasets``' Parquet writer, but free-text columns (``schema.FREE_TEXT``) get neither min/max statistics
    nor a dictionary.

    For a long value Parquet copies it about five times to compute statistics and once more into the dictionary
    it then abandons, and a reader decodes that dictionary page too: a 32 MB text cost 248 MB of peak memory to
    write with both, 54 MB with neither (``benchmarks/large_record.py`` measures a whole build). Every other
    column keeps both, so DuckDB, Polars and pyarrow still skip row groups on ids, indices and timestamps.
    """

    def _build_writer(self, inferred_schema: pa.Schema):
        # datasets' ParquetWriter._build_writer (5.2.0), with _column_options for its column options
        self._schema, self._features = self._build_schema(inferred_schema)
        self.pa_writer = pq.ParquetWriter(
            self.stream,
            self._schema,
            use_content_defined_chunking=self.use_content_defined_chunking,
            write_page_index=self.write_page_index,
            **self._column_options(),
        )
        if self.use_content_defined_chunking is not False:
            self.pa_writer.add_key_value_metadata(
                {"content_defined_chunking": json.dumps(self.use_content_defined_chunking)}
            )

    def _column_options(self) -> dict:
        options = get_parquet_column_options(self._features, self._schema)
        options["use_dictionary"] = [leaf for leaf in options["use_dictionary"] if not is_free_text(leaf)]
        options["write_statistics"] = [leaf for leaf in leaf_paths(self._schema) if not is_free_text(leaf)]
        return options


def write_parquet(
    path: str | Path, features: datasets.Features, batches: Callable[[int], Iterable[pa.Table]]
):
    """One Parquet file as every shard is written (``ParquetWriter``: ``datasets``' metadata and page index, free
    text without statistics or dictionary); ``batches(size)`` gives the tables to write, ``size`` being the
    writer's batch size, so a caller that reads rows in batches makes the row groups a build would make."""
    writer = ParquetWriter(features=features, path=str(path))
    try:
        for table in batches(writer.writer_batch_size):
            writer.write_table(table)
        writer.finalize()
    finally:
        writer.close()


class BatchWriting:
    """Mixed into ``ConversationBuilder`` before ``datasets.GeneratorBasedBuilder``."""

    @contextlib.contextmanager
    def preparing_split(self, split_generator: datasets.SplitGenerator) -> Iterator[None]:
        """What a builder does around the preparation of one split (nothing here; see ``ConversationBuilder``)."""
        yield

    #: The most processes a split was prepared in (``_prepare_split``): 1 with no ``num_proc``.
    processes_run: int = 0

    def _prepare_split(self, split_generator, *args, **kwargs):
        """``datasets``' own, in the builder's ``preparing_split``, with ``num_proc`` no more than the split
        has shards: ``datasets`` would lower it itself, with a warning on every build of a one-file source
        ("Setting num_proc from 2 back to 1"), which the command replaces with one line of its own where
        the user asked for more processes (``processes_run`` says how many ran)."""
        shards = len(split_generator.gen_kwargs.get("shards") or ()) or 1
        if kwargs.get("num_proc"):
            kwargs["num_proc"] = min(kwargs["num_proc"], shards)
        self.processes_run = max(self.processes_run, kwargs.get("num_proc") or 1)
        with self.preparing_split(split_generator):
            return super()._prepare_split(split_generator, *args, **kwargs)

    def _prepare_split_single(self, *args, **kwargs):
        from convhub.engine.builder import fewer_collections  # (base imports this module)

        with fewer_collections():  # a worker process may not have inherited the parent's setting
            yield from self._write_split(*args, **kwargs)

    def _write_split(self, gen_kwargs, fpath, file_format, max_shard_size, split_info, job_id):
        """``datasets``' own loop, with rows converted to Arrow a batch at a time.

        ``datasets`` encodes each example on its own (``Features.encode_example``, then a ``TypedSequence``
        per column), which took a quarter of a build. Our rows are already in the features' shape (JSON text
        made by ``schema.to_json`` where the features hold free-form values), so one
        ``pa.Table.from_pylist`` per writer batch builds the same table about 20 times faster
        (``tests/test_batch_writer.py`` checks that the two paths give equal tables). The batches are the
        writer's own, so the Parquet row groups are those ``datasets`` would write. Files, shard splitting
        at ``max_shard_size`` and the progress protocol are ``datasets``' (5.x; pinned below 6); each update is a
        ``progress.Progress``, the rows since the last one, that also carries the shards finished.
        """
        writer_class = ParquetWriter if file_format == "parquet" else ArrowWriter
        schema = self.info.features.arrow_schema
        shard_lengths, original_shard_lengths = [], []
        total_num_examples = total_num_bytes = shard_id = original_shard_id = 0
        shards_reported = 0  # of this job's shards, those finished and counted in an update

        def update(finished: int) -> progress.Progress:
            nonlocal since_update, shards_reported
            report = progress.Progress(since_update, finished - shards_reported)
            since_update, shards_reported = 0, finished
            return report

        since_update, last_update = 0, time.time()

        def new_writer(features):
            path = fpath.replace("SSSSS", f"{shard_id:05d}").replace("JJJJJ", f"{job_id:05d}")
            return writer_class(
                features=features,
                path=path,
                writer_batch_size=self._writer_batch_size,
                storage_options=self._fs.storage_options,
                embed_local_files=file_format == "parquet",
            )

        def close(writer) -> None:
            nonlocal total_num_examples, total_num_bytes
            num_examples, num_bytes = writer.finalize()
            writer.close()
            give_back_pages()
            shard_lengths.append(num_examples)
            total_num_examples += num_examples
            total_num_bytes += num_bytes

        generator = self._generate_examples(**gen_kwargs)
        try:
            writer = new_writer(self.info.features)
            try:
                while batch := list(islice(generator, writer.writer_batch_size)):
                    if max_shard_size is not None and writer._num_bytes > max_shard_size:
                        close(writer)
                        shard_id += 1
                        writer = new_writer(writer._features)
                    table = rows_table([row for _, row in batch], schema)
                    writer.write_table(table)
                    written, table = table.nbytes, None
                    if written >= LARGE_TABLE_BYTES:
                        give_back_pages()
                    for key, _ in batch:
                        if isinstance(key, Key):
                            original_shard_id = key.original_shard_id
                        if len(original_shard_lengths) <= original_shard_id:
                            original_shard_lengths.extend(
                                [0] * (1 + original_shard_id - len(original_shard_lengths))
                            )
                        original_shard_lengths[original_shard_id] += 1
                    since_update += len(batch)
                    if time.time() > last_update + datasets.config.PBAR_REFRESH_TIME_INTERVAL:
                        last_update = time.time()
                        yield job_id, False, update(original_shard_id)  # the shards before this one are done
            except BaseException:
                # no progress is yielded here: a generator closed by Ctrl-C (GeneratorExit) may not yield again
                close(writer)
                raise
            yield job_id, False, update(len(gen_kwargs.get("shards") or ()))
            close(writer)
        except Exception as error:
            raise datasets.exceptions.DatasetGenerationError(
                "An error occurred while generating the dataset"
            ) from error
        summary = (
            total_num_examples,
            total_num_bytes,
            writer._features,
            shard_id + 1,
            shard_lengths,
            original_shard_id + 1,
            original_shard_lengths,
        )
        yield job_id, True, summary
