"""The builder of a source whose input is JSON Lines files (``*.jsonl``, ``*.jsonl.gz``), in one format or several:
the layer that lists the files, tells each one's format, shards them and reads them, so that a source
declares what it is (``NAME_IN_ERRORS``, ``FILE_FORMATS``, ``DEFAULT_REPO``) and gives pure functions of rows.

Inputs: any number of files under ``--data-dir`` (searched recursively; a local folder or file, or an fsspec URL),
or by default the files matching ``DEFAULT_PATTERN`` in the Hugging Face dataset ``DEFAULT_REPO``. Each file's
format is detected from its first rows (``Formats.detect``), or given with the config's ``source_format``.

Shards: a file of a row format is one shard, read by the source's ``format_records``; when it is plain JSON Lines
bigger than ``RANGE_BYTES``, one shard per line-aligned byte range of it (rows, order and line numbers as one), so
workers get even shares. The files of a ``GROUPED_FORMATS`` format (conversations spread over rows and files) are
one ``group_shard``: the engine keys their rows with the source's ``key_row`` and regroups them
(``convhub.engine.grouping.group_by_key``). When streaming (``as_streaming_dataset``), every file is read once from its URL by
``format_records``, the grouped formats' too.

MNBVC is its one user, so it lives here, with ``formats`` (what tells a file's format) and the cutting of a plain
file into line-aligned byte ranges (``line_ranges``), not in the engine; a second source of several JSON Lines
formats would move them back to ``convhub/engine/``.
"""

from __future__ import annotations

import logging
import mmap
import os
from collections.abc import Iterable, Iterator
from functools import partial
from typing import Any, BinaryIO, ClassVar, cast

from datasets.download.streaming_download_manager import StreamingDownloadManager
from datasets.utils.file_utils import xopen

from convhub.builder import ConversationBuilder, ConvHubConfig, group_shard
from convhub.builders.mnbvc.formats import Formats
from convhub.engine.grouping import group_by_key, local_groupby
from convhub.engine.inputs.listing import find_files
from convhub.engine.readers import json_lines
from convhub.engine.runners.input_shards import Shard, group_of, own_shard
from convhub.errors import Notes, SourceError
from convhub.storage.folders import open_file

#: What ``format_records`` gets of each line that is a JSON object: ``json_lines.read_objects``'s
#: (number, offset, line, row).
Objects = Iterable[tuple[int, int, bytes, dict[str, Any]]]


