"""Which files of ``--data-dir`` (a folder, one file or an fsspec URL) a source reads, the same way for every
source: :func:`find_files` lists them, and the source's :class:`Listing` gives each its subset and split and keeps
those ``--subset`` chooses."""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

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
#: Text files (ParlAI's dialogue format, one episode a line, as Multi-Session Chat has).
TEXT = FileKind((".txt",), "*.txt")
#: Every file that is not hidden: what a source reads of a folder unless it says otherwise.
ANY_FILE = FileKind(("",), "file")


def find_files(
    data_dir: str, source: str, recursive: bool = False, kind: FileKind = JSON_LINES
) -> list[tuple[str, str]]:
    """(name, local path or URL) of every file of ``kind`` in ``data_dir`` (and its subfolders when
    ``recursive``), in path order, each named by its path relative to ``data_dir``; or of that one file, named
    by its base name. Finding none is a FileNotFoundError naming what ``source`` reads."""
    if "://" in data_dir:
        files = [(name, url) for name, url in url_files(data_dir, recursive) if kind.accepts(name)]
    elif os.path.isdir(data_dir):
        files = local_files(data_dir, recursive, kind)
    elif os.path.lexists(data_dir):
        files = [(os.path.basename(data_dir), regular_file(data_dir))]
    else:
        raise FileNotFoundError(
            f"no {source} {kind.shown} file in {data_dir}: it is neither a folder nor a file"
        )
    if not files:
        raise FileNotFoundError(f"no {source} {kind.shown} file in {data_dir}")
    return files


def local_files(folder: str, recursive: bool, kind: FileKind) -> list[tuple[str, str]]:
    """(name, path) of every file of ``kind`` in ``folder`` (and below, when ``recursive``), each file once, in path
    order, named by its path relative to ``folder`` (``/``-separated); hidden files and folders are left out.

    Symbolic links to folders are followed, but a folder reached again (a link loop) is not entered twice and a
    file reached under two names is read under the first: a recursive glob would read a loop's files over and
    over, or never finish. A link to a regular file is read wherever the file is, as a user who links data in
    means it (:func:`regular_file`).
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
            found.append((os.path.relpath(path, folder).replace(os.sep, "/"), path))
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
        link = f", through a symbolic link to {os.readlink(path)}" if os.path.islink(path) else ""
        raise SourceError(
            path,
            None,
            None,
            f"not a regular file ({what}{link}): convhub reads regular files only; remove it "
            "from the data folder",
        )
    return path


# -- a source's layout, declared ---------------------------------------------------------------------------------

#: Where a file's subset (or split) comes from: its name without its kind's suffix (``FileKind.stem``), or the
#: folder it is in, the first below ``--data-dir``.
FROM_FILE: Literal["file"] = "file"
FROM_FOLDER: Literal["folder"] = "folder"


@dataclass(frozen=True)
class SourceFile:
    """One file a build reads: its ``name`` as :func:`find_files` names it, where it is (a local path or a URL), its
    subset (None: the source has none) and its split."""

    name: str
    path: str
    subset: str | None
    split: str


@dataclass(frozen=True)
class Listing:
    """How a source's files lie in ``--data-dir``, declared in its builder (``LISTING = Listing(...)``; each
    layout by example, a file per subset, a folder per subset and a file per split, files at any depth:
    docs/adding-a-source.md, "Layouts").

    ``split`` is a split name all files share, or ``FROM_FILE``/``FROM_FOLDER``; ``split_names`` renames what a file
    or folder says (``{"valid": "validation"}``). ``--data-dir`` may also be one subset's folder (with
    ``subset=FROM_FOLDER``: its files directly in it are the subset named by the folder) or one file.

    Where a file is a whole subset or split (``FROM_FILE``), two files of the same (subset, split) are an error
    naming both, as two ``--subset`` names without a file are: nothing is read twice or silently left out.
    """

    kind: FileKind = JSON_LINES
    subset: Literal["file", "folder"] | None = FROM_FILE
    split: str = "train"
    recursive: bool = False
    split_names: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.subset == FROM_FILE and self.split == FROM_FILE:
            raise ValueError("a file's name can say its subset or its split, not both")

    def files(self, data_dir: str, source: str, subsets: Iterable[str] | None = None) -> list[SourceFile]:
        """Every file of the layout in ``data_dir``, in path order, as :meth:`chosen` gives them."""
        below = self.recursive or FROM_FOLDER in (self.subset, self.split)
        found = find_files(data_dir, source, recursive=below, kind=self.kind)
        folder = posixpath.basename(data_dir.rstrip("/").replace(os.sep, "/"))
        return self.chosen(found, folder, source, subsets)

    def chosen(
        self, found: list[tuple[str, str]], folder: str, source: str, subsets: Iterable[str] | None
    ) -> list[SourceFile]:
        """The files ``found`` (:func:`find_files`' (name, path); ``folder`` is ``--data-dir``'s name), each with
        the subset and split its name and folder say; only those of ``subsets`` when given (an unknown one is a
        KeyError naming the subsets there are)."""
        listed = [
            SourceFile(name, path, self._part(self.subset, name, folder), self._split(name, folder))
            for name, path in found
        ]
        self._check_one_file_each(listed)
        wanted = set(subsets or ())
        present = sorted({file.subset for file in listed if file.subset is not None})
        unknown = sorted(wanted - set(present))
        if unknown:
            raise KeyError(f"{source} has no subset {', '.join(unknown)}; subsets: {', '.join(present)}")
        return [file for file in listed if not wanted or file.subset in wanted]

    def _part(self, rule: str | None, name: str, folder: str) -> str | None:
        if rule == FROM_FILE:
            return self.kind.stem(name)
        if rule == FROM_FOLDER:
            return name.split("/")[0] if "/" in name else folder
        return None

    def _split(self, name: str, folder: str) -> str:
        said = self._part(self.split, name, folder)  # (None for a split name all files share)
        return self.split if said is None else dict(self.split_names).get(said, said)

    def _check_one_file_each(self, listed: list[SourceFile]) -> None:
        if FROM_FILE not in (self.subset, self.split):
            return
        first: dict[tuple[str | None, str], str] = {}
        for file in listed:
            seen = first.setdefault((file.subset, file.split), file.path)
            if seen != file.path:
                what = f"subset {file.subset!r}" if self.subset == FROM_FILE else f"split {file.split!r}"
                if self.subset is not None and self.subset != FROM_FILE:
                    what += f" of subset {file.subset!r}"
                raise SourceError(file.path, None, None, f"same {what} as {seen}; rename one")
