"""Where one ConvLab dataset's files are, and opening them safely.

A dataset (a ``subset``) is, in this order of preference, ``<name>/data.zip``, its extracted ``<name>/data/``
folder, or ``<name>/dummy_data.json`` (ConvLab's ten-dialogue sample: dialogues only), listed in a local folder or
at a URL (read from local copies: a zip is read by seeking). Every refusal here
names the file: a zip bomb, a forged zip header, two members or folders that are one file once Unicode form
and case are normalized, a folder name a card's ``data_files`` would read as a wildcard.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import math
import os
import posixpath
import tempfile
import unicodedata
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from convhub.errors import SourceError
from convhub.storage.folders import fsspec_url, local_copy

DIALOGUES, ONTOLOGY, DUMMY = "dialogues.json", "ontology.json", "dummy_data.json"
#: A zip member may inflate to at most this many times its compressed size once it inflates to more than
#: ``ZIP_RATIO_FREE_BYTES`` (ConvLab's own members: 5-17x; deflate's limit is about 1,030x), so a zip bomb
#: is refused before a byte of it is inflated (tests/convlab/test_convlab_hostile.py). zipfile never
#: inflates past the declared size (its CRC check then fails), and a declared compressed size past the
#: archive's end is refused, so the declared sizes bound the work whatever the headers say.
ZIP_MAX_RATIO = 100
ZIP_RATIO_FREE_BYTES = 8 << 20
#: Characters a card's ``data_files`` read as a pattern: a subset named ``x[1]`` would load ``x1``'s files.
PATTERN_CHARACTERS = frozenset("[]*?")
_DAMAGED_ZIP = (zipfile.BadZipFile, zlib.error, EOFError, OSError)
#: Where a local ``--data-dir`` is listed: the same calls list a URL's file system.
LOCAL = LocalFileSystem()


@dataclass(frozen=True)
class SubsetInput:
    """One ConvLab dataset: ``kind`` is ``zip`` (``path`` is data.zip), ``folder`` (``path`` is ``data/``)
    or ``dummy`` (``path`` is dummy_data.json).

    ``origin``: the URL ``path`` is a local copy of (a ``--data-dir`` at a URL). Errors name it, and a task on a
    machine without the copy (a Spark executor elsewhere) makes its own (:meth:`here`).
    """

    name: str
    kind: str
    path: str
    origin: str | None = None

    def here(self) -> SubsetInput:
        """This input with a ``path`` on this machine: a copy of ``origin`` made here when the driver's is not."""
        if self.origin is None or os.path.exists(self.path):
            return self
        return dataclasses.replace(self, path=local_copy(self.origin, tempfile.gettempdir()))

    @property
    def shown(self) -> str:
        """The file or folder an error message names: the URL for a copy."""
        return self.origin or self.path

    def label(self, member: str) -> str:
        """The file an error message names."""
        if self.kind == "zip":
            return f"{self.shown}:data/{member}"
        return self.shown if self.kind == "dummy" else f"{self.shown}/{member}"

    def members(self) -> list[str]:
        """The files of ``data/``, relative and sorted (a dummy input has only its dialogues)."""
        if self.kind == "dummy":
            return [DIALOGUES]
        if self.kind == "zip":
            with self._archive() as archive:
                names = [
                    name.removeprefix("data/") for name in archive.namelist() if name.startswith("data/")
                ]
            return sorted(name for name in names if name and not name.endswith("/"))
        found = [
            os.path.relpath(os.path.join(root, name), self.path)
            for root, _, files in os.walk(self.path)
            for name in files
        ]
        names = sorted(name.replace(os.sep, "/") for name in found)
        refuse_same_names(self.shown, names, "files of data/")
        return names

    def zipped_size(self, member: str) -> int:
        """A zip member's inflated size (0 when absent: opening it names the problem)."""
        with self._archive() as archive:
            try:
                return archive.getinfo(f"data/{member}").file_size
            except KeyError:
                return 0

    @contextlib.contextmanager
    def open(self, member: str) -> Iterator[IO[bytes]]:
        """A member as a binary stream; a damaged zip member raises a SourceError naming it."""
        if self.kind != "zip":
            with open(self.path if self.kind == "dummy" else os.path.join(self.path, member), "rb") as stream:
                yield stream
            return
        with self._archive() as archive:
            try:
                info = archive.getinfo(f"data/{member}")
            except KeyError:
                raise SourceError(self.shown, None, None, f"data/{member} is not in the archive") from None
            try:
                with archive.open(info) as stream:
                    yield stream
            except _DAMAGED_ZIP as error:
                problem = f"corrupt or truncated zip member: {error}"
                raise SourceError(self.label(member), None, None, problem) from error

    def read_json(self, member: str) -> Any:
        with self.open(member) as stream:
            try:
                return json.load(stream)
            except (json.JSONDecodeError, UnicodeDecodeError) as error:
                raise SourceError(self.label(member), None, None, f"not valid UTF-8 JSON: {error}") from error

    def stat_key(self) -> tuple:
        """Identifies this input's dialogues as they are now (a cache key)."""
        stat = os.stat(self.path if self.kind != "folder" else os.path.join(self.path, DIALOGUES))
        return (self.kind, os.path.realpath(self.path), stat.st_size, stat.st_mtime_ns)

    def database_files(self) -> list[str]:
        """Every JSON file of ``data/`` besides the dialogues and the ontology: ConvLab's database files."""
        return [
            name for name in self.members() if name.endswith(".json") and name not in (DIALOGUES, ONTOLOGY)
        ]

    def ontology_domains(self) -> list[str]:
        if ONTOLOGY not in self.members():
            return []
        domains = self.read_json(ONTOLOGY).get("domains")
        return list(domains) if isinstance(domains, dict) else []

    def _archive(self) -> zipfile.ZipFile:
        """The zip, opened only once :func:`check_zip_members` finds its members safe to read."""
        try:
            archive = zipfile.ZipFile(self.path)
        except (zipfile.BadZipFile, OSError, EOFError) as error:
            problem = f"not a readable zip archive (corrupt or truncated): {error}"
            raise SourceError(self.shown, None, None, problem) from error
        try:
            check_zip_members(self.shown, archive)
        except BaseException:
            archive.close()
            raise
        return archive


