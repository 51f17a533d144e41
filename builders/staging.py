"""Write a folder all at once, and only where convhub may: a build, a mixture and an export never leave
partial output, never show a reader a missing folder, and never replace a folder of the user's.

Every folder convhub writes carries a marker file (``.convhub``, hidden, so ``push`` never uploads it). A rerun
may replace a folder with the marker, or an empty one; any other folder is the user's, and is replaced only with
``overwrite=True`` (``--overwrite``), and never when it is ``.``, ``/``, the home folder, or holds them or an
input of the run.

A folder at a URL (``convhub.folders``: HDFS, S3, any fsspec file system) follows the same rules, but for what a
remote file system cannot give: no link to follow, and the swap is two moves (the old folder aside, the new one in;
on an object store each move copies every object), so a reader may for a moment find the folder missing.
"""

from __future__ import annotations

import ctypes
import errno
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

from convhub.folders import (
    folder_at,
    fsspec_url,
    is_url,
    move,
    moves_by_copying,
    remove_tree,
    text_of,
    write_text,
)

MARKER = ".convhub"
_MARKER_TEXT = "This folder was written by convhub; a later convhub run may replace it.\n"


class OutputError(ValueError):
    """An output folder convhub must not write: one line for the user, raised before any work."""


def made_by_convhub(folder: Path) -> bool:
    """Whether ``folder`` holds the marker a convhub run writes into every folder it makes."""
    return (folder / MARKER).is_file()


def check_output(output: Path, overwrite: bool = False, inputs: Iterable[str | os.PathLike] = ()) -> None:
    """Refuse, before any work, an ``output`` that convhub may not write or replace.

    ``inputs`` are the files and folders the run reads (a data folder, the builds a mixture reads):
    the output may neither be one of them, hold one of them (replacing it would delete the input), nor lie
    inside one (the next run would read the output back as input).
    """
    if is_url(output) and output.protocol in ("file", "local"):  # a local folder all the same
        output = Path(output.path)
    elif is_url(output):
        _check_url_output(output, overwrite, inputs)
        return
    if output.is_symlink():
        raise OutputError(f"{output} is a symbolic link: give the folder it points to, or another path")
    if output.exists() and not output.is_dir():
        raise OutputError(f"{output} is a file, not a folder: give a folder to write into")
    target = output.resolve()
    for kept in (Path.cwd().resolve(), Path.home().resolve(), Path(target.anchor)):
        if target == kept or target in kept.parents:
            raise OutputError(f"refusing to write {output}: it is or holds {kept}, even with --overwrite")
    for source in _local_paths(inputs):
        if target == source or target in source.parents:
            raise OutputError(
                f"refusing to write {output}: it holds the input {source}, which would be deleted"
            )
        if source in target.parents:
            raise OutputError(
                f"refusing to write {output} inside the input {source}: the next run would read it as input"
            )
    _check_not_users(output, overwrite)


def _check_not_users(output: Path, overwrite: bool) -> None:
    if output.exists() and not made_by_convhub(output) and any(output.iterdir()) and not overwrite:
        raise OutputError(
            f"{text_of(output)} holds files convhub did not write: refusing to replace it "
            "(give a new or empty folder, or pass --overwrite to replace it)"
        )


def _check_url_output(output, overwrite: bool, inputs: Iterable[str | os.PathLike]) -> None:
    """``check_output`` for a folder at a URL: the inputs compared as URLs first (no file system is asked:
    :func:`_holds`), then what the folder holds."""
    name = text_of(output)
    if not output.path.strip("/"):
        raise OutputError(
            f"refusing to write {name}: it is the root of its file system, even with --overwrite"
        )
    for value in inputs:
        source = None if value is None else text_of(value)
        if source is None or "://" not in source:
            continue
        if _holds(name, source):
            raise OutputError(f"refusing to write {name}: it holds the input {value}, which would be deleted")
        if _holds(source, name):
            raise OutputError(
                f"refusing to write {name} inside the input {value}: the next run would read it as input"
            )
    if output.exists() and not output.is_dir():
        raise OutputError(f"{name} is a file, not a folder: give a folder to write into")
    _check_not_users(output, overwrite)


