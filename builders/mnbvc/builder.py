"""MNBVC: the dialogue formats of the Massive Never-ending BT Vast Chinese corpus (多轮对话, 问答, 论坛).

Input: any number of ``*.jsonl`` / ``*.jsonl.gz`` shards under ``--data-dir`` (searched recursively; a local
folder or file, or an fsspec URL such as ``hf://datasets/liwu/MNBVC/forum/20230253``), or
by default the forum shards MNBVC publishes in the Hugging Face dataset ``liwu/MNBVC``. Each shard's
format is detected from its first rows, or given with the config's ``source_format`` (``--format``).

Shards: a 问答 or 论坛 file is one shard (one row = one conversation), or, when it is plain JSONL bigger
than ``RANGE_BYTES``, one shard per line-aligned byte range of it (rows, order and line numbers as one).
多轮对话 files are one ``group_shard``, regrouped by the engine (``convhub.engine.regroup`` on one machine, partitioned by
conversation; each slice of a partition is a shard), so a conversation whose rows are spread over files still comes
out whole. When streaming
(``as_streaming_dataset``), shards are read once from their URLs: 问答 and 论坛 stream as they are, and a
多轮对话 file streams one conversation per run of adjacent rows (see ``multiturn.multiturn_runs``).
"""

from __future__ import annotations

import os
from functools import partial
from typing import Any, ClassVar

from datasets.download.streaming_download_manager import StreamingDownloadManager

from builders.mnbvc import files, multiturn, parse
from convhub.engine import regroup
from convhub.engine.builder import ConversationBuilder, group_shard
from convhub.errors import Notes, SourceError
from convhub.storage.folders import open_url

DEFAULT_REPO = "liwu/MNBVC"
DEFAULT_PATTERN = "forum/**/*.jsonl.gz"
SPLIT = "train"

#: Where a shard of each kind is opened from: a local file, a file ``datasets`` streams, a URL an engine's task opens.
OPENERS = {"rows": files.open_local, "stream": files.open_streamed, "url": open_url}
RECORDS = {
    parse.QA: parse.qa_records,
    parse.FORUM: parse.forum_records,
    parse.MULTITURN: multiturn.multiturn_runs,
}


def list_default_shards() -> list[str]:
    """``hf://`` paths of the forum shards MNBVC publishes (needs the network)."""
    from huggingface_hub import HfFileSystem

    found = HfFileSystem().glob(f"datasets/{DEFAULT_REPO}/{DEFAULT_PATTERN}")
    return [f"hf://{path}" for path in sorted(found)]


def _url_shards(name: str, url: str, kind: str) -> list[dict[str, Any]]:
    """A 问答 or 论坛 file an engine's task reads at its URL: one shard."""
    return [{"kind": "url", "format": kind, "name": name, "path": url}]


