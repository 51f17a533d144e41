"""convhub's own scratch folders, marked as its own, so that a later run can remove those a killed run left.

A run killed with SIGKILL (or whose machine went down) runs no cleanup: its hidden staging folder beside the
output (``.OUT.partial-*``, a whole build) and its work folders in TMPDIR (``convhub-work-*``,
``convhub-spark-task-*``) would stay for ever. So each such folder ``NAME`` gets an owner file beside it,
``NAME.owner``, written *before* the folder is made and removed only *after* it is gone: JSON naming the host,
the pid and the start time of the process that made it. Whenever the folder exists, so does its owner file.

``sweep_abandoned(parent, prefix)`` removes a ``prefix*`` folder only when its owner file is convhub's and names a
process of this host that no longer runs: its pid gone (or a zombie), or taken by a process that started at
another time (a reused pid). Nothing without such a file is touched, nor anything another host made (whether
that process still runs, only its host knows; that host's next run sweeps it).

The parent may be a local folder or a folder at a URL (``UPath``: a build's staging beside an output on HDFS or
S3); the owner file is the same there.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import tempfile
from pathlib import Path
from typing import TypeVar

from convhub.storage.folders import Folder, PathArg, folder_at, is_url, remove_tree

#: What an owner file's name ends with: ``NAME.owner`` owns the folder ``NAME`` beside it.
OWNER_SUFFIX = ".owner"
_KIND = "convhub scratch folder"

#: A local folder or one at a URL, kept as the caller's kind: a local parent gives a local ``Path``.
FolderT = TypeVar("FolderT", bound=Folder)


def owner_record(pid: int | None = None) -> dict:
    """Who holds a folder: this host, ``pid`` (this process by default) and that process's start time."""
    pid = os.getpid() if pid is None else pid
    return {"kind": _KIND, "host": socket.gethostname(), "pid": pid, "started": process_start(pid)}


def process_start(pid: int) -> str | None:
    """When process ``pid`` started, as this boot of the kernel counts it (so that a pid the system gave to
    another process since does not pass for the first one); None where the system does not say (no ``/proc``)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            boot = handle.read().strip()
    except (OSError, IndexError):
        return None
    return f"{boot}:{fields[19]}"  # field 22 of stat(5), the start time in clock ticks since boot


def is_running(record: dict) -> bool:
    """Whether the process an owner record names still runs (on this host: the caller checks the host)."""
    pid = record.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        pass
    if _is_zombie(pid):
        return False
    started = process_start(pid)
    return started is None or record.get("started") is None or started == record["started"]


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def claim(parent: FolderT, prefix: str) -> FolderT:
    """A new name ``prefix<random>`` in ``parent`` (made if missing), its owner file written: nothing is at the
    name yet, and whatever the caller puts there is marked as this process's."""
    parent.mkdir(parents=True, exist_ok=True)  # (on an object store a no-op: a prefix needs no folder)
    text = json.dumps(owner_record())
    while True:
        path = parent / f"{prefix}{secrets.token_hex(4)}"
        owner = _owner_of(path)
        if is_url(owner):
            if owner.exists() or path.exists():
                continue
            owner.write_text(text)
            return path
        try:
            with open(owner, "x", encoding="utf-8") as handle:  # exclusive: never another run's file
                handle.write(text)
        except FileExistsError:
            continue
        if path.exists() or path.is_symlink():
            owner.unlink()
            continue
        return path


def marked_dir(parent: FolderT, prefix: str, mode: int = 0o777) -> FolderT:
    """A new folder ``prefix<random>`` in ``parent``, marked as this process's (``claim``) before it exists
    (``mode`` as ``Path.mkdir`` takes it, under the umask, for a local one)."""
    path = claim(parent, prefix)
    if is_url(path):
        path.mkdir()
    else:
        path.mkdir(mode=mode)
    return path


def release(path: Folder) -> None:
    """Remove a folder ``claim`` named (if it is there) and then its owner file: the folder first, so that a run
    killed in between leaves an owner file that a later sweep still honours."""
    remove_tree(path)
    owner = _owner_of(path)
    if is_url(owner):
        if owner.exists():
            owner.fs.rm(owner.path)
    else:
        owner.unlink(missing_ok=True)


class MarkedTemporaryDirectory:
    """``tempfile.TemporaryDirectory`` for convhub's scratch, and a drop-in for it (``name``, ``cleanup``, a context
    manager giving the path): the folders a killed run left in ``dir`` (TMPDIR by default) under ``prefix`` are
    removed first, and this one is marked as this process's, so a later run removes it if this one is killed."""

    def __init__(self, prefix: str, dir: str | os.PathLike[str] | None = None):
        parent = Path(dir if dir is not None else tempfile.gettempdir())
        sweep_abandoned(parent, prefix)
        self.name = str(
            marked_dir(parent, prefix, mode=0o700)
        )  # as tempfile makes it: scratch holds user data

    def cleanup(self) -> None:
        release(Path(self.name))

    def __enter__(self) -> str:
        return self.name

    def __exit__(self, *exc_info) -> None:
        self.cleanup()


def sweep_abandoned(parent: PathArg, prefix: str) -> list[str]:
    """Remove the ``prefix*`` folders in ``parent`` that a convhub process of this host made and that no running
    process holds any more (module docstring); the names removed. Anything else is left as it is."""
    parent_folder = folder_at(parent)
    try:
        entries = list(parent_folder.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    removed = []
    for owner in entries:
        name = owner.name
        if not (name.startswith(prefix) and name.endswith(OWNER_SUFFIX)) or name == prefix + OWNER_SUFFIX:
            continue
        if not is_abandoned(read_owner_record(owner)):
            continue
        folder = parent_folder / name[: -len(OWNER_SUFFIX)]
        try:
            release(folder)
        except OSError:  # another run's sweep got there first, or another user's folder in a shared TMPDIR
            continue
        removed.append(folder.name)
    return removed


def is_abandoned(record: dict | None) -> bool:
    """Whether an owner record (``read_owner_record``) names a process of this host that no longer runs."""
    return record is not None and record.get("host") == socket.gethostname() and not is_running(record)


def read_owner_record(owner: Folder) -> dict | None:
    """An owner file's record, or None when it is no owner file of convhub's (not JSON, another kind, a folder)."""
    try:
        if is_url(owner):
            record = json.loads(owner.read_text())
        elif owner.is_file() and not owner.is_symlink():
            record = json.loads(owner.read_text(encoding="utf-8"))
        else:
            return None
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("kind") == _KIND else None


def _owner_of(path: FolderT) -> FolderT:
    return path.parent / (path.name + OWNER_SUFFIX)
