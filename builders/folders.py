"""A build folder is a local path or a URL (``hdfs://``, ``s3a://``, any fsspec URL): where Spark writes.

A URL becomes a ``UPath`` (universal_pathlib: pathlib's API over fsspec), so the build code that joins, lists,
creates and removes paths reads the same for both. The few things pathlib's API does not say for a remote file
system live here: reading Parquet through the folder's file system, moving files and folders (a rename where the
file system has one, as HDFS and a local disk do; a copy and a delete on an object store), and removing a tree.

A path given as a URL stays a URL (``file://`` too), so the code for remote folders runs where a test can see it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from upath import UPath


def folder_at(value: str | os.PathLike) -> Path | UPath:
    """``value`` as a path: a ``UPath`` for a URL (``scheme://...``), else a local ``Path``."""
    if isinstance(value, UPath):
        return value
    text = os.fspath(value) if not isinstance(value, str) else value
    return UPath(text) if "://" in text else Path(text)


def is_url(path: object) -> bool:
    """Whether ``path`` was given as a URL (``folder_at`` made it a ``UPath``)."""
    return isinstance(path, UPath)


def text_of(path: str | os.PathLike) -> str:
    """The path as a string any fsspec caller opens: the URL for a remote path, the local path otherwise."""
    return str(path) if is_url(path) else os.fspath(path)


def parquet_file(path: str | os.PathLike, **options) -> pq.ParquetFile:
    """``pq.ParquetFile`` of a local or remote file (read through the folder's own file system)."""
    path = folder_at(path)
    if is_url(path):
        return pq.ParquetFile(path.path, filesystem=path.fs, **options)
    return pq.ParquetFile(path, **options)


def read_parquet(path: str | os.PathLike, columns: list[str] | None = None) -> pa.Table:
    path = folder_at(path)
    if is_url(path):
        return pq.read_table(path.path, columns=columns, filesystem=path.fs)
    return pq.read_table(path, columns=columns)


def move(source: str | os.PathLike, target: Path | UPath) -> None:
    """Move a file or folder to ``target`` (which must not exist). Local to a URL is an upload, then a delete."""
    source = folder_at(source)
    if not is_url(target):
        shutil.move(source, target)
    elif is_url(source):
        target.fs.mv(source.path, target.path, recursive=source.is_dir())
    else:
        target.fs.put(os.fspath(source), target.path, recursive=source.is_dir())
        remove_tree(source) if source.is_dir() else source.unlink()


def remove_tree(path: Path | UPath) -> None:
    """Remove a folder and everything in it; nothing when it is not there."""
    if is_url(path):
        if path.exists():
            path.fs.rm(path.path, recursive=True)
    else:
        shutil.rmtree(path, ignore_errors=True)


def write_text(path: Path | UPath, text: str) -> None:
    """Write ``text`` as UTF-8, its newlines as they are (a card's bytes do not depend on the system)."""
    with path.open("wb") as handle:
        handle.write(text.encode("utf-8"))
