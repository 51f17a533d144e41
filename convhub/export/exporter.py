"""``convhub export``: rebuild a source's own files from a published build, the proof that nothing was lost.

A build (a local folder ``convhub build`` wrote, or a Hub repo it was pushed to) is read config by config:
the ``sessions`` config (the canonical records) and, for some sources, their own configs (ConvLab's
``ontology`` and ``database``). Each source's ``builders/<source>/export.py`` holds pure functions from
those rows to source records and a ``write_files(build, folder)`` that writes the source's file layout.

Rows are read in Arrow record batches, never a whole config at once, and the JSON text columns
(``schema.JSON_TEXT_FIELDS``) are decoded here with ``json.loads``, which reads exactly what
``schema.to_json`` wrote (17-digit floats, integers past 64 bits). A local folder is read as its Parquet files (resolved from its card, as ``load_dataset``
does), a Hub repo through ``datasets.load_dataset(repo, config)`` (``HF_ENDPOINT`` applies).

The output folder is assembled in a hidden staging folder beside it and renamed into place only when every
file was written, as ``convhub build`` does.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import datasets
import pyarrow as pa
from datasets import Features, LargeList, List
from huggingface_hub.errors import HfHubHTTPError

from convhub import registry
from convhub.errors import UsageError
from convhub.export.files import ExportError
from convhub.publish.hub_client import HubUnreachable, reach_repo
from convhub.publish.hub_errors import redact
from convhub.schema import JSON_TEXT_FIELDS
from convhub.storage.folders import (
    configs_of_card,
    folder_at,
    is_url,
    local_output,
    parquet_file,
    read_card,
    text_of,
)
from convhub.storage.staging import check_output, staged_folder, unfinished_build

#: The module of a source's folder that exports it (``write_files`` and the pure inverse functions).
EXPORT_MODULE = "export"
SESSIONS = "sessions"
#: Rows per Arrow batch: a GigaMemory ``sessions`` row is a whole ~350k-character dialogue.
BATCH_ROWS = 64

Row = dict[str, Any]


# -- JSON text columns -------------------------------------------------------------------------------


def as_object(value: Any) -> dict[str, Any]:
    """An ``extra`` as a dict, whether decoded (:func:`decoded_rows`), JSON text (a parser's record or a row
    ``load_dataset`` gives) or null. Only for columns that convhub always fills with an object."""
    if value is None:
        return {}
    if isinstance(value, str):
        return json.loads(value)
    return dict(value)


def decode_json(value: Any, feature: Any, is_json_text: bool = False) -> Any:
    """``value`` (as Arrow gives it) with every JSON text field in it decoded, with ``json.loads``."""
    if value is None:
        return None
    if is_json_text:
        return json.loads(value)
    if isinstance(feature, (List, LargeList)):
        return [decode_json(item, feature.feature) for item in value]
    if isinstance(feature, dict):
        return {key: decode_json(value[key], sub, key in JSON_TEXT_FIELDS) for key, sub in feature.items()}
    return value


def _has_json(feature: Any, is_json_text: bool = False) -> bool:
    if is_json_text:
        return True
    if isinstance(feature, (List, LargeList)):
        return _has_json(feature.feature)
    if isinstance(feature, dict):
        return any(_has_json(sub, key in JSON_TEXT_FIELDS) for key, sub in feature.items())
    return False


def decoded_rows(table: pa.Table, features: Features) -> Iterator[Row]:
    """The rows of one Arrow batch as dicts, JSON text decoded (the other columns as Arrow gives them)."""
    json_columns = {
        name: feature for name, feature in features.items() if _has_json(feature, name in JSON_TEXT_FIELDS)
    }
    for row in table.to_pylist():
        for name, feature in json_columns.items():
            row[name] = decode_json(row[name], feature, name in JSON_TEXT_FIELDS)
        yield row


# -- reading a build -----------------------------------------------------------------------------------


class Build:
    """A published build: its configs and, per config, its splits' rows (Json decoded), batch by batch."""

    location: str

    def configs(self) -> list[str]:
        raise NotImplementedError

    def splits(self, config: str) -> list[str]:
        raise NotImplementedError

    def rows(self, config: str, split: str, batch_rows: int = BATCH_ROWS) -> Iterator[Row]:
        raise NotImplementedError

    def all_rows(self, config: str, batch_rows: int = BATCH_ROWS) -> Iterator[tuple[str, Row]]:
        """(split, row) of every split of ``config``, split after split."""
        for split in self.splits(config):
            for row in self.rows(config, split, batch_rows):
                yield split, row

    def require(self, config: str) -> None:
        if config not in self.configs():
            raise ExportError(f"{self.location} has no {config!r} config; it has {sorted(self.configs())}")