class JsonLinesBuilder(ConversationBuilder):
    """Shards and reading of JSON Lines files; a source sets the class attributes and the row hooks."""

    config: ConvHubConfig  # what datasets made of BUILDER_CONFIG_CLASS, typed as such

    #: How errors name the source ("MNBVC reads one JSON object per line").
    NAME_IN_ERRORS: ClassVar[str]
    FILE_FORMATS: ClassVar[Formats]
    #: Formats whose conversations span rows anywhere in the files: regrouped (``key_row``, ``grouped_records``).
    GROUPED_FORMATS: ClassVar[frozenset[str]] = frozenset()
    DEFAULT_REPO: ClassVar[str]
    DEFAULT_PATTERN: ClassVar[str]
    SPLIT: ClassVar[str] = "train"
    #: A plain file of a row format bigger than this is read as line-aligned byte ranges, one shard each.
    RANGE_BYTES: ClassVar[int] = local_groupby.SLICE_BYTES

    # -- hooks a source implements -------------------------------------------------------------------

    def default_files(self) -> list[str]:
        """URLs of the files a build without ``--data-dir`` reads: those of the Hub dataset ``DEFAULT_REPO`` that
        match ``DEFAULT_PATTERN`` (needs the network)."""
        from huggingface_hub import HfFileSystem

        found = HfFileSystem().glob(f"datasets/{self.DEFAULT_REPO}/{self.DEFAULT_PATTERN}")
        return [f"hf://{path}" for path in sorted(found)]

    def format_records(self, kind: str, objects: Objects, name: str, notes: Notes):
        """Canonical records of the rows of file ``name`` (:data:`Objects`), of format ``kind``."""
        raise NotImplementedError

    def key_row(self, name: str, number: int, row: dict[str, Any], raw: bytes) -> group_by_key.Keyed | None:
        """(group, order, ``group_by_key.payload``) of a row of a grouped format; None: not wanted."""
        raise NotImplementedError(f"{self.SOURCE} has no grouped format")

    # -- where the shards are ----------------------------------------------------------------------

    def shards(self, dl_manager) -> dict[str, list[Shard]]:
        """Streamed: every file read once, as it comes. Built: the grouped files as one group shard (an engine
        regroups their rows), then the others as row shards."""
        typed = self._typed_inputs(dl_manager)
        if isinstance(dl_manager, StreamingDownloadManager):
            return {self.SPLIT: [{"kind": "stream", "format": k, "name": n, "path": p} for n, p, k in typed]}
        return self._listed(typed, self._row_shards)

    def engine_shards(self, dl_manager) -> dict[str, list[Shard]]:
        """As ``shards``, but a URL ``--data-dir`` is read where it is, by the engine's tasks (no download)."""
        data_dir = self.config.data_dir or ""
        if "://" not in data_dir:
            return self.shards(dl_manager)
        typed = self._typed(find_files(data_dir, self.NAME_IN_ERRORS, recursive=True), open_file)
        return self._listed(typed, _url_shards)

    def _listed(self, typed, row_shards) -> dict[str, list[Shard]]:
        """The grouped files of ``typed`` as one group shard, then the others' ``row_shards(name, path, format)``."""
        grouped = [(name, path) for name, path, kind in typed if kind in self.GROUPED_FORMATS]
        rows: list[Shard] = [
            shard
            for n, p, kind in typed
            if kind not in self.GROUPED_FORMATS
            for shard in row_shards(n, p, kind)
        ]
        if not grouped:
            return {self.SPLIT: rows}
        sizes = [uncompressed_size(path) for _, path in grouped]
        return {self.SPLIT: [group_shard(grouped, sizes, self.PARTITION_BYTES), *rows]}

    def _typed_inputs(self, dl_manager) -> list[tuple[str, str, str]]:
        """(name, path, format) of every input file the build reads."""
        self._download_config = getattr(dl_manager, "download_config", None)
        if isinstance(dl_manager, StreamingDownloadManager):
            opener = partial(open_streamed, download_config=self._download_config)
        else:
            opener = open_file
        return self._typed(self._inputs(dl_manager), opener)

    def _typed(self, inputs: list[tuple[str, str]], opener) -> list[tuple[str, str, str]]:
        typed = [(name, path, self._format_of(name, path, opener)) for name, path in inputs]
        wanted = self.FILE_FORMATS.wanted
        return [
            (name, path, kind) for name, path, kind in typed if kind and wanted(kind, self.config.subsets)
        ]

    def _row_shards(self, name: str, path: str, kind: str) -> list[dict[str, Any]]:
        """A file of a row format as shards: a plain file bigger than ``RANGE_BYTES`` as line-aligned byte ranges,
        a gzipped one whole (it cannot be entered mid-way)."""
        shard = {"kind": "rows", "format": kind, "name": name, "path": path}
        if os.path.getsize(path) <= self.RANGE_BYTES or is_gzip(path):
            return [{**shard, "bytes": uncompressed_size(path)}]
        ranges = line_ranges(path, self.RANGE_BYTES)
        return [{**shard, "range": list(byte_range)} for byte_range in ranges]

    def _inputs(self, dl_manager) -> list[tuple[str, str]]:
        """(name, path) of every input file; a name is the path relative to ``data_dir``."""
        data_dir = self.config.data_dir
        if data_dir is None:
            return self._default_inputs(dl_manager)
        found = find_files(data_dir, self.NAME_IN_ERRORS, recursive=True)
        if "://" in data_dir:  # streamed, or downloaded first
            paths = dl_manager.download([url for _, url in found])
            return [(name, path) for (name, _), path in zip(found, paths, strict=True)]
        return found

    def _default_inputs(self, dl_manager) -> list[tuple[str, str]]:
        """The files of ``default_files``, downloaded."""
        repo, pattern = self.DEFAULT_REPO, self.DEFAULT_PATTERN
        try:
            urls = self.default_files()
        except Exception as error:  # any network or Hub failure: the message says what to do
            raise FileNotFoundError(
                f"could not list {self.NAME_IN_ERRORS}'s {pattern} files in the Hugging Face dataset {repo} "
                f"({type(error).__name__}: {error}); download them yourself and pass --data-dir DIR"
            ) from error
        if not urls:
            raise FileNotFoundError(f"no {pattern} file found in {repo}; pass --data-dir DIR with its files")
        paths = dl_manager.download(urls)
        return [(url.split(f"{repo}/", 1)[1], path) for url, path in zip(urls, paths, strict=True)]

    def _format_of(self, name: str, path: str, open_path) -> str | None:
        """The file's format; None for a file left out (under ``--on-bad-record skip``: unreadable, empty)."""
        forced = self.config.source_format
        if forced:
            return self.FILE_FORMATS.normalize(forced)
        objects = json_lines.read_objects(path, self.NAME_IN_ERRORS, self.reject, name=name, opener=open_path)
        try:
            rows = ((number, row) for number, _, _, row in objects)
            kind = self.FILE_FORMATS.detect(rows, name, tolerant=self.config.on_bad_record == "skip")
            if kind is None:
                raise SourceError(
                    name,
                    None,
                    None,
                    f"no row: the file is empty ({self.NAME_IN_ERRORS} files are JSON lines)",
                )
            return kind
        except SourceError as error:
            self.reject(error, None, scope="file")
            return None
        finally:
            objects.close()

    # -- one shard → canonical records ----------------------------------------------------------

    def parse_shard(self, shard: Shard, notes: Notes) -> Iterator[dict[str, Any]]:
        shard = own_shard(shard)
        opener = open_file
        if shard["kind"] == "stream":
            opener = partial(open_streamed, download_config=getattr(self, "_download_config", None))
        objects = json_lines.read_objects(
            shard["path"],
            self.NAME_IN_ERRORS,
            self.reject,
            None,
            shard["name"],
            opener=opener,
            span=shard.get("range"),
        )
        return self.format_records(shard["format"], objects, shard["name"], notes)

    def keyed_rows(self, shard: Shard, file_index: int) -> Iterator[group_by_key.KeyedRow]:
        """The rows of a grouped file keyed by ``key_row``, for the engine's group-by."""
        name, path = group_of(shard).files[file_index]
        objects = json_lines.read_objects(path, self.NAME_IN_ERRORS, self.reject, name=name)
        return group_by_key.keyed_file_rows(objects, file_index, partial(self.key_row, name), self.reject)