def _holds(folder: str, url: str) -> bool:
    """Whether the folder at the URL ``folder`` is ``url`` or holds it, as a store names them: ``s3a://`` as
    ``s3://``, a host with or without its port, and a URL with no host (``hdfs:///x``, the default namenode) as
    one on any host: which namenode is the default, only the cluster's configuration says."""
    folder_parts, url_parts = urlsplit(fsspec_url(folder)), urlsplit(fsspec_url(url))
    if folder_parts.scheme != url_parts.scheme:
        return False
    hosts = folder_parts.hostname, url_parts.hostname
    if all(hosts) and hosts[0] != hosts[1]:
        return False
    return (url_parts.path.rstrip("/") + "/").startswith(folder_parts.path.rstrip("/") + "/")


def _local_paths(inputs: Iterable[str | os.PathLike]) -> Iterator[Path]:
    """The inputs that are local paths (an ``hf://`` or Hub repo id is not; ``file://`` is), resolved."""
    for value in inputs:
        if value is None:
            continue
        text = text_of(value)
        if "://" in text and not text.startswith(("file://", "local://")):
            continue
        path = Path(folder_at(text).path) if "://" in text else Path(text)
        if path.exists():
            yield path.resolve()


@contextmanager
def staged_folder(
    output: Path, overwrite: bool = False, inputs: Iterable[str | os.PathLike] = ()
) -> Iterator[Path]:
    """A hidden folder beside ``output`` to write into. When the block ends normally it takes ``output``'s
    place; on any error it is removed and ``output`` (an earlier build, say) stays as it was.

    ``check_output`` runs first, so a folder convhub may not replace is refused before any work.
    """
    check_output(output, overwrite, inputs)
    if is_url(output):
        with _staged_url_folder(output, overwrite, inputs) as staging:
            yield staging
        return
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}.partial-", dir=output.parent))
    try:
        staging.chmod(0o777 & ~_umask())  # mkdtemp makes 0700; a build folder is as shareable as any other
        (staging / MARKER).write_text(_MARKER_TEXT, encoding="utf-8")
        yield staging
        check_output(output, overwrite, inputs)  # the folder may have changed during a long build
        _swap_in(staging, output)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


@contextmanager
def _staged_url_folder(output, overwrite: bool, inputs: Iterable[str | os.PathLike]) -> Iterator:
    """``staged_folder`` on a remote file system: the staging folder gets a random name beside ``output``.

    On an object store (S3), where moving a folder copies every object, a first build (nothing at ``output``
    yet) is written in place instead, marked as convhub's from its first file, and removed if it fails: a move
    there would copy the whole build once more (60 TB for MNBVC) for an atomicity an object store cannot give.
    """
    if not output.exists() and moves_by_copying(output):
        output.mkdir(parents=True)  # (before the try: what a failed mkdir found there is not ours to remove)
        try:
            write_text(output / MARKER, _MARKER_TEXT)
            yield output
        except BaseException:
            remove_tree(output)
            raise
        return
    staging = output.parent / f".{output.name}.partial-{secrets.token_hex(4)}"
    try:
        staging.mkdir(parents=True)
        write_text(staging / MARKER, _MARKER_TEXT)
        yield staging
        check_output(output, overwrite, inputs)
        if output.exists():
            aside = output.parent / f".{output.name}.old-{secrets.token_hex(4)}"
            move(output, aside)
            move(staging, output)
            remove_tree(aside)
        else:
            move(staging, output)
    except BaseException:
        remove_tree(staging)
        raise


def _swap_in(staging: Path, output: Path) -> None:
    """Put ``staging`` at ``output`` so that a reader never sees ``output`` missing or half-deleted.

    Where the system can exchange two folders in one step (Linux's ``renameat2``), it does; elsewhere the old
    folder is moved aside, the new one moved in, and only then is the old one deleted.
    """
    if not output.exists():
        os.replace(staging, output)
        return
    if _exchange(staging, output):
        shutil.rmtree(staging)  # it now holds the old folder
        return
    aside = Path(tempfile.mkdtemp(prefix=f".{output.name}.old-", dir=output.parent))
    os.replace(output, aside)
    os.replace(staging, output)
    shutil.rmtree(aside)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(first: Path, second: Path) -> bool:
    """Swap two paths atomically with ``renameat2(RENAME_EXCHANGE)``; False where the system cannot."""
    renameat2 = getattr(_libc(), "renameat2", None)
    if renameat2 is None:
        return False
    done = renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE)
    if done == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EXDEV):
        return False  # an old kernel or a file system without exchange: the two-rename fallback
    raise OSError(code, os.strerror(code), str(second))


def _libc():
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _umask() -> int:
    """The process's umask (reading it means setting it: set it straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
