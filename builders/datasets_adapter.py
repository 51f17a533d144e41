"""The one place convhub overrides a private method of ``datasets``: ``GeneratorBasedBuilder._prepare_split_single``.

Why: ``datasets`` encodes each example on its own, which took a quarter of a build; ``BatchWriting`` writes the
same rows a writer batch at a time (see ``_write_split``). Everything else convhub asks of ``datasets`` is public.

``problem_with_datasets`` says what changed when a ``datasets`` release no longer calls the method the way this
module expects (its name, its parameters, its caller ``_prepare_split``); ``tests/test_datasets_adapter.py`` runs
it, so such a release fails one named test before it fails a build. The pin in pyproject.toml (``datasets>=5.2,<6``)
spans the releases this check was run on (5.x); widen it when the test passes on a newer one.
"""

from __future__ import annotations

import inspect
import time
from itertools import islice

import datasets
import pyarrow as pa
from convhub import progress
from datasets.arrow_writer import ArrowWriter, ParquetWriter
from datasets.builder import Key

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
    if "_prepare_split_single" not in inspect.getsource(datasets.GeneratorBasedBuilder._prepare_split):
        return f"datasets {datasets.__version__}: _prepare_split no longer calls _prepare_split_single"
    return None


class BatchWriting:
    """Mixed into ``ConversationBuilder`` before ``datasets.GeneratorBasedBuilder``."""

    def _prepare_split_single(self, *args, **kwargs):
        from convhub.base import fewer_collections  # (base imports this module)

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
                    writer.write_table(pa.Table.from_pylist([row for _, row in batch], schema=schema))
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
            finally:
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
