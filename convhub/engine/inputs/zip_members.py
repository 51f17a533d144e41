"""Reading the members of a zip archive within bounds, for any source whose files come zipped.

Every refusal names the file: an archive that does not open, a zip bomb, a forged zip header, two members (or
any two names a source lists) that are one file once Unicode form and case are normalized. The bounds hold
whatever the headers say: a member may inflate to at most ``ZIP_MAX_RATIO`` times its compressed size once it
inflates to more than ``ZIP_RATIO_FREE_BYTES``, so a bomb is refused before a byte of it is inflated; zipfile
never inflates past the declared size (its CRC check then fails), and a declared compressed size past the
archive's end is refused, so the declared sizes bound the work.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import unicodedata
import zipfile
import zlib
from collections.abc import Iterator
from typing import IO

from convhub.errors import SourceError

#: ConvLab's own members inflate 5-17x; deflate's limit is about 1,030x.
ZIP_MAX_RATIO = 100
ZIP_RATIO_FREE_BYTES = 8 << 20
#: What a damaged member raises while it is read.
DAMAGED_ZIP = (zipfile.BadZipFile, zlib.error, EOFError, OSError)


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


def check_zip_members(path: str, archive: zipfile.ZipFile) -> None:
    """Refuse a zip where two members name one file (zipfile would silently read the last), a member
    declares more compressed bytes than the archive holds, or one would inflate past ``ZIP_MAX_RATIO``."""
    seen: dict[str, tuple[int, str]] = {}
    try:  # (the open archive's own size: a streaming build may read the path through fsspec)
        fp = archive.fp  # (None once the archive is closed)
        archive_size = math.inf if fp is None else os.fstat(fp.fileno()).st_size
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


def open_zip(path: str, shown: str | None = None) -> zipfile.ZipFile:
    """The zip at ``path``, opened only once :func:`check_zip_members` finds its members safe to read; errors
    name ``shown`` (default: ``path``), e.g. the URL ``path`` is a local copy of."""
    shown = shown or path
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, EOFError) as error:
        problem = f"not a readable zip archive (corrupt or truncated): {error}"
        raise SourceError(shown, None, None, problem) from error
    try:
        check_zip_members(shown, archive)
    except BaseException:
        archive.close()
        raise
    return archive


@contextlib.contextmanager
def open_member(path: str, member: str, shown: str | None = None) -> Iterator[IO[bytes]]:
    """One member of the zip at ``path`` as a binary stream; an absent or damaged member is a SourceError naming
    it (``<shown>:<member>``)."""
    shown = shown or path
    with open_zip(path, shown) as archive:
        try:
            info = archive.getinfo(member)
        except KeyError:
            raise SourceError(shown, None, None, f"{member} is not in the archive") from None
        try:
            with archive.open(info) as stream:
                yield stream
        except DAMAGED_ZIP as error:
            problem = f"corrupt or truncated zip member: {error}"
            raise SourceError(f"{shown}:{member}", None, None, problem) from error


def member_names(path: str, folder: str = "", shown: str | None = None) -> list[str]:
    """The files of the zip at ``path`` under ``folder`` (``data/``), relative to it and sorted."""
    with open_zip(path, shown) as archive:
        names = [name.removeprefix(folder) for name in archive.namelist() if name.startswith(folder)]
    return sorted(name for name in names if name and not name.endswith("/"))


def member_size(path: str, member: str, shown: str | None = None) -> int:
    """A member's inflated size (0 when absent: opening it names the problem)."""
    with open_zip(path, shown) as archive:
        try:
            return archive.getinfo(member).file_size
        except KeyError:
            return 0
