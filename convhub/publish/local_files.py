"""The local side of a push: the built folder's files, its card's row counts and license, file digests.

Nothing here talks to the Hub.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from huggingface_hub import DatasetCard

from convhub.cards import is_non_commercial
from convhub.publish.session import PushError
from convhub.storage.folders import Folder, is_url, parquet_file, relative_name

CARD = "README.md"
NO_LICENSE = {"", "none"}


def local_files(folder: Folder) -> dict[str, Folder]:
    """Every file the build wrote (path in the repo → its path, local or at the folder's URL); hidden files and
    folders are skipped."""
    files = {}
    for path in sorted(folder.rglob("*")):
        relative = relative_name(path, folder)
        if path.is_file() and not any(part.startswith(".") for part in relative.split("/")):
            files[relative] = path
    if CARD not in files:
        raise PushError(f"{folder} has no {CARD}: is it a folder written by `convhub build`?")
    return files


def expected_rows(card: DatasetCard) -> dict[str, dict[str, int]]:
    """Rows per split of every config the card offers, as the build wrote them into its ``dataset_info``."""
    infos = card.data.get("dataset_info") or []
    infos = [infos] if isinstance(infos, dict) else infos
    rows = {
        info.get("config_name", "default"): {
            split["name"]: split["num_examples"] for split in info.get("splits", [])
        }
        for info in infos
    }
    expected = {}
    for config in card.data.get("configs") or []:
        name = config["config_name"]
        if name not in rows:
            raise PushError(f"the card offers config {name} but gives no row counts for it (dataset_info)")
        expected[name] = rows[name]
    return expected


def license_ids(card: DatasetCard) -> list[str]:
    license_id = card.data.get("license")
    ids = license_id if isinstance(license_id, list) else [license_id]
    return [
        str(name).strip() for name in ids if name is not None and str(name).strip().lower() not in NO_LICENSE
    ]


def check_license(card: DatasetCard) -> None:
    """Refuse a card that names no license: users could not tell whether they may use the data at all."""
    if not license_ids(card):
        raise PushError(
            "the card names no license: set `license:` in its YAML (the source's LICENSE) to the source's terms, "
            "or to `unknown` if they truly are unknown, before publishing",
            kind="license",
        )


def license_warnings(card: DatasetCard) -> list[str]:
    """Warn on a non-commercial license and on an unknown one (a card with none is refused)."""
    warnings = []
    for name in license_ids(card):
        if is_non_commercial(name):
            warnings.append(
                f"license {name} is non-commercial: the dataset may not be used for commercial purposes"
            )
        elif name.lower() == "unknown":
            warnings.append("license unknown: users must check the source's terms before using the data")
    return warnings


def file_digests(path: Folder) -> tuple[str, str]:
    """(sha256, git blob sha1) of a file, read once in blocks, and a local file once per push: a push asks for the
    digests of a file the Hub may already hold (is it unchanged?) and again for its manifest, and reading a build
    of 120 TB once takes a day. Kept while the file's size and modification time stay as they were."""
    if is_url(path):
        return _read_digests(path, path.stat().st_size)
    status = path.stat()
    return _local_digests(str(path.resolve()), status.st_size, status.st_mtime_ns)


@functools.lru_cache(maxsize=1 << 16)
def _local_digests(path: str, size: int, modified_ns: int) -> tuple[str, str]:
    return _read_digests(Path(path), size)


def _read_digests(path: Folder, size: int) -> tuple[str, str]:
    sha256, blob = hashlib.sha256(), hashlib.sha1(b"blob %d\0" % size)
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            sha256.update(block)
            blob.update(block)
    return sha256.hexdigest(), blob.hexdigest()


def card_disagreements(folder: Folder, card: DatasetCard) -> list[str]:
    """Where the card's row counts differ from the rows the Parquet footers of its config's files hold."""
    counts = expected_rows(card)
    problems = []
    for config in card.data.get("configs") or []:
        name = config["config_name"]
        data_files = config.get("data_files") or []
        data_files = [{"split": "train", "path": data_files}] if isinstance(data_files, str) else data_files
        for entry in data_files:
            patterns = [entry["path"]] if isinstance(entry["path"], str) else entry["path"]
            files = sorted({path for pattern in patterns for path in folder.glob(pattern) if path.is_file()})
            rows = sum(parquet_file(path).metadata.num_rows for path in files)
            stated = counts.get(name, {}).get(entry["split"])
            if stated != rows:
                problems.append(
                    f"config {name} split {entry['split']}: the card says {stated} rows, "
                    f"its {len(files)} Parquet file{'' if len(files) == 1 else 's'} hold{'s' if len(files) == 1 else ''} {rows}"
                )
    return problems