class MnbvcBuilder(ConversationBuilder):
    SOURCE = "mnbvc"
    HUB_NAME = "mnbvc-dialogue-unified"
    HAS_QUESTIONS = False  # no memory questions in the format
    PRETTY_NAME = "MNBVC dialogue (convhub unified)"
    LICENSE = "mit"
    LANGUAGES = ("zh", "en")
    HOMEPAGE = "https://github.com/esbatmop/MNBVC"
    SOURCE_DATASETS = ("extended|liwu/MNBVC",)
    DESCRIPTION = "Chinese multi-turn dialogue, question-answer and forum threads from the MNBVC corpus."
    ROLE_MAPPING: ClassVar[dict[str, str]] = {
        "问 (the question of a Q/A pair)": "user",
        "答 (the answer of a Q/A pair)": "assistant",
        "主题 (a forum thread's topic post, speaker 楼主)": "user",
        "回复 by 楼主 or 洞主 (the thread's author)": "user",
        "回复 by anyone else": "assistant",
    }
    FORMATS = parse.FORMATS
    CITATION = """@misc{mnbvc,
  title        = {{MNBVC}: Massive Never-ending BT Vast Chinese corpus},
  author       = {{MNBVC team}},
  year         = {2023},
  howpublished = {\\url{https://github.com/esbatmop/MNBVC}}
}"""

    #: A plain 问答 or 论坛 file bigger than this is read as line-aligned byte ranges, one shard each.
    RANGE_BYTES = regroup.SLICE_BYTES

    # -- where the shards are ----------------------------------------------------------------------

    def shards(self, dl_manager) -> dict[str, list[dict[str, Any]]]:
        """Streamed: every file read once, as it comes. Built: the multi-turn files as one group shard (an engine
        regroups their rows), then the others as row shards."""
        typed = self._typed_inputs(dl_manager)
        if isinstance(dl_manager, StreamingDownloadManager):
            return {SPLIT: [{"kind": "stream", "format": k, "name": n, "path": p} for n, p, k in typed]}
        return self._listed(typed, self._row_shards, files.open_local)

    def engine_shards(self, dl_manager, run=None) -> dict[str, list[dict[str, Any]]]:
        """As ``shards``, but a URL ``--data-dir`` is read where it is, by the engine's tasks (no download)."""
        data_dir = self.config.data_dir or ""
        if "://" not in data_dir:
            return self.shards(dl_manager)
        typed = self._typed(files.url_inputs(data_dir), open_url)
        return self._listed(typed, _url_shards, open_url)

    def _listed(self, typed, row_shards, opener) -> dict[str, list[dict[str, Any]]]:
        """The multi-turn files of ``typed`` as one group shard (sized through ``opener``), then the others'
        ``row_shards(name, path, format)``."""
        multiturn_files = [(name, path) for name, path, kind in typed if kind == parse.MULTITURN]
        rows = [shard for n, p, kind in typed if kind != parse.MULTITURN for shard in row_shards(n, p, kind)]
        if not multiturn_files:
            return {SPLIT: rows}
        sizes = [files.uncompressed_size(path, opener) for _, path in multiturn_files]
        return {SPLIT: [group_shard(multiturn_files, sizes, self.PARTITION_BYTES), *rows]}

    def keyed_rows(self, shard: dict[str, Any], file_index: int):
        opener = open_url if "://" in shard["files"][file_index][1] else None
        return multiturn.keyed_rows(shard["files"], file_index, opener, self.config.subsets, self.reject)

    def grouped_records(self, rows, shard: dict[str, Any], notes: Notes):
        names = [name for name, _ in shard["files"]]
        return multiturn.records_from_sorted(rows, names, notes, self.reject)

    def _typed_inputs(self, dl_manager) -> list[tuple[str, str, str]]:
        """(name, path, format) of every input shard the build reads."""
        self._download_config = getattr(dl_manager, "download_config", None)
        if isinstance(dl_manager, StreamingDownloadManager):
            opener = partial(files.open_streamed, download_config=self._download_config)
        else:
            opener = files.open_local
        return self._typed(self._inputs(dl_manager), opener)

    def _typed(self, inputs: list[tuple[str, str]], opener) -> list[tuple[str, str, str]]:
        typed = [(name, path, self._format_of(name, path, opener)) for name, path in inputs]
        return [(name, path, kind) for name, path, kind in typed if kind and self._format_wanted(kind)]

    def _row_shards(self, name: str, path: str, kind: str) -> list[dict[str, Any]]:
        """A 问答 or 论坛 file as shards: a plain file bigger than ``RANGE_BYTES`` as line-aligned byte
        ranges (so workers get even shares beside the multi-turn slices), a gzipped one whole (it cannot
        be entered mid-way). The ranges read the same rows, in the same order, with the same line numbers."""
        shard = {"kind": "rows", "format": kind, "name": name, "path": path}
        if os.path.getsize(path) <= self.RANGE_BYTES or files.is_gzip(path):
            return [shard]
        return [
            {**shard, "range": list(byte_range)} for byte_range in files.line_ranges(path, self.RANGE_BYTES)
        ]

    def _inputs(self, dl_manager) -> list[tuple[str, str]]:
        """(name, path) of every input shard; a name is the path relative to ``data_dir``."""
        data_dir = self.config.data_dir
        if data_dir is None:
            return self._default_inputs(dl_manager)
        if "://" in data_dir:  # streamed, or downloaded first
            found = files.url_inputs(data_dir)
            paths = dl_manager.download([url for _, url in found])
            return [(name, path) for (name, _), path in zip(found, paths, strict=True)]
        if os.path.isfile(data_dir):
            return [(os.path.basename(data_dir), data_dir)]
        if not os.path.isdir(data_dir):
            raise FileNotFoundError(f"--data-dir {data_dir} is neither a folder nor a file")
        found = files.local_shard_paths(data_dir)
        if not found:
            raise FileNotFoundError(f"no MNBVC *.jsonl or *.jsonl.gz shard under {data_dir}")
        return [(os.path.relpath(path, data_dir).replace(os.sep, "/"), path) for path in found]

    def _default_inputs(self, dl_manager) -> list[tuple[str, str]]:
        """The forum shards MNBVC publishes on the Hub, downloaded."""
        try:
            urls = list_default_shards()
        except Exception as error:  # any network or Hub failure: the message says what to do
            raise FileNotFoundError(
                f"could not list MNBVC's dialogue shards in the Hugging Face dataset {DEFAULT_REPO} "
                f"({type(error).__name__}: {error}); download *.jsonl.gz shards yourself and pass "
                "--data-dir DIR"
            ) from error
        if not urls:
            raise FileNotFoundError(
                f"no {DEFAULT_PATTERN} shard found in {DEFAULT_REPO}; pass --data-dir DIR with MNBVC shards"
            )
        paths = dl_manager.download(urls)
        return [(url.split(f"{DEFAULT_REPO}/", 1)[1], path) for url, path in zip(urls, paths, strict=True)]

    def _format_of(self, name: str, path: str, open_path) -> str | None:
        """The file's format; None for a file left out (under ``--on-bad-record skip``: unreadable, empty)."""
        forced = getattr(self.config, "source_format", None)
        if forced:
            return parse.normalize_format(forced)
        lines = files.open_lines(partial(open_path, path), name)
        try:
            rows = files.iter_rows(lines, name, self.reject)
            kind = parse.detect_format(rows, name, tolerant=self.config.on_bad_record == "skip")
            if kind is None:
                raise SourceError(name, None, None, "no row: the file is empty (MNBVC files are JSON lines)")
            return kind
        except SourceError as error:
            self.reject(error, None, scope="file")
            return None
        finally:
            lines.close()

    def _format_wanted(self, kind: str) -> bool:
        """False only when every ``--subset`` names another format, so the file need not be read."""
        subsets = self.config.subsets
        if not subsets:
            return True
        for wanted in subsets:
            head = wanted.split("/", 1)[0]
            if head == kind or head not in parse.FORMATS:
                return True
        return False

    # -- one shard → canonical records ----------------------------------------------------------

    def parse_shard(self, shard: dict[str, Any], notes: Notes):
        if "range" in shard:
            lines = files.range_lines(shard["path"], shard["name"], *shard["range"])
        else:
            opener = OPENERS[shard["kind"]]
            if shard["kind"] == "stream":
                opener = partial(opener, download_config=getattr(self, "_download_config", None))
            lines = files.open_lines(partial(opener, shard["path"]), shard["name"])
        rows = files.iter_rows(lines, shard["name"], self.reject)
        return RECORDS[shard["format"]](rows, shard["name"], notes, self.config.subsets, self.reject)