class LocalBuild(Build):
    """A folder ``convhub build`` wrote, on this machine or at a URL (a build Spark wrote to HDFS or S3): Parquet
    files per config and split, listed in its card's YAML.

    Read with pyarrow, one record batch at a time, with no copy into the ``datasets`` cache (which keys a
    carded folder by name and YAML, not by its files, so a rebuilt folder could read stale rows).
    """

    def __init__(self, folder: str | os.PathLike):
        from datasets.data_files import DataFilesDict, sanitize_patterns

        self.folder = folder_at(folder)
        self.location = text_of(self.folder)
        readme = self.folder / "README.md"
        unfinished = unfinished_build(self.folder)
        if unfinished is not None:  # a killed run's card and part of its Parquet files: no build to read
            raise ExportError(unfinished)
        if not readme.is_file():
            raise ExportError(f"{self.location} is not a convhub build folder (no README.md)")
        readme_identity = file_identity(text_of(readme))
        #: the card read once, with the files it lists (``convhub score`` copies its ``source_files``)
        self.card = read_card(readme)
        configs = configs_of_card(self.card)
        self._files: dict[str, dict[str, list[str]]] = {}
        for name, config in configs.items():
            patterns = sanitize_patterns(config["data_files"])
            resolved = DataFilesDict.from_patterns(patterns, base_path=self.location)
            self._files[name] = {split: list(files) for split, files in resolved.items()}
        self._identity = {path: file_identity(path) for path in self._watched()}
        if self._identity[text_of(readme)] != readme_identity:  # the card read may be another build's
            raise self._changed()

    def configs(self) -> list[str]:
        return list(self._files)

    def splits(self, config: str) -> list[str]:
        self.require(config)
        return list(self._files[config])

    def rows(self, config: str, split: str, batch_rows: int = BATCH_ROWS) -> Iterator[Row]:
        for path in self._files[config][split]:
            parquet = parquet_file(path, pre_buffer=False)  # a pre-buffering reader keeps every chunk read
            features = Features.from_arrow_schema(parquet.schema_arrow)
            for batch in parquet.iter_batches(batch_size=batch_rows):
                yield from decoded_rows(pa.Table.from_batches([batch]), features)
            parquet.close()
            self._check_unchanged(path)

    def _watched(self) -> list[str]:
        """What identifies the build: the folder, its card and every data file."""
        files = [path for splits in self._files.values() for paths in splits.values() for path in paths]
        return [self.location, text_of(self.folder / "README.md"), *files]

    def _check_unchanged(self, path: str) -> None:
        """Refuse once the folder, its card or the file just read is not what it was when the build was opened.

        A rebuild swaps a new folder in (``staging``), whose files may bear the same names: each file is checked
        after it was read, with the folder and the card, so that every row an export wrote came from the build
        it opened; a build that changed is refused rather than exported as a mixture of two builds.
        """
        for watched in (self.location, text_of(self.folder / "README.md"), path):
            if file_identity(watched) != self._identity[watched]:
                raise self._changed()

    def _changed(self) -> ExportError:
        return ExportError(f"the build at {self.location} changed while it was read; run export again")


#: The fields of an fsspec ``info`` that tell one version of a file from another (a size, a time, an ETag).
_VERSION_FIELDS = ("size", "mtime", "ino", "ETag", "etag", "LastModified", "last_modified", "created", "type")


def file_identity(path: str) -> tuple | None:
    """What tells this version of the file or folder at ``path`` from another one there (None: nothing there).

    A local path's device, inode, size and change times; a URL's fsspec ``info`` (size, times, an object
    store's ETag). A rebuild swapped in makes new files, so their identity differs even where names and sizes
    do not.
    """
    target = folder_at(path)
    try:
        if is_url(target):
            info = target.fs.info(target.path)
            return tuple((key, str(info[key])) for key in _VERSION_FIELDS if key in info)
        found = os.stat(target)
    except FileNotFoundError:
        return None
    return (found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns)


