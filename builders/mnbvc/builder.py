"""MNBVC: the dialogue formats of the Massive Never-ending BT Vast Chinese corpus (多轮对话, 问答, 论坛).

Input: any number of ``*.jsonl`` / ``*.jsonl.gz`` shards under ``--data-dir`` (searched recursively; a local
folder or file, or an fsspec URL such as ``hf://datasets/liwu/MNBVC/forum/20230253``), or
by default the forum shards MNBVC publishes in the Hugging Face dataset ``liwu/MNBVC``. Each shard's
format is detected from its first rows, or given with the config's ``source_format`` (``--format``).

Shards: a 问答 or 论坛 file is one shard (one row = one conversation), or, when it is plain JSONL bigger
than ``RANGE_BYTES``, one shard per line-aligned byte range of it (rows, order and line numbers as one).
多轮对话 files are first hash-partitioned by conversation key (``convhub.mnbvc.regroup``) and each partition is a shard, so a
conversation whose rows are spread over files still comes out whole. When streaming
(``as_streaming_dataset``), shards are read once from their URLs: 问答 and 论坛 stream as they are, and a
多轮对话 file streams one conversation per run of adjacent rows (see ``parse.multiturn_runs``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from functools import partial
from typing import Any, BinaryIO, ClassVar

import datasets
from convhub.base import ConversationBuilder, group_shard
from convhub.errors import Notes, SourceError
from convhub.mnbvc import parse, regroup
from datasets.download.streaming_download_manager import StreamingDownloadManager
from datasets.utils.file_utils import xopen

DEFAULT_REPO = "liwu/MNBVC"
DEFAULT_PATTERN = "forum/**/*.jsonl.gz"
SPLIT = "train"
SUFFIXES = (".jsonl", ".jsonl.gz")


def local_shard_paths(data_dir: str) -> list[str]:
    """Every shard under ``data_dir``, each file once, in path order (hidden files and folders skipped).

    Symbolic links to folders are followed, but a folder reached again (a link loop) is not entered twice
    and a file reached under two names is read under the first: a recursive glob would read a loop's files
    over and over, or never finish.
    """
    candidates = []
    entered = set()
    for root, folders, files in os.walk(data_dir, followlinks=True):
        status = os.stat(root)
        if (status.st_dev, status.st_ino) in entered:
            folders[:] = []
            continue
        entered.add((status.st_dev, status.st_ino))
        folders[:] = [name for name in folders if not name.startswith(".")]
        candidates += [
            os.path.join(root, name) for name in files if name.endswith(SUFFIXES) and not name.startswith(".")
        ]
    found, read = [], set()
    for path in sorted(candidates):
        status = os.stat(path)
        if (status.st_dev, status.st_ino) not in read:
            read.add((status.st_dev, status.st_ino))
            found.append(path)
    return found


def list_default_shards() -> list[str]:
    """``hf://`` paths of the forum shards MNBVC publishes (needs the network)."""
    from huggingface_hub import HfFileSystem

    found = HfFileSystem().glob(f"datasets/{DEFAULT_REPO}/{DEFAULT_PATTERN}")
    return [f"hf://{path}" for path in sorted(found)]


def _open_remote(path: str, download_config):
    return xopen(path, "rb", download_config=download_config)


def open_url(url: str) -> BinaryIO:
    """A file under a URL, opened with fsspec where an engine's task reads it (``s3a://``, Hadoop's name for S3,
    is fsspec's ``s3://``; ``hdfs://`` needs pyarrow's libhdfs, ``s3://`` the s3fs package)."""
    import fsspec

    return fsspec.open(_fsspec_url(url), "rb").open()


def _fsspec_url(url: str) -> str:
    return "s3://" + url[len("s3a://") :] if url.startswith("s3a://") else url


