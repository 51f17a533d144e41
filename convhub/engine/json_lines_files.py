"""Which JSON Lines files a source reads: every ``*.jsonl`` / ``*.jsonl.gz`` of ``--data-dir`` (a local folder, its
subfolders too where the source says so, a file, or an fsspec URL), the files of a Hugging Face dataset, and the
files a ``--subset`` chooses where each file is a subset named by its stem."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import PurePosixPath

from convhub.errors import SourceError
from convhub.storage.folders import url_files

SUFFIXES = (".jsonl", ".jsonl.gz")
KINDS = "*.jsonl or *.jsonl.gz"


def find_files(data_dir: str, source: str, recursive: bool = False) -> list[tuple[str, str]]:
    """(name, local path or URL) of every JSON Lines file in ``data_dir`` (and its subfolders when
    ``recursive``), in path order, each named by its path relative to ``data_dir``; or of that one file, named
    by its base name. Finding none is a FileNotFoundError naming what ``source`` reads."""
    if "://" in data_dir:
        files = url_files(data_dir, SUFFIXES, recursive)
    elif os.path.isfile(data_dir):
        files = [(os.path.basename(data_dir), data_dir)]
    elif os.path.isdir(data_dir):
        found = local_paths(data_dir, recursive)
        files = [(os.path.relpath(path, data_dir).replace(os.sep, "/"), path) for path in found]
    else:
        raise FileNotFoundError(f"no {source} {KINDS} file in {data_dir}: it is neither a folder nor a file")
    if not files:
        raise FileNotFoundError(f"no {source} {KINDS} file in {data_dir}")
    return files


def local_paths(folder: str, recursive: bool = True) -> list[str]:
    """Every JSON Lines file in ``folder`` (and below, when ``recursive``), each file once, in path order; hidden
    files and folders are left out.

    Symbolic links to folders are followed, but a folder reached again (a link loop) is not entered twice and a
    file reached under two names is read under the first: a recursive glob would read a loop's files over and
    over, or never finish.
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
        candidates += [
            os.path.join(root, name) for name in names if name.endswith(SUFFIXES) and not name.startswith(".")
        ]
    found, read = [], set()
    for path in sorted(candidates):
        status = os.stat(path)
        if (status.st_dev, status.st_ino) not in read:
            read.add((status.st_dev, status.st_ino))
            found.append(path)
    return found


def hub_files(repo: str, pattern: str) -> list[str]:
    """``hf://`` paths of the files of the Hub dataset ``repo`` that match ``pattern`` (needs the network)."""
    from huggingface_hub import HfFileSystem

    found = HfFileSystem().glob(f"datasets/{repo}/{pattern}")
    return [f"hf://{path}" for path in sorted(found)]


def file_stem(name: str) -> str:
    """A file's name without its folder and ``.jsonl`` / ``.jsonl.gz`` (or its last suffix): its subset."""
    path = PurePosixPath(name)
    return next((path.name[: -len(end)] for end in SUFFIXES[::-1] if path.name.endswith(end)), path.stem)


def files_by_stem(
    files: list[tuple[str, str]], wanted: Iterable[str] | None, source: str
) -> list[tuple[str, str]]:
    """The (name, path) of ``files`` whose stems (:func:`file_stem`: one subset per file) are ``wanted`` (all when
    None). Two files of one stem are a SourceError; a wanted stem without a file a KeyError naming the stems."""
    by_stem: dict[str, str] = {}
    for name, path in files:
        first = by_stem.setdefault(file_stem(name), path)
        if first != path:
            raise SourceError(path, None, None, f"same subset {file_stem(name)!r} as {first}; rename one")
    unknown = sorted(set(wanted or ()) - set(by_stem))
    if unknown:
        raise KeyError(f"{source} has no subset {', '.join(unknown)}; subsets: {', '.join(by_stem)}")
    return [(name, path) for name, path in files if file_stem(name) in (wanted or by_stem)]
