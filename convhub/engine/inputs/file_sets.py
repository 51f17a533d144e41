"""A dataset's set of files given as a zip, a folder or one lone file (:class:`DataInput`), found by the
:class:`Layout` a source names in a local ``--data-dir`` or at any fsspec URL; a zip read within bounds (the
limits are docs/guarantees.md's "Hostile archives")."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import posixpath
import tempfile
import unicodedata
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any

import fsspec

from convhub.engine.inputs.listing import ANY_FILE, local_files
from convhub.engine.readers.exact_json import load_value
from convhub.errors import Reject, SourceError
from convhub.storage.folders import file_system, local_copy

#: Characters a card's ``data_files`` read as a pattern: a subset named ``x[1]`` would load ``x1``'s files.
PATTERN_CHARACTERS = frozenset("[]*?")
#: Far above what real datasets' members inflate to, far below deflate's own limit (docs/performance.md).
ZIP_MAX_RATIO = 100
ZIP_RATIO_FREE_BYTES = 8 << 20
#: What a damaged member raises while it is read.
DAMAGED_ZIP = (zipfile.BadZipFile, zlib.error, EOFError, OSError)


@dataclass(frozen=True)
class DataInput:
    """One dataset's files. ``kind`` is ``zip`` (``path`` is the archive, its members the files under ``inner``,
    e.g. ``data/``), ``folder`` (``path`` is the folder, its members every file below it that is not hidden) or
    ``file`` (``path`` is one file standing for the member named ``inner``).

    ``origin``: the URL the files are at, which errors name; they are read from a local copy, ``path`` once
    :meth:`here` made it (on the driver, and again in a task on a machine without the driver's copy): a zip is
    read by seeking, which a local file does at no cost and a URL with a request each."""

    name: str
    kind: str
    path: str
    inner: str = ""
    origin: str | None = None

    def here(self, folder: str | None = None) -> DataInput:
        """This input with a ``path`` on this machine: a copy of ``origin`` made in ``folder`` (else the system's
        temporary folder), once per version, unless ``path`` is one here already."""
        if self.origin is None or os.path.exists(self.path):
            return self
        return dataclasses.replace(self, path=local_copy(self.origin, folder or tempfile.gettempdir()))

    @property
    def shown(self) -> str:
        """The file or folder an error message names: the URL for a copy."""
        return self.origin or self.path

    def label(self, member: str) -> str:
        """The file an error message names."""
        if self.kind == "zip":
            return f"{self.shown}:{self.inner}{member}"
        return self.shown if self.kind == "file" else f"{self.shown}/{member}"

    def members(self) -> list[str]:
        """The files, relative and sorted; two that are one file once normalized are refused."""
        if self.kind == "file":
            return [self.inner]
        if self.kind == "zip":
            with open_zip(self.path, self.shown) as archive:
                names = [
                    name.removeprefix(self.inner)
                    for name in archive.namelist()
                    if name.startswith(self.inner)
                ]
            return sorted(name for name in names if name and not name.endswith("/"))
        # listed as every source's folder is (``listing.local_files``), already in path order
        names = [name for name, _ in local_files(self.path, True, ANY_FILE)]
        refuse_same_names(self.shown, names, f"files of {posixpath.basename(self.path)}/")
        return names

    def member_size(self, member: str) -> int:
        """A member's size in bytes (inflated, for a zip; 0 when absent)."""
        if self.kind == "zip":
            with open_zip(self.path, self.shown) as archive:
                sizes = {info.filename: info.file_size for info in archive.infolist()}
            return sizes.get(self.inner + member, 0)
        path = self._file(member)
        return os.path.getsize(path) if os.path.isfile(path) else 0

    @contextlib.contextmanager
    def open(self, member: str) -> Iterator[IO[bytes]]:
        """A member as a binary stream; an absent or damaged zip member raises a SourceError naming it."""
        if self.kind != "zip":
            with open(self._file(member), "rb") as stream:
                yield stream
            return
        with open_zip(self.path, self.shown) as archive:
            name = self.inner + member
            if name not in archive.namelist():
                raise SourceError(self.shown, None, None, f"{name} is not in the archive")
            try:
                with archive.open(name) as stream:
                    yield stream
            except DAMAGED_ZIP as error:
                problem = f"corrupt or truncated zip member: {error}"
                raise SourceError(f"{self.shown}:{name}", None, None, problem) from error

    def read_json(self, member: str) -> Any:
        """A member's JSON value, exactly ``json.loads``'s; invalid text is a SourceError naming the member."""
        with self.open(member) as stream:
            data = stream.read()
        return load_value(data, self.label(member), None)

    def stat_key(self, member: str) -> tuple:
        """Identifies a member as it is now (a cache key): the stat of its file, or of the zip holding it."""
        stat = os.stat(self.path if self.kind == "zip" else self._file(member))
        return (self.kind, os.path.realpath(self.path), member, stat.st_size, stat.st_mtime_ns)

    def _file(self, member: str) -> str:
        return self.path if self.kind == "file" else os.path.join(self.path, member)


@dataclass(frozen=True)
class Layout:
    """One form a dataset's files may take in its folder: ``kind`` and ``inner`` as :class:`DataInput`'s,
    ``relative`` the archive, folder or file in the dataset's folder, and ``marker`` a member whose presence
    makes a ``folder`` one (the folder alone may hold anything)."""

    kind: str
    relative: str
    inner: str = ""
    marker: str = ""


def input_in(folder: str, layouts: Iterable[Layout], fs: fsspec.AbstractFileSystem) -> DataInput | None:
    """The first of ``layouts`` present in one dataset's ``folder``, named after the folder, or None (a folder name
    holding :data:`PATTERN_CHARACTERS` is refused)."""
    name = posixpath.basename(posixpath.normpath(folder))
    for layout in layouts:
        path = posixpath.join(folder, layout.relative)
        if fs.isfile(posixpath.join(path, layout.marker) if layout.marker else path):
            break
    else:
        return None
    wildcards = sorted(PATTERN_CHARACTERS.intersection(name))
    if wildcards:
        raise SourceError(
            folder,
            None,
            None,
            f"the dataset folder name {name!r} holds {' '.join(wildcards)}, which the card's data_files "
            "read as a wildcard (its subset would load another's files): rename the folder",
        )
    return DataInput(name, layout.kind, path, layout.inner, origin=path if "://" in path else None)


def inputs_in(data_dir: str, layouts: tuple[Layout, ...], what: str) -> dict[str, DataInput]:
    """Dataset name → its input: ``data_dir`` itself when it is one dataset's folder, else each of its folders
    that holds one of ``layouts`` (sorted). ``what`` names the data in errors ("ConvLab data dir")."""
    fs, root = file_system(data_dir)  # a local folder is listed by the same calls as a URL's
    if not fs.isdir(root):
        raise FileNotFoundError(f"{what} {data_dir} is not a folder")
    itself = input_in(data_dir, layouts, fs)
    if itself is not None:
        return {itself.name: itself}
    entries = sorted(posixpath.basename(str(entry).rstrip("/")) for entry in fs.ls(root, detail=False))
    found = {}
    for entry in entries:  # (a file holds no layout's file: it is no dataset)
        candidate = input_in(posixpath.join(data_dir, entry), layouts, fs)
        if candidate is not None:
            found[entry] = candidate
    refuse_same_names(data_dir, sorted(found), "dataset folders")
    return found


def listable(inputs: Iterable[DataInput], reject: Reject) -> list[DataInput]:
    """The inputs whose files can be listed; one that cannot (a corrupt zip) goes to ``reject`` (scope ``file``)."""
    found = []
    for source in inputs:
        try:
            source.members()
            found.append(source)
        except SourceError as error:
            reject(error, None, scope="file")
    return found


# -- zips read within bounds, and names that are one file -------------------------------------------------------


def file_key(name: str) -> str:
    """The file a name means once extracted anywhere: ``./data//X.json`` and ``data/x.json`` (also as NFD,
    or on a case-insensitive file system) are one file."""
    name = unicodedata.normalize("NFC", name.replace("\\", "/")).casefold()
    return "/".join(part for part in name.split("/") if part not in ("", "."))


def refuse_same_names(path: str, names: list[str], what: str) -> None:
    """Refuse two names that are one file once normalized: an export, a zip or a case-insensitive or
    normalizing file system (macOS) would keep only one of them."""
    seen: dict[str, str] = {}
    for name in names:
        other = seen.setdefault(file_key(name), name)
        if other != name:
            raise SourceError(
                path,
                None,
                None,
                f"two {what} name one file once Unicode form and case are normalized: {other!r} and {name!r} "
                "(an export or another file system would keep only one): rename one",
            )


def check_zip_members(path: str, archive: zipfile.ZipFile, archive_size: int) -> None:
    """Refuse a zip (of ``archive_size`` bytes) where two members name one file (zipfile would silently read the
    last), a member declares more compressed bytes than the archive holds, or one would inflate past
    ``ZIP_MAX_RATIO`` (once past ``ZIP_RATIO_FREE_BYTES``): so the declared sizes bound the work whatever the
    headers say, and a bomb is refused before a byte of it is inflated (zipfile never inflates past a member's
    declared size: its CRC check then fails)."""
    seen: dict[str, tuple[int, str]] = {}
    for number, info in enumerate(archive.infolist(), 1):
        member = f"{path}:{info.filename}"
        if info.header_offset + info.compress_size > archive_size:
            problem = (
                f"declares {info.compress_size:,} compressed bytes, more than the archive's {archive_size:,}: "
                "a corrupt or forged zip header"
            )
            raise SourceError(member, None, None, problem)
        if info.is_dir():
            continue
        first_number, first = seen.setdefault(file_key(info.filename), (number, info.filename))
        if first_number != number:
            problem = (
                f"members {first!r} (entry {first_number}) and {info.filename!r} (entry {number}) name one "
                "file: convhub would read only one of them; keep one"
            )
            raise SourceError(path, None, None, problem)
        if info.file_size > ZIP_RATIO_FREE_BYTES and info.file_size > ZIP_MAX_RATIO * info.compress_size:
            problem = (
                f"declares {info.file_size:,} bytes inflated from {info.compress_size:,} compressed, more than "
                f"{ZIP_MAX_RATIO} times (a zip bomb?): convhub refuses to inflate it"
            )
            raise SourceError(member, None, None, problem)


def open_zip(path: str, shown: str) -> zipfile.ZipFile:
    """The zip at ``path``, opened only once :func:`check_zip_members` finds its members safe to read; errors
    name ``shown``, e.g. the URL ``path`` is a local copy of."""
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, EOFError) as error:
        problem = f"not a readable zip archive (corrupt or truncated): {error}"
        raise SourceError(shown, None, None, problem) from error
    try:
        check_zip_members(shown, archive, os.path.getsize(path))
    except BaseException:
        archive.close()
        raise
    return archive