def _file_key(name: str) -> str:
    """The file a name means once extracted anywhere: ``./data//X.json`` and ``data/x.json`` (also as NFD,
    or on a case-insensitive file system) are one file."""
    name = unicodedata.normalize("NFC", name.replace("\\", "/")).casefold()
    return "/".join(part for part in name.split("/") if part not in ("", "."))


def refuse_same_names(path: str, names: list[str], what: str) -> None:
    """Refuse two names that are one file once normalized: an export, a zip or a case-insensitive or
    normalizing file system (macOS) would keep only one of them."""
    seen: dict[str, str] = {}
    for name in names:
        other = seen.setdefault(_file_key(name), name)
        if other != name:
            raise SourceError(
                path,
                None,
                None,
                f"two {what} name one file once Unicode form and case are normalized: {other!r} and {name!r} "
                "(an export or another file system would keep only one): rename one",
            )


def check_zip_members(path: str, archive: zipfile.ZipFile) -> None:
    """Refuse a zip where two members name one file (zipfile would silently read the last), a member
    declares more compressed bytes than the archive holds, or one would inflate past ``ZIP_MAX_RATIO``."""
    seen: dict[str, tuple[int, str]] = {}
    try:  # (the open archive's own size: a streaming build may read the path through fsspec)
        archive_size = os.fstat(archive.fp.fileno()).st_size
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        archive_size = math.inf
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
        first_number, first = seen.setdefault(_file_key(info.filename), (number, info.filename))
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


def local_input(folder: str, fs: fsspec.AbstractFileSystem = LOCAL) -> SubsetInput | None:
    """The best input in one dataset folder (local, or a URL on the file system ``fs``), or None when it holds
    no ConvLab data."""
    name = posixpath.basename(posixpath.normpath(folder))
    join = posixpath.join
    if fs.isfile(join(folder, "data.zip")):
        found = SubsetInput(name, "zip", join(folder, "data.zip"))
    elif fs.isfile(join(folder, "data", DIALOGUES)):
        found = SubsetInput(name, "folder", join(folder, "data"))
    elif fs.isfile(join(folder, DUMMY)):
        found = SubsetInput(name, "dummy", join(folder, DUMMY))
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
    return found


def find_inputs(data_dir: str, subsets: tuple[str, ...] | None) -> list[SubsetInput]:
    """Every ConvLab dataset under ``data_dir`` (or ``data_dir`` itself), restricted to ``subsets``.

    ``data_dir`` may be a URL (``hdfs://``, ``s3a://``, any fsspec URL): the inputs then have URLs for paths,
    which :func:`copied_here` turns into local copies.
    """
    url = "://" in data_dir
    fs, root = fsspec.core.url_to_fs(fsspec_url(data_dir)) if url else (LOCAL, data_dir)
    if not fs.isdir(root):
        raise FileNotFoundError(f"ConvLab data dir {data_dir} is not a folder")
    itself = local_input(data_dir, fs)
    if itself is not None:
        found = {itself.name: itself}
    else:
        entries = sorted(posixpath.basename(entry.rstrip("/")) for entry in fs.ls(root, detail=False))
        folders = [entry for entry in entries if fs.isdir(posixpath.join(data_dir, entry))]
        candidates = {entry: local_input(posixpath.join(data_dir, entry), fs) for entry in folders}
        found = {entry: candidate for entry, candidate in candidates.items() if candidate is not None}
    refuse_same_names(data_dir, sorted(found), "dataset folders")
    if not subsets:
        if not found:
            raise FileNotFoundError(
                f"no ConvLab dataset in {data_dir} (no <name>/data.zip, data/ or {DUMMY})"
            )
        return list(found.values())
    missing = [name for name in subsets if name not in found]
    if missing:
        raise FileNotFoundError(
            f"no ConvLab dataset {', '.join(missing)} in {data_dir} "
            f"(looked for <name>/data.zip, <name>/data/{DIALOGUES}, <name>/{DUMMY}); found: {sorted(found)}"
        )
    return [found[name] for name in subsets]


def copied_here(inputs: list[SubsetInput], folder: str) -> list[SubsetInput]:
    """Inputs at URLs as local copies in ``folder`` (each file or ``data/`` folder copied once per version), their
    URLs kept as their ``origin``: a zip is read by seeking, which a local file does at no cost and a URL with a
    request each."""
    return [
        dataclasses.replace(source, path=local_copy(source.path, folder), origin=source.path)
        for source in inputs
    ]
