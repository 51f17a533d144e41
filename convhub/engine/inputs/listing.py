"""Which files of ``--data-dir`` a source reads, for every source: a local folder (its subfolders too where the
source says so), one file, or an fsspec URL, each file once, in path order; the files of a Hugging Face dataset;
and the files a ``--subset`` chooses where each file is a subset named by its stem.

A source says which names it reads with a :class:`FileKind` (JSON Lines, JSON lists, or JSON files that may have
no extension, as the Hub's ``longmemeval_s`` has); the listing, its errors and the choice by stem are the same for
all of them."""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Iterable
from dataclasses import dataclass

from convhub.errors import SourceError
from convhub.storage.folders import url_files


@dataclass(frozen=True)
class FileKind:
    """The files a source reads: names ending in one of ``suffixes``, or with no extension at all where
    ``extensionless``; ``shown`` is how an error names them. Hidden files are never read."""

    suffixes: tuple[str, ...]
    shown: str
    extensionless: bool = False

    def accepts(self, name: str) -> bool:
        base = posixpath.basename(name)
        return not base.startswith(".") and (
            base.endswith(self.suffixes) or (self.extensionless and "." not in base)
        )

    def stem(self, name: str) -> str:
        """A file's subset: its name without its folder and its kind's suffix (the longest that fits); a name
        without one loses its last suffix, unless files of the kind may have none (then a dot is part of the
        name)."""
        base = posixpath.basename(name)
        ends = sorted((end for end in self.suffixes if base.endswith(end)), key=len, reverse=True)
        if ends:
            return base[: -len(ends[0])]
        return base if self.extensionless else posixpath.splitext(base)[0]


JSON_LINES = FileKind((".jsonl", ".jsonl.gz"), "*.jsonl or *.jsonl.gz")
#: JSON files (LoCoMo's lists of samples).
JSON = FileKind((".json",), "*.json")
#: JSON files, or files with no extension (LongMemEval's, which the Hub serves without one).
JSON_OR_EXTENSIONLESS = FileKind((".json",), "*.json, or no extension", extensionless=True)


def find_files(
    data_dir: str, source: str, recursive: bool = False, kind: FileKind = JSON_LINES
) -> list[tuple[str, str]]:
    """(name, local path or URL) of every file of ``kind`` in ``data_dir`` (and its subfolders when
    ``recursive``), in path order, each named by its path relative to ``data_dir``; or of that one file, named
    by its base name. Finding none is a FileNotFoundError naming what ``source`` reads."""
    if "://" in data_dir:
        files = [(name, url) for name, url in url_files(data_dir, ("",), recursive) if kind.accepts(name)]
    elif os.path.isdir(data_dir):
        found = local_paths(data_dir, recursive, kind)
        files = [(os.path.relpath(path, data_dir).replace(os.sep, "/"), path) for path in found]
    elif os.path.lexists(data_dir):
        files = [(os.path.basename(data_dir), regular_file(data_dir))]
    else:
        raise FileNotFoundError(
            f"no {source} {kind.shown} file in {data_dir}: it is neither a folder nor a file"
        )
    if not files:
        raise FileNotFoundError(f"no {source} {kind.shown} file in {data_dir}")
    return files


def local_paths(folder: str, recursive: bool = True, kind: FileKind = JSON_LINES) -> list[str]:
    """Every file of ``kind`` in ``folder`` (and below, when ``recursive``), each file once, in path order; hidden
    files and folders are left out.

    Symbolic links to folders are followed, but a folder reached again (a link loop) is not entered twice and a
    file reached under two names is read under the first: a recursive glob would read a loop's files over and
    over, or never finish. A link to a regular file is read wherever the file is (a user who links data into the
    folder means it); anything that is no regular file (``regular_file``) is refused.
    """
    candidates = []
    entered = set()
    for root, folders, names in os.walk(folder, followlinks=True):
        status = os.stat(root)
        if (status.st_dev, status.st_ino) in entered:
            folders[:] = []
            continue
        entered.add((status.st_dev, status.st_ino))
        folders[:] = [name for name in folders if not name.startswith(".")] if recursive else []
        candidates += [os.path.join(root, name) for name in names if kind.accepts(name)]
    found, read = [], set()
    for path in sorted(candidates):
        status = os.stat(regular_file(path))
        if (status.st_dev, status.st_ino) not in read:
            read.add((status.st_dev, status.st_ino))
            found.append(path)
    return found


def regular_file(path: str) -> str:
    """``path``, when it is a regular file or a symbolic link to one; else a SourceError naming it. A FIFO blocks
    the build that opens it for ever, a device such as ``/dev/zero`` (or a link to it) fills the memory, and a
    link to nothing is a file the user meant to give: each is refused in one line, before any work, rather than
    skipped (a skipped file's records would be missing from the build without a word)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        if os.path.islink(path) and isinstance(error, FileNotFoundError):
            problem = f"a symbolic link to {os.readlink(path)}, which does not exist"
        else:
            problem = f"cannot be read: {error.strerror}"
        raise SourceError(path, None, None, problem) from None
    if not stat.S_ISREG(mode):
        kinds = {stat.S_ISFIFO: "a FIFO", stat.S_ISCHR: "a device", stat.S_ISBLK: "a device"}
        what = next((name for test, name in kinds.items() if test(mode)), "a socket or other special file")
        raise SourceError(
            path,
            None,
            None,
            f"not a regular file ({what}{_through_link(path)}): convhub reads regular files only; remove it "
            "from the data folder",
        )
    return path


def _through_link(path: str) -> str:
    return f", through a symbolic link to {os.readlink(path)}" if os.path.islink(path) else ""


def hub_files(repo: str, pattern: str) -> list[str]:
    """``hf://`` paths of the files of the Hub dataset ``repo`` that match ``pattern`` (needs the network)."""
    from huggingface_hub import HfFileSystem

    found = HfFileSystem().glob(f"datasets/{repo}/{pattern}")
    return [f"hf://{path}" for path in sorted(found)]


def files_by_stem(
    files: list[tuple[str, str]], wanted: Iterable[str] | None, source: str, kind: FileKind = JSON_LINES
) -> list[tuple[str, str]]:
    """The (name, path) of ``files`` whose stems (``kind.stem``: one subset per file) are ``wanted`` (all when
    None). Two files of one stem are a SourceError; a wanted stem without a file a KeyError naming the stems."""
    by_stem: dict[str, str] = {}
    for name, path in files:
        first = by_stem.setdefault(kind.stem(name), path)
        if first != path:
            raise SourceError(path, None, None, f"same subset {kind.stem(name)!r} as {first}; rename one")
    unknown = sorted(set(wanted or ()) - set(by_stem))
    if unknown:
        raise KeyError(f"{source} has no subset {', '.join(unknown)}; subsets: {', '.join(by_stem)}")
    return [(name, path) for name, path in files if kind.stem(name) in (wanted or by_stem)]
