"""GigaMemory: the long-term-memory benchmark of the AI Journey 2025 contest (ai-forever/memory_aij2025)."""

from __future__ import annotations

import glob
import os
from typing import ClassVar

from builders.gigamemory import index, parse, read
from convhub.engine.builder import ConversationBuilder, download_folder
from convhub.errors import SourceError
from convhub.storage.folders import local_copy, url_files

#: The public sample; the contest's evaluation sets are closed.
URL = "https://raw.githubusercontent.com/ai-forever/memory_aij2025/main/data/format_example.jsonl"
SPLIT = "test"


class GigamemoryBuilder(ConversationBuilder):
    SOURCE = "gigamemory"
    HUB_NAME = "gigamemory-unified"
    PRETTY_NAME = "GigaMemory (convhub unified)"
    LICENSE = "unknown"
    LANGUAGES = ("ru",)
    HOMEPAGE = "https://github.com/ai-forever/memory_aij2025"
    SOURCE_DATASETS = ("extended|other-gigamemory",)
    DESCRIPTION = (
        "Very long Russian user-assistant dialogues with long-term memory questions (AIJ Contest 2025)."
    )
    ROLE_MAPPING: ClassVar[dict[str, str]] = {"user": "user", "assistant": "assistant", "system": "system"}
    CITATION = """@misc{gigamemory2025,
  title        = {{GigaMemory}: global memory for {LLM} ({AI} Journey Contest 2025)},
  author       = {{ai-forever}},
  year         = {2025},
  howpublished = {\\url{https://github.com/ai-forever/memory_aij2025}}
}"""
    #: Dialogue bytes per shard: several shards give ``num_proc`` work on a large file.
    SHARD_BYTES = 64 * 1024 * 1024
    #: The same for a plain ``.jsonl`` (a ``.gz`` shard decompresses from the file's start to its first line).
    PLAIN_SHARD_BYTES = 8 * 1024 * 1024
    #: A `sessions` row is a whole ~350k-character dialogue: write (and hold) a few dozen at a time.
    WRITER_BATCH_SIZES: ClassVar[dict[str, int]] = {"sessions": 32}

    def source_files(self, dl_manager) -> list[tuple[str, str]]:
        """(local path or URL, file name) of every ``*.jsonl`` / ``*.jsonl.gz`` of ``--data-dir`` (or that one
        file); ``--data-dir`` may be a URL (``hdfs://``, ``s3a://``, any fsspec URL).

        Without ``--data-dir``: the public sample, downloaded (the cache names it by a hash, hence the name).
        Each file is a subset named by its stem; ``--subset`` keeps some of them.
        """
        data_dir = self.config.data_dir
        if data_dir is None:
            files = [(dl_manager.download(URL), URL.rsplit("/", 1)[-1])]
        elif "://" in data_dir:
            files = [(url, name) for name, url in url_files(data_dir, read.SUFFIXES)]
            if not files:
                raise FileNotFoundError(f"no GigaMemory *.jsonl or *.jsonl.gz file in {data_dir}")
        elif os.path.isfile(data_dir):
            files = [(data_dir, os.path.basename(data_dir))]
        else:
            pattern = os.path.join(glob.escape(data_dir), "*")
            paths = sorted(path for suffix in read.SUFFIXES for path in glob.glob(pattern + suffix))
            if not paths:
                raise FileNotFoundError(f"no GigaMemory *.jsonl or *.jsonl.gz file in {data_dir}")
            files = [(path, os.path.basename(path)) for path in paths]
        by_subset: dict[str, str] = {}
        for path, name in files:
            subset = read.subset_of(name)
            if subset in by_subset:
                raise SourceError(
                    path, None, None, f"same subset {subset!r} as {by_subset[subset]}; rename one"
                )
            by_subset[subset] = path
        wanted = self.config.subsets
        if wanted:
            unknown = sorted(set(wanted) - set(by_subset))
            if unknown:
                raise KeyError(
                    f"gigamemory has no subset {', '.join(unknown)}; subsets: {', '.join(by_subset)}"
                )
            files = [(path, name) for path, name in files if read.subset_of(name) in wanted]
        return files

    #: Processes for pass 1 (the index) where no build says its ``num_proc``: pass 1 parses every distinct
    #: dialogue before the first row, so a stream uses the cores, up to this many.
    STREAM_INDEX_PROCESSES = 8

    def shards(self, dl_manager, run=None):
        """Each file's dialogues (pass 1's groups) in shards; with ``run``, an engine's map, pass 1 parses and
        hashes the distinct dialogues in the engine's tasks.

        A file at a URL is downloaded for pass 1, which maps it whole on this machine; its shards name the URL,
        and a task where that copy is not (an executor on another machine) reads its lines there."""
        shards = []
        for path, file_name in self.source_files(dl_manager):
            url = path if "://" in path else None
            local = local_copy(url, download_folder(dl_manager)) if url else path
            reject = self.reject if url is None else _naming_the_url(self.reject, local, url)
            try:
                processes = self._build_processes or min(os.cpu_count() or 1, self.STREAM_INDEX_PROCESSES)
                file_index = index.index_file(local, reject, processes, run, url)
            except SourceError as error:  # an empty file: with --on-bad-record skip, the others go on
                reject(error, None, scope="file")
                continue
            shard_bytes = self.SHARD_BYTES
            if not path.endswith(".gz"):  # seeks are free: smaller shards balance num_proc workers
                shard_bytes = min(shard_bytes, self.PLAIN_SHARD_BYTES)
            planned = index.plan_shards(file_index, shard_bytes, file_name)
            for shard in planned if url else ():
                shard.update(path=url, local=local)
            shards.extend(planned)
        return {SPLIT: shards}

    def engine_shards(self, dl_manager, run=None):
        return self.shards(dl_manager, run)

    def parse_shard(self, shard, notes):
        return parse.parse_shard(shard, notes, self.reject)


def _naming_the_url(reject, local: str, url: str):
    """``reject`` of pass 1's errors, each naming the file at its URL instead of the copy pass 1 read."""

    def renamed(error: SourceError, *args, **kwargs):
        if error.path == local:
            error = SourceError(url, error.record, error.field, error.problem)
        return reject(error, *args, **kwargs)

    return renamed