def open_streamed(path: str, download_config=None) -> BinaryIO:
    """A file ``datasets`` streams (``as_streaming_dataset``): its ``xopen`` reads URLs and fsspec paths."""
    return cast(BinaryIO, xopen(path, "rb", download_config=download_config))  # ("rb": binary, typed any IO)


def is_gzip(path: str) -> bool:
    """Gzip by its first bytes, as ``json_lines.decompressed`` tells."""
    with open(path, "rb") as file:
        return file.read(2) == json_lines.GZIP_MAGIC


def uncompressed_size(path: str, opener: json_lines.Opener = open_file) -> int:
    """A file's size; for gzip, the size its trailer records (modulo 4 GiB, so at least the file's)."""
    with opener(path) as handle:
        head = handle.read(2)
        size = handle.seek(0, os.SEEK_END)
        if size < 18 or head != json_lines.GZIP_MAGIC:
            return size
        handle.seek(-4, os.SEEK_END)
        return max(size, int.from_bytes(handle.read(4), "little"))


def line_ranges(path: str, range_bytes: int) -> list[json_lines.Span]:
    """Line-aligned byte ranges of about ``range_bytes`` each that cover a plain (not gzipped) file, so that
    several workers read one big file.

    Each boundary is the byte after the first LF at or after an even cut, so a range never splits a line (a cut
    inside a line moves to its end); the line numbers count LFs, as ``json_lines.iter_lines`` does.
    """
    size = os.path.getsize(path)
    count = -(-size // range_bytes) if range_bytes > 0 else 1
    if count <= 1:
        return [(0, size, 1)]
    ranges, start, first_line = [], 0, 1
    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        for cut in (size * index // count for index in range(1, count)):
            if cut <= start:
                continue
            newline = mapped.find(b"\n", cut - 1)
            if newline < 0 or newline + 1 >= size:
                break
            end = newline + 1
            ranges.append((start, end, first_line))
            first_line += mapped[start:end].count(b"\n")
            start = end
    ranges.append((start, size, first_line))
    return ranges


def _url_shards(name: str, url: str, kind: str) -> list[dict[str, Any]]:
    """A file of a row format an engine's task reads at its URL: one shard."""
    return [{"kind": "url", "format": kind, "name": name, "path": url}]


class LineWarnings:
    """Logs what rows of one file hold that the build keeps raw but a user should hear of (``what``, e.g.
    unreadable JSON strings in a field), each with the file, line and field, up to ``limit`` per file; past it,
    one line says the rest are counted in the normalizations, so that a bad file cannot flood the log."""

    def __init__(self, path: str, logger: logging.Logger, limit: int, what: str):
        self.path, self.logger, self.limit, self.what = path, logger, limit, what
        self.count = 0

    def __call__(self, number: int, where: str, problem: str) -> None:
        self.count += 1
        if self.count <= self.limit:
            self.logger.warning("%s, line %d, %s: %s (raw string kept)", self.path, number, where, problem)
        elif self.count == self.limit + 1:
            self.logger.warning("%s: more %s; counted in the normalizations", self.path, self.what)


def rebuilt_row(keys: list[str], kept: dict[str, Any], texts: dict[str, Any]) -> dict[str, Any]:
    """A source row again, for an export: its ``keys`` in their order, each value from ``kept`` (the row as a
    record keeps it, its text fields taken out) or else from ``texts`` (the fields the record holds as turns)."""
    return {key: kept[key] if key in kept else texts[key] for key in keys if key in kept or key in texts}
