"""Where ``convhub score`` may write its report, and the writing itself: never over a file convhub did not write.

A report convhub wrote is recognized by its content: a JSON object whose ``written_by`` is ``"convhub score"``
(every report carries it), or, for reports written before that key existed, whose ``missing_scored_as`` is
convhub's own sentence. Anything else at ``--output`` is the user's, and is refused before any work (the judge
costs money): the predictions, the build's card or any file inside the build folder, a file of another kind
(a FIFO, a device, a folder, a symbolic link), a URL other than ``file:``. The report is written to a temporary
file beside the target and renamed into place; on any failure (a full disk, Ctrl-C) the temporary file is
removed. The report's mode follows the umask, as a file the user makes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import unquote

import fsspec

from convhub.score.inputs import ScoreError
from convhub.storage.folders import file_url_path, location
from convhub.storage.staging import OutputError, process_umask

#: The key and value every report carries first: what tells a report convhub may replace.
WRITTEN_BY = ("written_by", "convhub score")
#: A report's size past which it cannot be one of convhub's (a report is a few hundred lines).
_LARGEST_REPORT = 16 * 1024 * 1024


class OutputRefused(ScoreError, OutputError):
    """An ``--output`` convhub must not write: one line, found before any work (a usage error, exit 2, as
    ``build``, ``export`` and ``mix`` refuse theirs: ``storage.staging.OutputError``)."""


def report_path(value: str) -> Path:
    """``--output`` as a local path: ``file:`` URLs (``file:/abs``, ``file:///abs``, ``file://localhost/abs``)
    mean their path; any other URL is refused (write the report locally and copy it), also one that starts with
    a file system's protocol and a colon without ``//`` (``s3:/bucket/r.json``); ``notes:v2.json`` is a file."""
    if value.startswith("file:/"):
        try:
            return Path(file_url_path(value))  # as build, export and mix read one
        except argparse.ArgumentTypeError as error:
            raise OutputRefused(f"--output {error}") from None
    if value.startswith("file:"):  # file:report.json, a relative path
        return Path(unquote(value.removeprefix("file:")))
    scheme = value.partition(":")[0] if ":" in value.split("/", 1)[0] else ""
    if "://" in value or scheme.lower() in fsspec.available_protocols():
        # s3:/bucket/r.json (one slash) is a URL mistyped, not a folder named "s3:" to make
        raise OutputRefused(
            f"--output {value} is a URL: give a local file for the report (copy it to the URL after)"
        )
    return Path(value)


def is_convhub_report(path: Path) -> bool:
    """Whether the regular file at ``path`` is a report ``convhub score`` wrote (see the module's docstring)."""
    from convhub.score.report import MISSING_RULE

    try:
        if path.stat().st_size > _LARGEST_REPORT:
            return False
        content = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return False
    if not isinstance(content, dict):
        return False
    return content.get(WRITTEN_BY[0]) == WRITTEN_BY[1] or content.get("missing_scored_as") == MISSING_RULE


def check_report_target(output: Path, predictions: Path, data: str) -> None:
    """Refuse an ``--output`` convhub may not write, before any work (see the module's docstring)."""
    try:
        found = os.lstat(output)
    except FileNotFoundError:
        found = None
    except OSError as error:
        raise OutputRefused(f"--output {output}: cannot look at it: {error.strerror or error}") from None
    if found is not None:
        if stat.S_ISLNK(found.st_mode):
            raise OutputRefused(
                f"--output {output} is a symbolic link: give the file it points to, or another path"
            )
        if stat.S_ISDIR(found.st_mode):
            raise OutputRefused(
                f"--output {output} is a folder: give the report's file name, e.g. {output}/report.json"
            )
        if not stat.S_ISREG(found.st_mode):
            raise OutputRefused(
                f"--output {output} is not a regular file (a FIFO, a device or a socket): refusing it"
            )
    target = output.resolve()
    if _same_file(output, predictions) or target == predictions.resolve():
        raise OutputRefused(f"--output {output} is the predictions file: give another file for the report")
    if _at_or_inside(target, _local_folder(data)):
        raise OutputRefused(
            f"--output {output} is inside the build folder {data}: the report would change the build; "
            "write it elsewhere"
        )
    if found is not None and not is_convhub_report(output):
        raise OutputRefused(
            f"--output {output} exists and is not a report convhub score wrote: refusing to replace it "
            "(give a new file name, or remove it yourself)"
        )


def check_judge_cache(cache: Path | None, output: Path, data: str) -> None:
    """Refuse a judge cache folder that would mix with the report or the build, before any work: the report at
    or inside the cache (an entry's place), the cache at or inside the report's path or the build folder (its
    entries would change the build), or a cache "folder" that is a file of the user's."""
    if cache is None:
        return
    folder, target = cache.resolve(), output.resolve()
    if _at_or_inside(target, folder):
        raise OutputRefused(
            f"--output {output} is inside the judge cache {cache}: write the report elsewhere"
        )
    if _at_or_inside(folder, target):
        raise OutputRefused(f"--judge-cache {cache} is inside --output {output}: give another folder")
    if _at_or_inside(folder, _local_folder(data)):
        raise OutputRefused(
            f"--judge-cache {cache} is inside the build folder {data}: its entries would change the build; "
            "give another folder"
        )
    if folder.exists() and not folder.is_dir():
        raise OutputRefused(f"--judge-cache {cache} is not a folder: give a folder for the cached replies")


def _at_or_inside(path: Path, folder: Path | None) -> bool:
    """Whether the resolved ``path`` is ``folder`` or under it (None: no local folder)."""
    return folder is not None and (path == folder or folder in path.parents)


def _same_file(first: Path, second: Path) -> bool:
    try:
        return os.path.samefile(first, second)
    except OSError:
        return False


def _local_folder(data: str) -> Path | None:
    """The build folder ``--data`` names on this disk, resolved (None: a Hub repo or a remote URL)."""
    text = os.fspath(data)
    if "://" in text:
        where = location(text)
        if not where.local:
            return None
        text = where.path
    path = Path(text)
    return path.resolve() if path.exists() else None


def write_report(report: Mapping[str, object], path: Path, predictions: Path, data: str) -> None:
    """Write the report as indented JSON through a temporary file beside ``path``, renamed into place once whole
    and checked again (the target may have changed during a long judge run); the temporary file never stays."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with open(descriptor, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=2, ensure_ascii=False)
            handle.write("\n")
        os.chmod(
            temporary, 0o666 & ~process_umask()
        )  # (mkstemp makes it 0600: a report is as shareable as any file)
        check_report_target(path, predictions, data)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