def url_inputs(url: str) -> list[tuple[str, str]]:
    """(name, URL) of every shard under ``url``, named as ``--data-dir`` names local ones, not downloaded."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(_fsspec_url(url))
    root = root.rstrip("/")
    found = [root] if fs.isfile(root) else sorted(fs.find(root))
    found = [path for path in found if path.endswith(SUFFIXES)]
    if not found:
        raise FileNotFoundError(f"no MNBVC *.jsonl or *.jsonl.gz shard under {url}")
    prefix = url.rstrip("/")
    names = [os.path.basename(path) if path == root else path[len(root) + 1 :] for path in found]
    return [(name, prefix if found == [root] else f"{prefix}/{name}") for name in names]


def url_size(url: str) -> int:
    """``regroup.uncompressed_size`` of a file under a URL."""
    with open_url(url) as handle:
        head = handle.read(2)
        size = handle.seek(0, os.SEEK_END)
        if size < 18 or head != b"\x1f\x8b":
            return size
        handle.seek(-4, os.SEEK_END)
        return max(size, int.from_bytes(handle.read(4), "little"))


class MnbvcBuilder(ConversationBuilder):
    SOURCE = "mnbvc"
    HUB_NAME = "mnbvc-dialogue-unified"
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

    # -- where the shards are ----------------------------------------------------------------------

    def shards(self, dl_manager) -> dict[str, list[dict[str, Any]]]:
        return self._shards(dl_manager, grouped_by_engine=False)

    def engine_shards(self, dl_manager) -> dict[str, list[dict[str, Any]]]:
        """The multi-turn files as one group shard (the engine regroups them), then the row shards."""
        return self._shards(dl_manager, grouped_by_engine=True)

    def keyed_rows(self, shard: dict[str, Any], file_index: int):
        name, path = shard["files"][file_index]
        count = shard["partitions"]
        opener = open_url if "://" in path else None
        return regroup.keyed_rows(file_index, name, path, count, opener, self.config.subsets, self.reject)

    def grouped_records(self, rows, shard: dict[str, Any], notes: Notes):
        names = [name for name, _ in shard["files"]]
        return regroup.records_from_sorted(rows, names, notes, self.reject)

    def _shards(self, dl_manager, grouped_by_engine: bool) -> dict[str, list[dict[str, Any]]]:
        if grouped_by_engine and "://" in (self.config.data_dir or ""):
            return self._url_shards(self.config.data_dir)
        streaming = isinstance(dl_manager, StreamingDownloadManager)
        inputs = self._inputs(dl_manager)
        self._download_config = getattr(dl_manager, "download_config", None)
        open_path = (
            partial(_open_remote, download_config=self._download_config) if streaming else parse.open_local
        )
        typed = [(name, path, self._format_of(name, path, open_path)) for name, path in inputs]
        typed = [(n, p, kind) for n, p, kind in typed if kind and self._format_wanted(kind)]
        if streaming:
            shards = [{"kind": "stream", "format": kind, "name": n, "path": p} for n, p, kind in typed]
            return {SPLIT: shards}
        multiturn = [(n, p) for n, p, kind in typed if kind == parse.MULTITURN]
        rows = [
            shard for n, p, kind in typed if kind != parse.MULTITURN for shard in self._row_shards(n, p, kind)
        ]
        if not grouped_by_engine:
            return {SPLIT: self._partition(multiturn) + rows}
        if not multiturn:
            return {SPLIT: rows}
        sizes = [regroup.uncompressed_size(path) for _, path in multiturn]
        partition_bytes = getattr(self, "PARTITION_BYTES", regroup.PARTITION_BYTES)
        # the local build's partitions (so the same order of conversations), past its open-files cap
        count = regroup.partition_count(sum(sizes), partition_bytes, max_partitions=None)
        return {SPLIT: [group_shard(multiturn, count), *rows]}

    def _url_shards(self, url: str) -> dict[str, list[dict[str, Any]]]:
        """For an engine whose tasks open the files themselves: shards under ``url``, read where they are (no
        download); the multi-turn files as one group shard, each 问答 or 论坛 file whole."""
        typed = [(n, u, self._format_of(n, u, open_url)) for n, u in url_inputs(url)]
        typed = [(n, u, kind) for n, u, kind in typed if kind and self._format_wanted(kind)]
        multiturn = [(n, u) for n, u, kind in typed if kind == parse.MULTITURN]
        rows = [
            {"kind": "url", "format": k, "name": n, "path": u} for n, u, k in typed if k != parse.MULTITURN
        ]
        if not multiturn:
            return {SPLIT: rows}
        partition_bytes = getattr(self, "PARTITION_BYTES", regroup.PARTITION_BYTES)
        count = regroup.partition_count(sum(url_size(u) for _, u in multiturn), partition_bytes, None)
        return {SPLIT: [group_shard(multiturn, count), *rows]}

    def _row_shards(self, name: str, path: str, kind: str) -> list[dict[str, Any]]:
        """A 问答 or 论坛 file as shards: a plain file bigger than ``RANGE_BYTES`` as line-aligned byte
        ranges (so workers get even shares beside the multi-turn slices), a gzipped one whole (it cannot
        be entered mid-way). The ranges read the same rows, in the same order, with the same line numbers."""
        shard = {"kind": "rows", "format": kind, "name": name, "path": path}
        range_bytes = getattr(self, "RANGE_BYTES", regroup.SLICE_BYTES)
        if os.path.getsize(path) <= range_bytes or parse.is_gzip(path):
            return [shard]
        return [{**shard, "range": list(byte_range)} for byte_range in parse.line_ranges(path, range_bytes)]

    def _inputs(self, dl_manager) -> list[tuple[str, str]]:
        """(name, path) of every input shard; a name is the path relative to ``data_dir``."""
        data_dir = self.config.data_dir
        if data_dir is None:
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
            return [
                (url.split(f"{DEFAULT_REPO}/", 1)[1], path) for url, path in zip(urls, paths, strict=True)
            ]
        if "://" in data_dir:
            return self._remote_inputs(data_dir, dl_manager)
        if os.path.isfile(data_dir):
            return [(os.path.basename(data_dir), data_dir)]
        if not os.path.isdir(data_dir):
            raise FileNotFoundError(f"--data-dir {data_dir} is neither a folder nor a file")
        found = local_shard_paths(data_dir)
        if not found:
            raise FileNotFoundError(f"no MNBVC *.jsonl or *.jsonl.gz shard under {data_dir}")
        return [(os.path.relpath(path, data_dir).replace(os.sep, "/"), path) for path in found]

    def _remote_inputs(self, url: str, dl_manager) -> list[tuple[str, str]]:
        """Shards under an fsspec URL (``hf://datasets/...``, ``s3://...``): streamed, or downloaded first."""
        import fsspec

        fs, root = fsspec.core.url_to_fs(url)
        root = root.rstrip("/")
        found = [root] if fs.isfile(root) else sorted(fs.glob(f"{root}/**"))
        found = [path for path in found if path.endswith(SUFFIXES)]
        if not found:
            raise FileNotFoundError(f"no MNBVC *.jsonl or *.jsonl.gz shard under {url}")
        names = [os.path.basename(path) if path == root else path[len(root) + 1 :] for path in found]
        paths = dl_manager.download([fs.unstrip_protocol(path) for path in found])
        return list(zip(names, paths, strict=True))

    def _format_of(self, name: str, path: str, open_path) -> str | None:
        """The file's format; None for a file left out (under ``--on-bad-record skip``: unreadable, empty)."""
        forced = getattr(self.config, "source_format", None)
        if forced:
            return parse.normalize_format(forced)
        lines = parse.open_lines(partial(open_path, path), name)
        try:
            rows = parse.iter_rows(lines, name, self.reject)
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

    def _download_and_prepare(self, dl_manager, verification_mode, **prepare_split_kwargs):
        """As ``datasets``', noting ``num_proc`` first: the partition pass (in ``shards``) uses as many
        processes as the build's workers."""
        self._partition_processes = prepare_split_kwargs.get("num_proc") or 1
        return super()._download_and_prepare(dl_manager, verification_mode, **prepare_split_kwargs)

    def _partition(self, files: list[tuple[str, str]]) -> list[dict[str, Any]]:
        """One shard per slice of each partition (``regroup``), partitions written by ``num_proc``
        processes."""
        if not files:
            return []
        sizes = [regroup.uncompressed_size(path) for _, path in files]
        count = regroup.partition_count(sum(sizes), getattr(self, "PARTITION_BYTES", regroup.PARTITION_BYTES))
        folder = tempfile.mkdtemp(prefix="convhub-mnbvc-partitions-", dir=os.environ.get("CONVHUB_TMPDIR"))
        weakref.finalize(self, shutil.rmtree, folder, True)
        try:
            partitions = regroup.write_partitions(
                files,
                folder,
                count,
                subsets=self.config.subsets,
                reject=self.reject,
                processes=getattr(self, "_partition_processes", 1),
                sizes=sizes,
            )
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        names = [name for name, _ in files]
        slice_bytes = getattr(self, "SLICE_BYTES", regroup.SLICE_BYTES)
        shards = []
        for pieces in partitions:
            slices = regroup.slice_count(sum(source_bytes for *_, source_bytes in pieces), slice_bytes)
            shards += [
                {"kind": "partition", "pieces": pieces, "files": names, "part": (number, slices)}
                for number in range(slices)
            ]
        return shards

    # -- one shard → canonical records ----------------------------------------------------------

    def parse_shard(self, shard: dict[str, Any], notes: Notes):
        subsets = self.config.subsets
        if shard["kind"] == "partition":
            pieces, part = shard["pieces"], tuple(shard["part"])
            return regroup.read_partition(pieces, shard["files"], notes, subsets, self.reject, part)
        if shard["kind"] == "stream":
            open_path = partial(_open_remote, download_config=getattr(self, "_download_config", None))
        elif shard["kind"] == "url":
            open_path = open_url
        else:
            open_path = parse.open_local
        if "range" in shard:
            lines = parse.range_lines(shard["path"], shard["name"], *shard["range"])
        else:
            lines = parse.open_lines(partial(open_path, shard["path"]), shard["name"])
        rows = parse.iter_rows(lines, shard["name"], self.reject)
        parser = {
            parse.QA: parse.qa_records,
            parse.FORUM: parse.forum_records,
            parse.MULTITURN: parse.multiturn_runs,
        }[shard["format"]]
        return parser(rows, shard["name"], notes, subsets, self.reject)

    def iter_records(self, notes: Notes):
        """As the base class, then the partition files are deleted at once (not at garbage collection)."""
        dl_manager = datasets.DownloadManager(dataset_name=self.SOURCE, data_dir=self.config.data_dir)
        for split, shards in self.shards(dl_manager).items():
            try:
                for shard in shards:
                    for record in self.records_of(shard, notes):
                        yield split, record
            finally:
                for shard in shards:
                    for path in (path for piece in shard.get("pieces", ()) for path in piece[:2]):
                        if os.path.exists(path):
                            os.remove(path)