class HubBuild(Build):
    """A build pushed to the Hub, read through ``datasets.load_dataset(repo, config)``."""

    def __init__(
        self, repo_id: str, revision: str | None = None, token: str | None = None, streaming: bool = False
    ):
        self.location = repo_id
        self.repo_id, self.revision, self.token, self.streaming = repo_id, revision, token, streaming
        self._loaded: dict[str, Any] = {}
        try:
            reach_repo(repo_id, revision=revision, token=token)
        except HubUnreachable as error:
            raise ExportError(str(error)) from error
        except HfHubHTTPError as error:
            raise ExportError(f"cannot read the Hub dataset {repo_id}: {redact(str(error))}") from error
        try:
            self._configs = datasets.get_dataset_config_names(repo_id, revision=revision, token=token)
        except Exception as error:  # a missing repo, a refused token, no network: one clear message
            raise ExportError(
                f"cannot read the Hub dataset {repo_id}: {type(error).__name__}: {error}"
            ) from error

    def configs(self) -> list[str]:
        return list(self._configs)

    def _dataset(self, config: str):
        self.require(config)
        if config not in self._loaded:
            self._loaded[config] = datasets.load_dataset(
                self.repo_id, config, revision=self.revision, token=self.token, streaming=self.streaming
            )
        return self._loaded[config]

    def splits(self, config: str) -> list[str]:
        return list(self._dataset(config))

    def rows(self, config: str, split: str, batch_rows: int = BATCH_ROWS) -> Iterator[Row]:
        dataset = self._dataset(config)[split]
        for table in dataset.with_format("arrow").iter(batch_size=batch_rows):
            # a streamed dataset may not know its features before the first batch: the Parquet schema does
            yield from decoded_rows(table, dataset.features or Features.from_arrow_schema(table.schema))


#: Hosts whose ``/datasets/ORG/NAME`` pages show a Hub dataset (and the host ``HF_ENDPOINT`` names).
HUB_PAGE_HOSTS = ("huggingface.co", "www.huggingface.co", "hf.co")


def hub_page_repo(text: str) -> str | None:
    """What to give instead of a Hub page's URL (``https://huggingface.co/datasets/ORG/NAME``, ``.../tree/REV``):
    ``ORG/NAME``, with ``--revision REV`` for a page of a revision; None for any other location.

    A page is refused, not read: ``HF_ENDPOINT`` says which Hub convhub reads, and a page of another host (or a
    revision beside ``--revision``) would leave it to a guess."""
    from urllib.parse import unquote, urlsplit

    from huggingface_hub import constants

    parts = urlsplit(text)
    hosts = {*HUB_PAGE_HOSTS, urlsplit(constants.ENDPOINT).netloc.lower()}
    words = [unquote(word) for word in parts.path.split("/") if word]
    if parts.scheme not in ("http", "https") or parts.netloc.lower() not in hosts:
        return None
    if len(words) < 3 or words[0] != "datasets":
        return None
    repo = f"{words[1]}/{words[2]}"
    if len(words) > 4 and words[3] in ("tree", "blob", "resolve"):
        return f"{repo} with --revision {words[4]}"
    return repo


def open_build(
    location: str | os.PathLike,
    revision: str | None = None,
    token: str | None = None,
    streaming: bool = False,
) -> Build:
    """A build folder when ``location`` exists on disk or is a URL (``hdfs://``, ``s3a://``; not ``hf://``), else a
    Hub repo id (``org/name``)."""
    text = os.fspath(location)
    repo = hub_page_repo(text)
    if repo is not None:  # the command line cannot run as given: exit 2
        raise UsageError(f"{text} is a Hub page, not a build: use {repo} to read it (its repo id)")
    if os.path.exists(location) or ("://" in text and not text.startswith("hf://")):
        if revision:
            raise ExportError("--revision applies to a Hub repo, not to a local folder")
        return LocalBuild(location)
    if str(location).count("/") != 1:
        raise ExportError(f"{location} is neither a local build folder nor a Hub repo id (org/name)")
    return HubBuild(str(location), revision, token, streaming)


def source_rows(build: Build, source: str, config: str = SESSIONS, batch_rows: int = BATCH_ROWS):
    """(split, row) of the ``sessions`` config, checking every row belongs to ``source``."""
    for split, row in build.all_rows(config, batch_rows):
        if row.get("source") != source:
            raise ExportError(
                f"{build.location} holds {row.get('source')!r} records, not {source!r} ones "
                f"(conversation {row.get('conversation_id')!r})"
            )
        yield split, row


