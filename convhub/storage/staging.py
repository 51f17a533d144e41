"""Write a folder all at once, and only where convhub may: a build, a mixture and an export never leave
partial output, never show a reader a missing folder, and never replace a folder of the user's.

Every folder convhub writes carries a marker file (``.convhub``, hidden, so ``push`` never uploads it). A rerun
may replace a folder with the marker, or an empty one; any other folder is the user's, and is replaced only with
``overwrite=True`` (``--overwrite``), and never when it is ``.``, ``/``, the home folder, or holds them or an
input of the run.

A folder at a URL (``convhub.storage.folders``: HDFS, S3, any fsspec file system) follows the same rules, but for what a
remote file system cannot give: no link to follow; on HDFS the swap is two renames (the old folder aside, the new
one in), so a reader may for a moment find the folder missing; on an object store, which has no rename, each of
the new build's objects is copied into place on the store (``_publish``), so a reader may for a moment see a mix.
Whether two URLs name one folder is what their file systems open (``folders.location``): ``memory://d/x`` is
``memory:///d/x``, and ``simplecache::file:///x`` is the local folder ``/x``, checked as one.

Staging folders are marked as this run's before they exist (``convhub.storage.abandoned``), and each run first removes
those beside its output that a killed run left.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import socket
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from convhub.errors import UsageError
from convhub.storage.abandoned import (
    FolderT,
    claim,
    is_abandoned,
    is_running,
    marked_dir,
    owner_record,
    read_owner_record,
    release,
    sweep_abandoned,
)
from convhub.storage.folders import (
    Folder,
    Location,
    PathArg,
    is_url,
    location,
    move,
    moves_by_copying,
    remove_tree,
    text_of,
    write_text,
)

MARKER = ".convhub"
_MARKER_TEXT = "This folder was written by convhub; a later convhub run may replace it.\n"


class OutputError(UsageError, ValueError):
    """An output convhub must not write (a folder or file of the user's, an input, one another run is writing):
    one line for the user, raised before any work. The command line cannot run as given (another ``--output``,
    or ``--overwrite``, is the answer), so every command exits 2 for it (``convhub.cli.errors.USAGE``), as
    argparse does for an ``--output`` it refuses itself (a URL where a local folder is needed)."""


def made_by_convhub(folder: Folder) -> bool:
    """Whether ``folder`` holds the marker a convhub run writes into every folder it makes."""
    return (folder / MARKER).is_file()


def check_output(output: Folder, overwrite: bool = False, inputs: Iterable[PathArg | None] = ()) -> None:
    """Refuse, before any work, an ``output`` that convhub may not write or replace.

    ``inputs`` are the files and folders the run reads (a data folder, the builds a mixture reads):
    the output may neither be one of them, hold one of them (replacing it would delete the input), nor lie
    inside one (the next run would read the output back as input).
    """
    if is_url(output):
        where = location(text_of(output))
        if not where.local:
            _check_url_output(output, where, overwrite, inputs)
            return
        output = Path(where.path)  # a local folder all the same (file://, a cache over one: check it as one)
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


def _check_not_users(output: Folder, overwrite: bool) -> None:
    if output.exists() and not made_by_convhub(output) and any(output.iterdir()) and not overwrite:
        raise OutputError(
            f"{text_of(output)} holds files convhub did not write: refusing to replace it "
            "(give a new or empty folder, or pass --overwrite to replace it)"
        )


def _check_url_output(output, where: Location, overwrite: bool, inputs: Iterable[PathArg | None]) -> None:
    """``check_output`` for a folder at a URL: the inputs compared as URLs first (as their file systems name
    them, none asked: ``folders.location``), then what the folder holds."""
    name = text_of(output)
    if not where.parts:
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
    """Whether the folder at the URL ``folder`` is ``url`` or holds it, as its file system opens them
    (``folders.Location.holds``): ``s3a://`` as ``s3://``, ``memory://d`` as ``memory:///d``, a host with or
    without its port, a URL with no host (``hdfs:///x``) as one on any host."""
    return location(folder).holds(location(url))


def _local_paths(inputs: Iterable[PathArg | None]) -> Iterator[Path]:
    """The inputs that are local paths (an ``hf://`` or Hub repo id is not; ``file://`` and a cache over a
    local file are), resolved."""
    for value in inputs:
        if value is None:
            continue
        text = text_of(value)
        if "://" in text:
            where = location(text)
            if not where.local:
                continue
            text = where.path
        path = Path(text)
        if path.exists():
            yield path.resolve()


@contextmanager
def staged_folder(
    output: FolderT, overwrite: bool = False, inputs: Iterable[PathArg | None] = ()
) -> Iterator[FolderT]:
    """A hidden folder beside ``output`` to write into. When the block ends normally it takes ``output``'s
    place; on any error it is removed and ``output`` (an earlier build, say) stays as it was.

    ``check_output`` runs first, so a folder convhub may not replace is refused before any work. The staging
    folders a killed run left beside ``output`` are removed first (``convhub.storage.abandoned``: only those marked as a
    convhub run's that no process holds any more), and this one is marked so, before it exists.
    """
    check_output(output, overwrite, inputs)
    if is_url(output):
        with _staged_url_folder(output, overwrite, inputs) as staging:
            yield staging
        return
    output.parent.mkdir(parents=True, exist_ok=True)
    prefix = partial_prefix(output)
    sweep_abandoned(output.parent, prefix)
    staging = marked_dir(output.parent, prefix)
    try:
        staging.chmod(0o777 & ~process_umask())  # (as a folder the user makes: as shareable as any other)
        (staging / MARKER).write_text(_MARKER_TEXT, encoding="utf-8")
        yield staging
        check_output(output, overwrite, inputs)  # the folder may have changed during a long build
        _swap_in(staging, output)
    finally:
        release(staging)  # the build on failure, the old folder after an exchange, else nothing


def partial_prefix(output) -> str:
    """The name of ``output``'s staging folders, beside it, up to their random part: ``.OUT.partial-``."""
    return f".{output.name}.partial-"


@contextmanager
def _staged_url_folder(output, overwrite: bool, inputs: Iterable[PathArg | None]) -> Iterator:
    """``staged_folder`` on a remote file system: the staging folder gets a random name beside ``output``.

    On an object store (S3), where there are no folders, only objects under a common prefix, and no rename (a
    "move" copies every object), a first build (nothing at ``output`` yet) is written in place instead, marked
    as convhub's from its first file, and removed if it fails: a move there would copy the whole build once more
    (60 TB for MNBVC) for an atomicity an object store cannot give. A rebuild is staged, and only once it is
    whole are its objects copied into place (``_publish``: one server-side copy each, never through this
    machine), so a failed rebuild leaves the earlier build as it was.
    """
    prefix = partial_prefix(output)
    sweep_abandoned(output.parent, prefix)
    if moves_by_copying(output):
        _check_not_being_written(output)
        if not output.exists():
            try:  # (before the try below: what a failed mkdir found there is not ours to remove)
                output.mkdir(parents=True)
            except FileExistsError:  # another run made it since: refused, naming that run where it holds it
                _check_not_being_written(output)
                raise OutputError(
                    f"{text_of(output)} was made by another run while this build started: refusing to write it too"
                ) from None
            with writing_into(output):  # (before the try too: another run's build is not ours to remove)
                try:
                    write_text(output / MARKER, _MARKER_TEXT)
                    yield output
                except BaseException:
                    remove_tree(output)
                    raise
            return
    staging = marked_dir(output.parent, prefix)
    try:
        write_text(staging / MARKER, _MARKER_TEXT)
        yield staging
        check_output(output, overwrite, inputs)
        if not output.exists():
            move(staging, output)
        elif moves_by_copying(output):
            with writing_into(output):
                _publish(staging, output)
        else:  # a file system with a rename (HDFS): two moves
            _two_moves(staging, output, claim(output.parent, prefix), move)
    finally:
        release(staging)


#: In a folder on an object store while a run writes into it (a first build written in place, a rebuild's
#: objects copied into place): that run's owner record (``storage.abandoned``). Hidden, so ``push`` skips it.
WRITING = ".convhub-writing"


@contextmanager
def writing_into(output) -> Iterator[None]:
    """Hold the folder ``output`` on an object store while this run writes into it: two runs writing one output
    at once would leave objects of both. ``WRITING`` is created only where it is absent (the store's conditional
    write, ``If-None-Match``), so one run holds it; another is refused (``OutputError``) unless the holder was a
    process of this host that no longer runs (killed), whose hold is taken over."""
    lock = output / WRITING
    text = json.dumps(owner_record()).encode("utf-8")
    for _attempt in range(2):
        try:
            _create(lock, text)
            break
        except FileExistsError:
            record = _check_not_being_written(output)
            if record is not None:
                lock.fs.rm(lock.path)  # a killed run's hold
    else:
        raise OutputError(
            f"{text_of(output)} is being written by another convhub run: refusing to write it too"
        )
    try:
        yield
    finally:
        lock.fs.invalidate_cache(output.path)
        if lock.fs.exists(lock.path):  # (a failed first build removed the whole folder)
            lock.fs.rm(lock.path)


def _create(path, data: bytes) -> None:
    """Write a new object, or raise FileExistsError where one is there: S3's conditional write (s3fs' ``mode``
    "create"); a file system whose writes take no ``mode`` looks first (not atomic, but the best it offers)."""
    try:
        path.fs.pipe_file(path.path, data, mode="create")
    except TypeError:  # (an fsspec file system older than the mode)
        if path.fs.exists(path.path):
            raise FileExistsError(path.path) from None
        path.fs.pipe_file(path.path, data)


def _check_not_being_written(output) -> dict | None:
    """Refuse (``OutputError``) an object store's folder that another run is writing (``writing_into``); the
    owner record of a killed run that held it, or None where nobody holds it."""
    lock = output / WRITING
    lock.fs.invalidate_cache(output.path)
    if not lock.exists():
        return None
    record = read_owner_record(lock)
    if is_abandoned(record):
        return record
    holder = f" (pid {record.get('pid')} on {record.get('host')})" if record else ""
    raise OutputError(
        f"{text_of(output)} is being written by another convhub run{holder}: refusing to write it at the same time "
        f"(if no such run is left, delete {text_of(lock)})"
    )


def unfinished_build(folder: Folder) -> str | None:
    """The line refusing ``folder`` as a build to read (``export``, ``push``, ``mix``, ``score --data``) while it
    holds ``WRITING``, or None: a first build on an object store is written in place and a rebuild's objects are
    copied in one by one, so a run killed part-way leaves a folder with a card and some Parquet files that looks
    whole but is not. A run of this host that still holds it is named: the build may yet end. A run of another
    host cannot be looked up: it is named, as the build refuses to write beside it, with both ways out."""
    if is_url(folder):
        folder.fs.invalidate_cache(folder.path)
    lock = folder / WRITING
    if not lock.exists():
        return None
    name, record = text_of(folder), read_owner_record(lock)
    if record is not None and record.get("host") == socket.gethostname() and is_running(record):
        return (
            f"{name} is still being written by a convhub run (pid {record.get('pid')}): its build is not finished; "
            "read it once that run has ended"
        )
    if record is not None and record.get("host") != socket.gethostname():
        return (
            f"{name} is being written by a convhub run on another host (pid {record.get('pid')} on "
            f"{record.get('host')}), or was left unfinished by one: read it once that run has ended, or, if none "
            f"is left, build it again with `convhub build SOURCE --output {name}`, which replaces it"
        )
    return (
        f"{name} holds a build that was never finished (its run stopped while writing it, leaving {WRITING}): "
        f"build it again with `convhub build SOURCE --output {name}`, which replaces it"
    )


def _publish(staging, output) -> None:
    """Put the build at ``staging`` in place of the one at ``output`` on an object store: each object copied
    into place on the store, the card (which lists the configs a reader loads) after the data files, then the
    earlier build's objects the new one does not have removed. The marker stays throughout, so a run stopped
    half-way leaves a folder the next build replaces."""
    fs, source, target = output.fs, staging.path.rstrip("/"), output.path.rstrip("/")
    fs.invalidate_cache(source)
    fs.invalidate_cache(target)
    new = sorted(path[len(source) + 1 :] for path in fs.find(source))
    old = {path[len(target) + 1 :] for path in fs.find(target)}
    for batch in ([name for name in new if name != CARD], [name for name in new if name == CARD]):
        if batch:
            fs.copy([f"{source}/{name}" for name in batch], [f"{target}/{name}" for name in batch])
    stale = sorted(old.difference(new))
    if stale:
        fs.rm([f"{target}/{name}" for name in stale])
    fs.invalidate_cache(target)


#: The dataset card: copied last into an object store's folder (``_publish``).
CARD = "README.md"


def _swap_in(staging: Path, output: Path) -> None:
    """Put ``staging`` at ``output`` so that a reader never sees ``output`` missing or half-deleted.

    Where the system can exchange two folders in one step (Linux's ``renameat2``), it does, and ``staging``
    then holds the old folder; elsewhere the old folder is moved aside (to a name marked as this run's, so a
    run killed before it is deleted leaves nothing a later one does not remove), the new one moved in, and only
    then is the old one deleted. The caller removes ``staging``.
    """
    if not output.exists():
        try:
            os.replace(staging, output)
            return
        except OSError as error:  # another run's build got there first: replaced as any earlier build
            if error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
    if _exchange(staging, output):
        return
    aside = claim(output.parent, partial_prefix(output))
    _two_moves(staging, output, aside, os.replace)


def _two_moves(staging, output, aside, mover) -> None:
    """``output`` moved to ``aside`` (a name ``claim`` marked), ``staging`` into its place, then the old folder
    removed; if the second move fails, the old folder goes back first."""
    try:
        mover(output, aside)
    except BaseException:
        release(aside)
        raise
    try:
        mover(staging, output)
    except BaseException:
        mover(aside, output)
        release(aside)
        raise
    release(aside)


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


def process_umask() -> int:
    """The process's umask (reading it means setting it: set it straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
