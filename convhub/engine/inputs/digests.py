"""Each input file of a build by name, size and sha256: the card's ``source_files``, which ``convhub score``
copies into its reports so that a score names the exact files its data came from (LongMemEval's first release or
its cleaned one, say). What the card promises of them: docs/guarantees.md, "Inputs named"."""

from __future__ import annotations

import glob
import hashlib
import json
import os
from datetime import datetime, timezone
from typing import Any

from convhub.engine.inputs.listing import ANY_FILE, find_files
from convhub.storage.folders import file_system, open_file

#: Inputs whose sizes add up to more than this are not hashed: hashing is a second read after the build, cheap for
#: most sources' public files, hours for MNBVC's whole corpus. It depends on the input only, so that the same input
#: gives the same card.
HASH_BUDGET_BYTES = 16 << 30
#: At most this many files in the YAML's ``source_files`` (about 150 bytes each, far under the Hub's limits), and
#: in the body's table.
YAML_FILES = 1000
BODY_FILES = 20
_READ_BYTES = 1 << 20


def input_files(data_dir: str | None, downloads: str | os.PathLike | None) -> list[tuple[str, str]]:
    """(name, local path or URL) of each input file, sorted by name: every file of ``data_dir`` that is not hidden
    (its subfolders' too, as the sources read folders), or without one the files ``datasets`` downloaded into
    ``downloads``, each named by the end of the URL its ``.json`` sidecar gives."""
    if data_dir is not None:
        return sorted(find_files(str(data_dir), "input", recursive=True, kind=ANY_FILE))
    found = []
    for sidecar in sorted(glob.glob(os.path.join(str(downloads or ""), "*.json"))):
        path = sidecar.removesuffix(".json")
        try:
            with open(sidecar, encoding="utf-8") as handle:
                url = json.load(handle)["url"]
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not a download's record
        if os.path.isfile(path):
            found.append((url.rstrip("/").rsplit("/", 1)[-1], path))
    return sorted(found)


def describe(files: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """``{name, bytes, sha256}`` of each file, in the given order; past the hash budget ``sha256`` is None and
    ``modified`` (UTC, ISO 8601) says which version of the file was read."""
    found = [(name, path, *_size_and_time(path)) for name, path in files]
    if sum(size for _, _, size, _ in found) <= HASH_BUDGET_BYTES:
        return [{"name": name, "bytes": size, "sha256": _sha256(path)} for name, path, size, _ in found]
    return [{"name": name, "bytes": size, "sha256": None, "modified": when} for name, _, size, when in found]


def card_yaml(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The card's YAML keys: ``source_files`` (at most :data:`YAML_FILES`), and ``source_files_not_listed``
    (files and bytes) when there are more."""
    keys: dict[str, Any] = {"source_files": entries[:YAML_FILES]}
    rest = entries[YAML_FILES:]
    if rest:
        keys["source_files_not_listed"] = {"files": len(rest), "bytes": sum(e["bytes"] for e in rest)}
    return keys


def _size_and_time(path: str) -> tuple[int, str | None]:
    """A file's size and modification time (UTC, ISO 8601; None where its file system keeps none), asked of its
    fsspec file system (S3 says ``LastModified``)."""
    fs, inner = file_system(path)
    info = fs.info(inner)
    modified = info.get("LastModified") or info.get("mtime")
    if isinstance(modified, (int, float)):
        modified = datetime.fromtimestamp(modified, timezone.utc)
    if isinstance(modified, datetime):
        modified = modified.isoformat(timespec="seconds").replace("+00:00", "Z")
    return int(info["size"]), None if modified is None else str(modified)


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open_file(path) as handle:
        while chunk := handle.read(_READ_BYTES):
            digest.update(chunk)
    return digest.hexdigest()