# -- the command --------------------------------------------------------------------------------------


@dataclass
class ExportResult:
    source: str
    location: str
    output: Path
    files: list[str] = field(default_factory=list)


def exporter(source: str):
    """The export module of ``source``'s folder (``builders/<source>/export.py``)."""
    if source not in registry.names():
        raise ExportError(f"no export for source {source!r}; sources: {', '.join(registry.names())}")
    return importlib.import_module(f"{registry.module_name(source)}.{EXPORT_MODULE}")


def export_source(
    source: str,
    location: str | os.PathLike,
    output: str | os.PathLike,
    revision: str | None = None,
    token: str | None = None,
    streaming: bool = False,
    overwrite: bool = False,
) -> ExportResult:
    """Rebuild ``source``'s own files from the build at ``location`` into ``output``, replacing it on success
    (a folder convhub did not write only with ``overwrite``: see ``staging.check_output``)."""
    module = exporter(source)
    check_output(Path(output), overwrite, inputs=[location])
    build = open_build(location, revision, token, streaming)
    build.require(SESSIONS)
    files = write_atomically(
        Path(output), lambda staging: module.write_files(build, staging), overwrite, inputs=[location]
    )
    return ExportResult(source, build.location, Path(output), files)


def write_atomically(
    output: Path, write: Callable[[Path], list[str]], overwrite: bool = False, inputs: Iterable = ()
) -> list[str]:
    """Run ``write(staging)`` in a hidden folder beside ``output``, then rename it into place."""
    with staged_folder(output, overwrite, inputs) as staging:
        files = write(staging)
    return sorted(files)


# -- comparing ---------------------------------------------------------------------------------------


def differences(original: Any, exported: Any, path: str = "$", limit: int = 20) -> list[str]:
    """Where two JSON values differ, types included (``2022`` ≠ ``"2022"`` ≠ ``2022.0``, ``1`` ≠ ``true``).

    Object key order is not compared (JSON objects are unordered); list order is. Returns up to ``limit``
    paths with what differs there; an empty list means equal as JSON values.
    """
    found: list[str] = []
    _diff(original, exported, path, found, limit)
    return found


def _diff(a: Any, b: Any, path: str, found: list[str], limit: int) -> None:
    if len(found) >= limit:
        return
    if type(a) is not type(b):
        found.append(f"{path}: {type(a).__name__} {_short(a)} != {type(b).__name__} {_short(b)}")
    elif isinstance(a, dict):
        for key in a.keys() | b.keys():
            if key not in b:
                found.append(f"{path}.{key}: missing from the export")
            elif key not in a:
                found.append(f"{path}.{key}: not in the original")
            else:
                _diff(a[key], b[key], f"{path}.{key}", found, limit)
    elif isinstance(a, list):
        if len(a) != len(b):
            found.append(f"{path}: {len(a)} items != {len(b)} items")
        for index, (x, y) in enumerate(zip(a, b, strict=False)):
            _diff(x, y, f"{path}[{index}]", found, limit)
    elif a != b or (isinstance(a, float) and repr(a) != repr(b)):
        found.append(f"{path}: {_short(a)} != {_short(b)}")


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


# -- command line --------------------------------------------------------------------------------------


def add_arguments(parser) -> None:
    parser.add_argument("source", choices=registry.names(), help="the source the build was made from")
    parser.add_argument(
        "--from",
        dest="location",
        required=True,
        help="a folder convhub build wrote (a local path, or a URL: hdfs://, s3a://), or a Hub dataset repo id "
        "(org/name) it was pushed to",
    )
    parser.add_argument(
        "--output", required=True, type=local_output, help="the folder to write the source files into"
    )
    parser.add_argument("--revision", help="a branch, tag or commit of the Hub repo")
    parser.add_argument("--token", help="a Hugging Face token (default: HF_TOKEN or the stored login)")
    parser.add_argument(
        "--streaming", action="store_true", help="stream the Hub repo's Parquet instead of downloading it"
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace OUTPUT even if convhub did not write it (never '.', '/', the home folder or an input)",
    )


def run(args) -> int:
    from convhub.publish.hub_errors import report

    try:
        result = export_source(
            args.source, args.location, args.output, args.revision, args.token, args.streaming, args.overwrite
        )
    except ExportError as error:
        return report("export", error, args.token)
    print(f"{result.source}: {result.location} → {result.output}")
    for name in result.files:
        print(f"  {name}")
    return 0
