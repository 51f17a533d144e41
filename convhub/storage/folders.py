"""A build folder is a local path or a URL (``hdfs://``, ``s3a://``, any fsspec URL): where Spark writes.

A URL becomes a ``UPath`` (universal_pathlib: pathlib's API over fsspec), so the build code that joins, lists,
creates and removes paths reads the same for both. The few things pathlib's API does not say for a remote file
system live here: reading Parquet through the folder's file system, moving files and folders (a rename where the
file system has one, as HDFS and a local disk do; a copy and a delete on an object store), and removing a tree.

A path given as a URL stays a URL (``file://`` too), so the code for remote folders runs where a test can see it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TypeAlias, cast
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.parquet as pq
from upath import UPath

if TYPE_CHECKING:  # TypeIs narrows both ways (``not is_url(p)`` is a ``Path``); only the checker needs it
    import fsspec
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCard
    from typing_extensions import TypeIs

#: A path as callers give it: a string (a local path or a URL), a local path, or a ``UPath`` made of a URL.
PathArg: TypeAlias = "str | os.PathLike[str] | UPath"
#: A path after ``folder_at``: a local ``Path`` or a ``UPath`` for a URL.
Folder: TypeAlias = "Path | UPath"


def folder_at(value: PathArg) -> Folder:
    """``value`` as a path: a ``UPath`` for a URL (``scheme://...``, and ``file:/abs`` or ``file://localhost/abs``,
    other spellings of ``file:///abs``), else a local ``Path``."""
    if isinstance(value, UPath):
        return value
    text = os.fspath(value) if not isinstance(value, str) else value
    if text.startswith(("file://localhost/", "file:/")) and not text.startswith("file:///"):
        text = f"file://{file_url_path(text)}"
    return UPath(text) if "://" in text else Path(text)


def file_url_path(text: str) -> str:
    """The absolute local path a ``file:`` URL names (``file:/abs``, ``file:///abs``, ``file://localhost/abs``):
    ``--output file:/abs`` is that folder, not a folder ``file:`` under the working folder; an argparse error for
    one on another host."""
    from urllib.request import url2pathname

    parts = urlsplit(text)
    if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
        raise argparse.ArgumentTypeError(
            f"{text}: a file: URL names an absolute local path (file:/abs or file:///abs); give the folder's path"
        )
    return url2pathname(parts.path)


def local_output(value: str) -> Path:
    """An argparse type for an ``--output`` that must be local (``mix``, ``export``): a ``file:`` URL is its
    local path, another URL is refused in one line, not taken as a relative folder named ``s3a:``."""
    if value.startswith("file:/"):
        return Path(file_url_path(value))
    if "://" in value:
        raise argparse.ArgumentTypeError(
            f"{value} is a URL: give a local folder (only convhub build writes to a URL; copy the folder after)"
        )
    return Path(value)


def is_url(path: object) -> TypeIs[UPath]:
    """Whether ``path`` was given as a URL (``folder_at`` made it a ``UPath``)."""
    return isinstance(path, UPath)


def text_of(path: PathArg) -> str:
    """The path as a string any fsspec caller opens (Spark's tasks, ``datasets``' writer): the URL for a remote
    path, the local path otherwise. A namenode's host and port, which a ``UPath`` keeps in its storage options
    and leaves out of ``str`` (``hdfs:///x``), go back into the URL: without them it would name the default one."""
    if not is_url(path):
        return os.fspath(path)
    text, options, scheme = str(path), path.storage_options, f"{path.protocol}://"
    if options.get("host") and text.startswith(scheme + "/"):
        netloc = f"{options['host']}:{options['port']}" if options.get("port") else options["host"]
        text = scheme + netloc + text[len(scheme) :]
    return text


def parquet_file(path: PathArg, **options) -> pq.ParquetFile:
    """``pq.ParquetFile`` of a local or remote file (read through the folder's own file system)."""
    file = folder_at(path)
    if is_url(file):
        return pq.ParquetFile(file.path, filesystem=file.fs, **options)
    return pq.ParquetFile(file, **options)


def read_parquet(path: PathArg, columns: list[str] | None = None) -> pa.Table:
    file = folder_at(path)
    if is_url(file):
        return pq.read_table(file.path, columns=columns, filesystem=file.fs)
    return pq.read_table(file, columns=columns)


def move(source: PathArg, target: Folder) -> None:
    """Move a file or folder to ``target`` (which must not exist). Local to a URL is an upload, then a delete."""
    moved = folder_at(source)
    if not is_url(target):
        if is_url(moved):  # a URL to the local disk: a download, then a delete
            moved.fs.get(moved.path, os.fspath(target), recursive=moved.is_dir())
            remove_tree(moved)
        else:
            shutil.move(moved, target)
    elif is_url(moved):
        target.fs.mv(moved.path, target.path, recursive=moved.is_dir())
    else:
        target.fs.put(os.fspath(moved), target.path, recursive=moved.is_dir())
        if moved.is_dir():
            remove_tree(moved)
        else:
            moved.unlink()


#: fsspec's names of object stores, where a "move" copies every object and deletes the old ones (no rename).
OBJECT_STORES = frozenset({"s3", "s3a", "gs", "gcs", "abfs", "abfss", "az", "adl", "oss"})


def relative_name(path: Folder, folder: Folder) -> str:
    """``path``'s name under ``folder``, which holds it, parts joined by ``/`` (``relative_to``, which a local
    ``Path`` and a ``UPath`` type apart)."""
    return "/".join(path.parts[len(folder.parts) :])


def moves_by_copying(path: Folder) -> bool:
    """Whether moving ``path`` copies its every byte: a folder on an object store (S3 and its kin)."""
    return is_url(path) and path.protocol in OBJECT_STORES


def remove_tree(path: Folder) -> None:
    """Remove a folder and everything in it; nothing when it is not there."""
    if is_url(path):
        if path.exists():
            path.fs.rm(path.path, recursive=True)
    else:
        shutil.rmtree(path, ignore_errors=True)


def read_card(path: Folder) -> DatasetCard:
    """A folder's dataset card (the folder local or at a URL), read as ``DatasetCard.load`` reads it: newlines kept."""
    from huggingface_hub import DatasetCard

    return DatasetCard(path.read_bytes().decode("utf-8"))


def configs_of_card(card: DatasetCard) -> MetadataConfigs:
    """The configs a card's YAML declares (their ``data_files``), as ``datasets`` reads them."""
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCardData

    # A DatasetCard makes its data a DatasetCardData (its card_data_class); RepoCard annotates it as the base class.
    return MetadataConfigs.from_dataset_card_data(cast(DatasetCardData, card.data))


def write_text(path: Folder, text: str) -> None:
    """Write ``text`` as UTF-8, its newlines as they are (a card's bytes do not depend on the system)."""
    with path.open("wb") as handle:
        handle.write(text.encode("utf-8"))


# -- source files at a URL (a --data-dir): listed by the driver, opened where a task runs, never downloaded ----


def fsspec_url(url: str) -> str:
    """``s3a://`` (Hadoop's name for S3) is fsspec's ``s3://``; ``hdfs://`` needs pyarrow's libhdfs."""
    return "s3://" + url[len("s3a://") :] if url.startswith("s3a://") else url


def file_system(path: str) -> tuple[fsspec.AbstractFileSystem, str]:
    """The fsspec file system of a local path or a URL, and the path in it. A local path is the local file
    system's as it is: fsspec would read a ``::`` in it as a chain of URLs (``/data/a::b`` as ``/data/a``)."""
    import fsspec
    from fsspec.implementations.local import LocalFileSystem

    return fsspec.core.url_to_fs(fsspec_url(path)) if "://" in path else (LocalFileSystem(), path)


@dataclass(frozen=True)
class Location:
    """What a URL names once fsspec resolves it, to tell whether two URLs name one folder: ``memory://d/x`` and
    ``memory:///d/x`` do, as ``s3://b/x`` and ``s3:///b/x``, ``s3a://`` and ``s3://``; a chained URL
    (``simplecache::file:///x``) names the folder of the file system it ends on."""

    #: The file system's class (``s3`` and ``s3a`` share one), or the scheme where its package is not installed.
    kind: object
    #: The host a URL names apart from its path (a namenode); None where the file system has none in the URL.
    host: str | None
    #: The folder's path as the file system opens it (its ``_strip_protocol`` form), as a tuple of names.
    parts: tuple[str, ...]
    #: Whether it is on the local disk (``file://``, ``local://``): ``path`` is then its absolute local path.
    local: bool
    path: str

    def holds(self, other: Location) -> bool:
        """Whether this folder is ``other`` or holds it. A host given on one side only (``hdfs:///x``, the
        default namenode) may be any: which one is the default, only the cluster's configuration says."""
        if self.kind != other.kind or (self.host and other.host and self.host != other.host):
            return False
        return other.parts[: len(self.parts)] == self.parts


def location(url: str) -> Location:
    """Where ``url`` points (``Location``): resolved by the file system class fsspec registers for it, without
    connecting to it."""
    import fsspec

    link = fsspec_url(url.split("::")[-1])  # a chain's last link is the file system it ends on
    protocol, _ = fsspec.core.split_protocol(link)
    try:
        kind = fsspec.get_filesystem_class(protocol)
        path = kind._strip_protocol(link)
        host = kind._get_kwargs_from_urls(link).get("host")
        local = "file" in ((kind.protocol,) if isinstance(kind.protocol, str) else kind.protocol)
    except (
        ImportError,
        ValueError,
    ):  # a file system whose package is not installed: its bucket is in the path
        parts = urlsplit(link)
        kind, host, path, local = parts.scheme, None, parts.netloc + parts.path, False
    return Location(kind, host or None, tuple(name for name in path.split("/") if name), local, path)


def url_files(url: str, recursive: bool = False) -> list[tuple[str, str]]:
    """(name, URL) of every file under ``url`` (or of that one file): the name relative to ``url`` when
    ``recursive``, else the files directly in it. An empty list when none."""
    fs, root = file_system(url)
    root = root.rstrip("/")
    if fs.isfile(root):
        found = [root]
    elif recursive:
        found = sorted(fs.find(root))
    else:
        found = sorted(entry["name"] for entry in fs.ls(root, detail=True) if entry["type"] == "file")
    prefix = url.rstrip("/")
    names = [os.path.basename(path) if path == root else path[len(root) + 1 :] for path in found]
    return [(name, prefix if found == [root] else f"{prefix}/{name}") for name in names]


def open_url(url: str, compression: str | None = None) -> BinaryIO:
    """A file under a URL, opened with fsspec where a task reads it (no download; seeks are range reads).
    ``compression="gzip"``: its decompressed bytes (closing it closes the file under it too)."""
    import fsspec

    fs, path = file_system(url)
    # (opened "rb", a binary file object, which fsspec annotates as any IO)
    return cast(BinaryIO, fsspec.core.OpenFile(fs, path, "rb", compression=compression).open())


#: Read buffer of a local source file: ``readline`` would gather a long line (hundreds of KB) 8 KB at a time.
READ_BUFFER_BYTES = 2**20


def open_file(path: str | os.PathLike[str]) -> BinaryIO:
    """A source file's bytes: a local path opened here, a URL through fsspec (``open_url``: no download, seeks
    are range reads)."""
    text = os.fspath(path)
    return open_url(text) if "://" in text else open(text, "rb", buffering=READ_BUFFER_BYTES)


def local_copy(url: str, folder: str | os.PathLike[str]) -> str:
    """A copy of the file or folder at ``url`` in the local ``folder``, under its own name (a reader that goes by
    the name, as ``.gz`` does, reads it the same), made once per version: the URL, and the sizes and the times or
    ETags its file system reports of each file. A ``file://`` URL is its own local copy."""
    fs, path = file_system(url)
    protocols = {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)
    if protocols & {"file", "local"}:
        return path
    path = path.rstrip("/")
    info = fs.info(path)  # (a file's own: fsspec's generic find gives a lone file no size or time)
    # (find with detail=True gives path → info, which fsspec annotates as a list)
    files = cast(dict, fs.find(path, detail=True)) if info["type"] == "directory" else {path: info}
    if not files:
        raise FileNotFoundError(f"{url}: no file there")
    version = [fsspec_url(url).rstrip("/")] + [
        [name[len(path) :], stat.get("size")] + [str(stat[key]) for key in VERSION_KEYS if key in stat]
        for name, stat in sorted(files.items())
    ]
    digest = hashlib.sha256(json.dumps(version).encode("utf-8")).hexdigest()[:16]
    target = os.path.join(folder, f"convhub-{digest}", os.path.basename(path))
    if not os.path.exists(target):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        partial = f"{target}.partial-{os.getpid()}"
        try:
            for name in files:
                copied = partial + name[len(path) :]
                os.makedirs(os.path.dirname(copied), exist_ok=True)
                fs.get_file(name, copied)
            try:
                os.replace(partial, target)
            except OSError:  # another process (a task beside this one) put its copy first: keep that one
                if not os.path.exists(target):
                    raise
        finally:
            if os.path.isdir(partial):
                shutil.rmtree(partial)
            elif os.path.exists(partial):
                os.remove(partial)
    return target


#: What fsspec's file systems report that changes with a file's content (local, HDFS, S3, memory).
VERSION_KEYS = ("mtime", "ETag", "LastModified", "last_modified", "created")
