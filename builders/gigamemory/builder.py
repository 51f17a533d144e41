"""GigaMemory: the long-term-memory benchmark of the AI Journey 2025 contest (ai-forever/memory_aij2025)."""

from __future__ import annotations

import glob
import os
from typing import ClassVar

from builders.gigamemory import groups
from builders.gigamemory.parse import SUFFIXES, subset_of
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
    #: First-line bytes per shard: several shards give ``num_proc`` work on a large file.
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
            files = [(url, name) for name, url in url_files(data_dir, SUFFIXES)]
            if not files:
                raise FileNotFoundError(f"no GigaMemory *.jsonl or *.jsonl.gz file in {data_dir}")
        elif os.path.isfile(data_dir):
            files = [(data_dir, os.path.basename(data_dir))]
        else:
            pattern = os.path.join(glob.escape(data_dir), "*")
            paths = sorted(path for suffix in SUFFIXES for path in glob.glob(pattern + suffix))
            if not paths:
                raise FileNotFoundError(f"no GigaMemory *.jsonl or *.jsonl.gz file in {data_dir}")
            files = [(path, os.path.basename(path)) for path in paths]
        by_subset: dict[str, str] = {}
        for path, name in files:
            subset = subset_of(name)
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
            files = [(path, name) for path, name in files if subset_of(name) in wanted]
        return files

    def shards(self, dl_manager):
        """Each file's groups of lines (:mod:`builders.gigamemory.groups`) in shards. A file at a URL is copied here
        for pass 1; its shards name the URL, which a task where that copy is not (another machine) reads."""
        shards = []
        for path, file_name in self.source_files(dl_manager):
            local = local_copy(path, download_folder(dl_manager)) if "://" in path else path
            try:
                file_groups, notes = groups.index_file(local, path, self.reject)
            except SourceError as error:  # an empty file: with --on-bad-record skip, the others go on
                self.reject(error, None, scope="file")
                continue
            shard_bytes = self.SHARD_BYTES
            if not path.endswith(".gz"):  # seeks are free: smaller shards balance num_proc workers
                shard_bytes = min(shard_bytes, self.PLAIN_SHARD_BYTES)
            shards += groups.plan_shards(file_groups, notes, path, file_name, shard_bytes, local)
        return {SPLIT: shards}

    def parse_shard(self, shard, notes):
        return groups.parse_shard(shard, notes, self.reject)
