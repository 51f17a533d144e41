"""ConvLab-3 unified datasets: MultiWOZ, SGD, Taskmaster, CamRest, WOZ, KVRET, CrossWOZ... in one format.

Each ConvLab dataset is a ``subset``. Input, per subset, in this order of preference:
``DIR/<name>/data.zip``, its extracted ``DIR/<name>/data/`` folder, or ``DIR/<name>/dummy_data.json`` (the
ten-dialogue sample ConvLab ships: dialogues only, no ontology or database). ``DIR`` may also be one
dataset's own folder. Without ``--data-dir`` each subset's ``data.zip`` is downloaded from the Hub.

``dialogues.json`` is never loaded whole: the main process scans it once (one dialogue in memory at a
time) to learn each dialogue's split and byte range, and each shard is a list of byte ranges that one
worker reads with forward seeks, so ``num_proc`` workers share a MultiWOZ-sized file. A large
``dialogues.json`` inside a ``data.zip`` is inflated to a temporary file by a child process while the
scan reads it (on a second core): a build's worker or a stream's shard then seeks straight to its
dialogues instead of re-inflating the member from its start for every shard.
"""

from __future__ import annotations

import atexit
import bisect
import contextlib
import io
import itertools
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unicodedata
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any, ClassVar

import datasets
from convhub import schema
from convhub.base import ConversationBuilder
from convhub.convlab import parse
from convhub.errors import Notes, Reject, SourceError, raise_error
from convhub.views import View
from datasets import Features, List, Value

URL = "https://huggingface.co/datasets/ConvLab/{name}/resolve/main/data.zip"
#: The ConvLab-3 unified datasets convhub has checked (their dummy_data.json parse in the tests).
DEFAULT_SUBSETS = (
    "camrest",
    "crosswoz",
    "dailydialog",
    "kvret",
    "metalwoz",
    "multiwoz21",
    "sgd",
    "sgd1",
    "sgd2",
    "sgd3",
    "sgd4",
    "sgd5",
    "tm1",
    "tm2",
    "tm3",
    "woz",
)
#: At most this many dialogues per shard; a split of ``2 * MIN_DIALOGUES_PER_SHARD`` dialogues or more is
#: cut into an even number of shards of about equal bytes, so that ``num_proc=2`` gives both workers
#: work on every split (the shards do not depend on ``num_proc``: the rows and their order never do).
DIALOGUES_PER_SHARD = 1000
MIN_DIALOGUES_PER_SHARD = 100
#: A zipped ``dialogues.json`` at least this large is copied out during the index scan (see above).
EXTRACT_MIN_BYTES = 8 << 20
SPLIT_ORDER = ("train", "validation", "test")
SUBSET_NAME = re.compile(r"^[\w.-]+$")
DIALOGUES, ONTOLOGY = "dialogues.json", "ontology.json"
DUMMY = "dummy_data.json"


@dataclass(frozen=True)
class SubsetInput:
    """Where one ConvLab dataset is: a ``data.zip``, an extracted ``data/`` folder, or a ``dummy_data.json``."""

    name: str
    kind: str  # "zip" | "folder" | "dummy"
    path: str

    def label(self, member: str) -> str:
        """The file an error message names."""
        if self.kind == "zip":
            return f"{self.path}:data/{member}"
        return self.path if self.kind == "dummy" else os.path.join(self.path, member)

    def members(self) -> list[str]:
        """Files of ``data/`` (relative names); a dummy input has only its dialogues."""
        if self.kind == "dummy":
            return [DIALOGUES]
        if self.kind == "zip":
            with self._archive() as archive:
                names = [name[len("data/") :] for name in archive.namelist() if name.startswith("data/")]
            return sorted(name for name in names if name and not name.endswith("/"))
        found = []
        for root, _, files in os.walk(self.path):
            found += [os.path.relpath(os.path.join(root, name), self.path) for name in files]
        names = sorted(name.replace(os.sep, "/") for name in found)
        _refuse_same_names(self.path, names, "files of data/")
        return names

    def zipped_size(self, member: str) -> int:
        """The uncompressed size of a zip member (0 when it is absent: opening it names the problem)."""
        with self._archive() as archive:
            try:
                return archive.getinfo(f"data/{member}").file_size
            except KeyError:
                return 0

    def _archive(self) -> zipfile.ZipFile:
        """The zip, opened only when its members are safe to read (see :func:`check_zip_members`)."""
        try:
            archive = zipfile.ZipFile(self.path)
        except (zipfile.BadZipFile, OSError, EOFError) as error:
            problem = f"not a readable zip archive (corrupt or truncated): {error}"
            raise SourceError(self.path, None, None, problem) from error
        try:
            check_zip_members(self.path, archive)
        except BaseException:
            archive.close()
            raise
        return archive

    @contextlib.contextmanager
    def open(self, member: str) -> Iterator[IO[bytes]]:
        if self.kind == "zip":
            with self._archive() as archive:
                try:
                    info = archive.getinfo(f"data/{member}")
                except KeyError:
                    raise SourceError(self.path, None, None, f"data/{member} is not in the archive") from None
                damaged = (zipfile.BadZipFile, zlib.error, EOFError, OSError)
                problem = "corrupt or truncated zip member: {}"
                try:
                    stream = archive.open(info)
                except damaged as error:
                    raise SourceError(self.label(member), None, None, problem.format(error)) from error
                with stream:
                    try:
                        yield stream
                    except damaged as error:
                        raise SourceError(self.label(member), None, None, problem.format(error)) from error
        else:
            with open(self.path if self.kind == "dummy" else os.path.join(self.path, member), "rb") as stream:
                yield stream

    def read_json(self, member: str) -> Any:
        with self.open(member) as stream:
            try:
                return json.load(stream)
            except (json.JSONDecodeError, UnicodeDecodeError) as error:
                raise SourceError(self.label(member), None, None, f"not valid UTF-8 JSON: {error}") from error

    def stat_key(self) -> tuple:
        stat = os.stat(self.path if self.kind != "folder" else os.path.join(self.path, DIALOGUES))
        return (self.kind, os.path.realpath(self.path), stat.st_size, stat.st_mtime_ns)


#: A zip member may inflate to at most ``ZIP_MAX_RATIO`` times its compressed size (ConvLab's own data.zip
#: members inflate 5 to 17 times; deflate's limit, reached by a file of one repeated byte, is about 1,030)
#: once it inflates to more than ``ZIP_RATIO_FREE_BYTES``: a zip bomb (a 1 MB data.zip of a gigabyte of
#: spaces) is refused before a byte of it is inflated. zipfile itself never inflates a member past the
#: size its header declares (it stops there and the CRC check fails), and a declared compressed size past
#: the archive's end is refused, so the declared sizes bound the work whatever the headers say.
ZIP_MAX_RATIO = 100
ZIP_RATIO_FREE_BYTES = 8 << 20


def _member_key(name: str) -> str:
    """The file a zip member name means once extracted anywhere: ``./data//X.json`` and ``data/x.json``
    (also as NFD, or on a case-insensitive file system) are one file."""
    name = unicodedata.normalize("NFC", name.replace("\\", "/")).casefold()
    return "/".join(part for part in name.split("/") if part not in ("", "."))


def _refuse_same_names(path: str, names: list[str], what: str) -> None:
    """Refuse two names that are one file once normalized (Unicode NFC/NFD, case): an export, a zip or a
    case-insensitive or normalizing file system (macOS) would keep only one of them."""
    seen: dict[str, str] = {}
    for name in names:
        other = seen.setdefault(_member_key(name), name)
        if other != name:
            raise SourceError(
                path,
                None,
                None,
                f"two {what} name one file once Unicode form and case are normalized: {other!r} and {name!r} "
                "(an export or another file system would keep only one): rename one",
            )


def check_zip_members(path: str, archive: zipfile.ZipFile) -> None:
    """Refuse a zip where two members name one file (zipfile would silently read the last) or a member
    would inflate past :data:`ZIP_MAX_RATIO` times its compressed size; the error names both members, or it."""
    seen: dict[str, tuple[int, str]] = {}
    try:  # (the open archive's own size: a path may be a URL a streaming build reads through fsspec)
        archive_size = os.fstat(archive.fp.fileno()).st_size
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        archive_size = math.inf
    for number, info in enumerate(archive.infolist(), 1):
        if info.header_offset + info.compress_size > archive_size:  # (so the ratio below is a true bound)
            raise SourceError(
                f"{path}:{info.filename}",
                None,
                None,
                f"declares {info.compress_size:,} compressed bytes, more than the archive's {archive_size:,}: "
                "a corrupt or forged zip header",
            )
        if info.is_dir():
            continue
        key = _member_key(info.filename)
        if key in seen:
            first_number, first = seen[key]
            raise SourceError(
                path,
                None,
                None,
                f"members {first!r} (entry {first_number}) and {info.filename!r} (entry {number}) name one "
                "file: convhub would read only one of them; keep one",
            )
        seen[key] = (number, info.filename)
        if info.file_size > ZIP_RATIO_FREE_BYTES and info.file_size > ZIP_MAX_RATIO * info.compress_size:
            raise SourceError(
                f"{path}:{info.filename}",
                None,
                None,
                f"declares {info.file_size:,} bytes inflated from {info.compress_size:,} compressed, more than "
                f"{ZIP_MAX_RATIO} times (a zip bomb?): convhub refuses to inflate it",
            )


#: Where ConvLab-3 keeps each dataset's README, which states that dataset's license.
UNIFIED_DATASETS_URL = "https://github.com/ConvLab/ConvLab-3/tree/master/data/unified_datasets"
CC_BY = ("cc-by-4.0", "https://creativecommons.org/licenses/by/4.0/")
CC_BY_SA = ("cc-by-sa-4.0", "https://creativecommons.org/licenses/by-sa/4.0/")
APACHE = ("apache-2.0", "https://www.apache.org/licenses/LICENSE-2.0")
#: Each dataset's own license as the "Licensing Information" of its README in ConvLab-3's unified_datasets says
#: (read 2026-11; sgd2 and sgd4 assumed the same as the other SGD-X variants). kvret's README says "TODO":
#: unknown. MetaLWOZ is under the Microsoft Research Data License Agreement, which has no Hub id.
SUBSET_LICENSES: dict[str, tuple[str, str]] = {
    "camrest": CC_BY,
    "crosswoz": APACHE,
    "dailydialog": ("cc-by-nc-sa-4.0", "https://creativecommons.org/licenses/by-nc-sa/4.0/"),
    "kvret": ("unknown", f"{UNIFIED_DATASETS_URL}/kvret"),
    "metalwoz": (
        "other",
        "https://msropendata-web-api.azurewebsites.net/licenses/2f933be3-284d-500b-7ea3-2aa2fd0f1bb2/view",
    ),
    "multiwoz21": APACHE,
    **{name: CC_BY_SA for name in ("sgd", "sgd1", "sgd2", "sgd3", "sgd4", "sgd5")},
    **{name: CC_BY for name in ("tm1", "tm2", "tm3")},
    "woz": APACHE,
}


#: Characters a card's ``data_files`` read as a pattern: a subset named ``x[1]`` would load ``x1``'s files.
PATTERN_CHARACTERS = frozenset("[]*?")


def local_input(folder: str) -> SubsetInput | None:
    """The best input in one dataset folder, or None when it holds no ConvLab data."""
    found = _input_in(folder, os.path.basename(os.path.normpath(folder)))
    wildcards = sorted(PATTERN_CHARACTERS.intersection(found.name)) if found else []
    if wildcards:
        raise SourceError(
            folder,
            None,
            None,
            f"the dataset folder name {found.name!r} holds {' '.join(wildcards)}, which the card's data_files "
            "read as a wildcard (its subset would load another's files): rename the folder",
        )
    return found


def _input_in(folder: str, name: str) -> SubsetInput | None:
    if os.path.isfile(os.path.join(folder, "data.zip")):
        return SubsetInput(name, "zip", os.path.join(folder, "data.zip"))
    if os.path.isfile(os.path.join(folder, "data", DIALOGUES)):
        return SubsetInput(name, "folder", os.path.join(folder, "data"))
    if os.path.isfile(os.path.join(folder, DUMMY)):
        return SubsetInput(name, "dummy", os.path.join(folder, DUMMY))
    return None


def find_local_inputs(data_dir: str, subsets: tuple[str, ...] | None) -> list[SubsetInput]:
    """Every ConvLab dataset under ``data_dir`` (or ``data_dir`` itself), restricted to ``subsets``."""
    if not os.path.isdir(data_dir):
        raise FileNotFoundError(f"ConvLab data dir {data_dir} is not a folder")
    itself = local_input(data_dir)
    if itself is not None:
        found = {itself.name: itself}
    else:
        found = {}
        for entry in sorted(os.listdir(data_dir)):
            if os.path.isdir(os.path.join(data_dir, entry)):
                candidate = local_input(os.path.join(data_dir, entry))
                if candidate is not None:
                    found[entry] = candidate
    _refuse_same_names(data_dir, sorted(found), "dataset folders")
    if subsets:
        missing = [name for name in subsets if name not in found]
        if missing:
            raise FileNotFoundError(
                f"no ConvLab dataset {', '.join(missing)} in {data_dir} "
                f"(looked for <name>/data.zip, <name>/data/{DIALOGUES}, <name>/{DUMMY}); found: {sorted(found)}"
            )
        return [found[name] for name in subsets]
    if not found:
        raise FileNotFoundError(f"no ConvLab dataset in {data_dir} (no <name>/data.zip, data/ or {DUMMY})")
    return list(found.values())


_INDEX_CACHE: dict[tuple, dict[str, list[tuple[int, int, int]]]] = {}
#: stat key of a zip → the temporary copy of its dialogues.json the scan wrote (removed at exit)
_EXTRACTED: dict[tuple, str] = {}


def dialogue_index(
    source: SubsetInput, reject: Reject = raise_error, streaming: bool = False, recover: bool = False
) -> dict[str, list[tuple[int, int, int]]]:
    """Split → byte ranges of its dialogues; scanned once per file and process (every config reuses it).

    Bad dialogues go to ``reject``; an index that rejected some is not kept, so each build reports them.
    A large zipped dialogues.json is copied out, by a child process beside the scan, for a build's
    workers, who then seek in the copy instead of inflating the member from its start for every shard;
    so is it for a stream's shards when a core is idle, not otherwise: on a busy machine writing it
    would delay the first row. An index kept without a copy is scanned again when a build wants one.
    """
    key = source.stat_key()
    # a build makes the copy anyway (a child beside the scan costs little more CPU, and overlaps when it
    # can); a stream only when a core is idle
    wanted = key not in _EXTRACTED and (not streaming or (key not in _INDEX_CACHE and spare_core()))
    copy = _extraction_target(source) if wanted else None
    if key not in _INDEX_CACHE or copy is not None:
        rejected = []

        def counting_reject(error, raw=None, scope="record", records=None):
            rejected.append(error)
            reject(error, raw, scope, records=records)

        index = _plain_index(source, copy)
        if index is None:  # anything unusual: the decoding scan, which reports each problem as it always did
            with source.open(DIALOGUES) as stream:
                if copy is None:
                    index = parse.index_dialogues(stream, source.label(DIALOGUES), counting_reject, recover)
                else:
                    with open(copy, "wb") as written:
                        tee = _Tee(stream, written)
                        index = parse.index_dialogues(tee, source.label(DIALOGUES), counting_reject, recover)
        if copy is not None:
            _EXTRACTED[key] = copy
        if rejected:
            return index
        _INDEX_CACHE[key] = index
    return _INDEX_CACHE[key]


def _plain_index(source: SubsetInput, copy: str | None) -> dict[str, list[tuple[int, int, int]]] | None:
    """:func:`parse.index_plain_list` of the dialogues, or None when it is not sure or reading fails.

    A large zipped file given a ``copy`` is inflated into it by a child Python process and read here as
    it grows, so that inflating and writing overlap the scan: the scan must end before the first shard
    (a stream's first row) starts, since a bad dialogue anywhere is reported before every row. On None
    the caller's decoding scan reads the file again and reports any failure exactly as before.
    """
    label = source.label(DIALOGUES)
    if copy is None:
        try:
            with source.open(DIALOGUES) as stream:
                return parse.index_plain_list(stream, label)
        except Exception:  # "not sure": the caller's scan meets the same failure and names it
            return None
    child, ready, notices = None, -1, -1
    try:  # (``copy`` exists, made empty by mkstemp: it can be opened here before the child writes)
        notices, ready = os.pipe()  # a byte each time the child has written a chunk
        child = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _INFLATE, source.path, f"data/{DIALOGUES}", copy, str(ready)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(ready,),
        )
        os.close(ready)
        ready = -1
        with open(copy, "rb") as growing:
            index = parse.index_plain_list(_GrowingFile(growing, notices), label)
        return index if child.wait() == 0 else None  # a failed CRC check is only known at the end
    except Exception:  # "not sure", as above
        return None
    finally:
        for descriptor in (ready, notices):
            if descriptor >= 0:
                os.close(descriptor)
        if child is not None:
            if child.poll() is None:
                child.kill()
            child.wait()


def spare_core() -> bool:
    """Whether a core is idle now: fewer runnable tasks than cores, counting this one (Linux's
    ``/proc/loadavg``; elsewhere the one-minute load average)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        with open("/proc/loadavg", encoding="ascii") as loadavg:
            runnable = int(loadavg.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return os.getloadavg()[0] + 1 < cores if hasattr(os, "getloadavg") else False
    return runnable < cores


#: The child of ``_plain_index``: argv = zip, member, file to write the member's bytes to, and the pipe to
#: which it writes a byte after each chunk (closed when it ends, however it ends).
_INFLATE = """
import os, sys, zipfile
path, member, target, ready = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
with zipfile.ZipFile(path) as archive, archive.open(member) as stream, open(target, "wb", buffering=0) as out:
    while chunk := stream.read(1 << 22):
        out.write(chunk)
        os.write(ready, b".")
"""


class _GrowingFile:
    """A file another process is still writing: a read at its current end waits for the writer's next
    notice (a byte on the pipe ``notices``), and ends when the writer has closed that pipe."""

    def __init__(self, file: IO[bytes], notices: int):
        self._file, self._notices = file, notices

    def read(self, size: int = -1) -> bytes:
        while True:
            data = self._file.read(size)
            if data:
                return data
            if not os.read(self._notices, 4096):
                return self._file.read(size)  # what it wrote before it ended (b"" at the end)


class _Tee:
    """A read-only stream that writes every byte it reads to ``copy``."""

    def __init__(self, stream: IO[bytes], copy: IO[bytes]):
        self.stream, self.copy = stream, copy

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read(size)
        self.copy.write(data)
        return data


_TEMP_DIR: list[str] = []  # [folder, pid of the process that made it]


def _extraction_target(source: SubsetInput) -> str | None:
    """Where to copy a large zipped dialogues.json while scanning it, or None (not zipped, or small)."""
    if source.kind != "zip" or source.zipped_size(DIALOGUES) < EXTRACT_MIN_BYTES:
        return None
    if not _TEMP_DIR or _TEMP_DIR[1] != os.getpid():
        folder = tempfile.mkdtemp(prefix="convhub-convlab-", dir=os.environ.get("CONVHUB_TMPDIR"))
        _TEMP_DIR[:] = [folder, os.getpid()]
        atexit.register(_remove_temp_dir, *_TEMP_DIR)
    handle, path = tempfile.mkstemp(dir=_TEMP_DIR[0], suffix=f"-{source.name}-{DIALOGUES}")
    os.close(handle)
    return path


def _remove_temp_dir(folder: str, pid: int) -> None:
    if os.getpid() == pid:  # a forked worker inherits the hook: only the process that made it removes it
        shutil.rmtree(folder, ignore_errors=True)


def shard_ranges(ranges: list[tuple[int, int, int]]) -> list[list[tuple[int, int, int]]]:
    """One split's dialogue ranges (file order) → consecutive shards; see ``DIALOGUES_PER_SHARD``.

    A split too small for two shards of ``MIN_DIALOGUES_PER_SHARD`` stays one shard (a second process
    would cost more than it saves). Otherwise the count is rounded up to an even number and the cuts fall
    where the running byte total crosses each equal share, so the shards take about equal time.
    """
    if len(ranges) < 2 * MIN_DIALOGUES_PER_SHARD:
        return [ranges] if ranges else []
    count = math.ceil(len(ranges) / DIALOGUES_PER_SHARD)
    count += count % 2
    running = list(itertools.accumulate(end - start for start, end, _ in ranges))  # bytes up to each
    total = running[-1]
    cuts = [0]
    for share in range(1, count):
        cut = bisect.bisect_left(running, total * share / count) + 1
        cuts.append(min(max(cut, cuts[-1] + 1), len(ranges) - (count - share)))
    cuts.append(len(ranges))
    return [ranges[low:high] for low, high in itertools.pairwise(cuts)]


def ordered_splits(splits) -> list[str]:
    known = [split for split in SPLIT_ORDER if split in splits]
    return known + [split for split in splits if split not in SPLIT_ORDER]


# -- views of their own ------------------------------------------------------------------------

_IDS = dict(schema.CONVERSATION_IDS)
GOAL = {
    "description": Value("string"),
    "inform": List(schema.STATE_SLOT),
    "request": List(schema.STATE_SLOT),
}


def _loads(text: str | None) -> Any:
    return json.loads(text) if text else {}


def _slots(table: Any) -> list[dict]:
    """``{domain: {slot: value}}`` of a goal → typed slots; a non-string value is given as JSON text."""
    if not isinstance(table, dict):
        return []
    return [
        {"domain": domain, "slot": slot, "value": value if isinstance(value, str) else schema.to_json(value)}
        for domain, slots in table.items()
        if isinstance(slots, dict)
        for slot, value in slots.items()
    ]


def dialogue_rows(record: dict) -> Iterator[dict]:
    """ConvLab's dialogue-level fields typed: ``original_id``, ``domains``, ``goal`` and every ``db_results``."""
    extra = _loads(record["extra"])
    goal = extra.get("goal")
    domains = extra.get("domains")
    original_id = extra.get("original_id")
    turns = [turn for session in record["sessions"] for turn in session["turns"]]
    yield {
        **{name: record[name] for name in schema.CONVERSATION_IDS},
        "original_id": None if original_id is None else str(original_id),
        "domains": [d for d in domains if isinstance(d, str)] if isinstance(domains, list) else [],
        "goal": (
            {
                "description": goal.get("description") if isinstance(goal.get("description"), str) else None,
                "inform": _slots(goal.get("inform")),
                "request": _slots(goal.get("request")),
            }
            if isinstance(goal, dict)
            else None
        ),
        "num_turns": len(turns),
        "db_results": [row for turn_index, turn in enumerate(turns) for row in _db_results(turn, turn_index)],
    }


def _db_results(turn: dict, turn_index: int) -> Iterator[dict]:
    """One entry per entity a system turn's ``db_results`` (``{domain: [entity]}``) lists."""
    results = _loads(turn["extra"]).get("db_results")
    if not isinstance(results, dict):
        return
    for domain, entities in results.items():
        for rank, entity in enumerate(entities if isinstance(entities, list) else []):
            yield {
                "turn_id": turn["turn_id"],
                "turn_index": turn_index,
                "domain": domain,
                "rank": rank,
                "entity": schema.to_json(entity),
            }


DB_RESULT = {
    "turn_id": Value("string"),
    "turn_index": Value("int32"),
    "domain": Value("string"),
    "rank": Value("int32"),
    "entity": schema.json_text(),
}
DIALOGUES_VIEW = View(
    "dialogues",
    Features(
        {
            **_IDS,
            "original_id": Value("string"),
            "domains": List(Value("string")),
            "goal": GOAL,
            "num_turns": Value("int32"),
            "db_results": List(DB_RESULT),
        }
    ),
    "One row per dialogue: ConvLab's original_id, domains, user goal (description, inform, request) and the "
    "database entities its system turns' db_results list, typed.",
    dialogue_rows,
)
ONTOLOGY_VIEW = View(
    "ontology",
    Features(
        {
            "subset": Value("string"),
            "domains": List(
                {
                    "name": Value("string"),
                    "description": Value("string"),
                    "slots": List(
                        {
                            "name": Value("string"),
                            "description": Value("string"),
                            "is_categorical": Value("bool"),
                            "possible_values": List(Value("string")),
                        }
                    ),
                }
            ),
            "intents": List({"name": Value("string"), "description": Value("string")}),
            "dialogue_acts": List(
                {
                    "type": Value("string"),
                    "intent": Value("string"),
                    "domain": Value("string"),
                    "slot": Value("string"),
                    "user": Value("bool"),
                    "system": Value("bool"),
                    "raw": Value("string"),
                }
            ),
            "state": List(schema.STATE_SLOT),
            "extra": schema.json_text(),
        }
    ),
    "One row per dataset: its ontology (domains and slots, intents, dialogue-act inventory, full state).",
)
DATABASE_VIEW = View(
    "database",
    Features(
        {
            "subset": Value("string"),
            "file": Value("string"),
            "key": Value("string"),
            "domain": Value("string"),
            "entity_index": Value("int32"),
            "entity": schema.json_text(),
        }
    ),
    "One row per database entity, for the datasets that ship database files in data.zip.",
)


class ConvLabBuilder(ConversationBuilder):
    SOURCE = "convlab"
    HUB_NAME = "convlab-unified"
    PRETTY_NAME = "ConvLab-3 unified datasets (convhub unified)"
    LICENSE = "other"
    LANGUAGES = ("en", "zh")
    HOMEPAGE = "https://github.com/ConvLab/ConvLab-3"
    DESCRIPTION = (
        "Task-oriented and chit-chat dialogue datasets in ConvLab-3's unified format, one subset each."
    )
    ROLE_MAPPING: ClassVar[dict[str, str]] = {"user": "user", "system": "assistant"}
    CITATION = """@inproceedings{zhu2023convlab3,
  title     = {{ConvLab-3}: A Flexible Dialogue System Toolkit Based on a Unified Data Format},
  author    = {Zhu, Qi and Geishauser, Christian and Lin, Hsien-chin and van Niekerk, Carel and Peng, Baolin and
               Zhang, Zheng and Feng, Shutong and Heck, Michael and Lubis, Nurul and Wan, Dazhen and Zhu, Xiaochen and
               Gao, Jianfeng and Ga{\\v{s}}i{\\'c}, Milica and Huang, Minlie},
  booktitle = {Proceedings of the 2023 Conference on Empirical Methods in Natural Language Processing:
               System Demonstrations},
  year      = {2023}
}"""
    EXTRA_VIEWS = (DIALOGUES_VIEW, ONTOLOGY_VIEW, DATABASE_VIEW)
    SUBSET_CONFIGS = True
    DEFAULT_SUBSETS = DEFAULT_SUBSETS

    @classmethod
    def subset_licenses(cls, subsets: list[str]) -> dict[str, tuple[str, str]]:
        """Each subset's own license; a dataset ConvLab does not publish (one of your own) is unknown."""
        return {name: SUBSET_LICENSES.get(name, ("unknown", UNIFIED_DATASETS_URL)) for name in subsets}

    @classmethod
    def card_license(cls, subsets: list[str]) -> dict[str, str]:
        """The subsets' one license when they share it, else ``other`` pointing at the per-subset table."""
        ids = {license_id for license_id, _ in cls.subset_licenses(subsets).values()}
        if len(ids) == 1 and ids != {"other"}:
            return {"license": ids.pop()}
        return {
            "license": "other",
            "license_name": "convlab-per-dataset",
            "license_link": UNIFIED_DATASETS_URL,
        }

    @classmethod
    def card_source_datasets(cls, subsets: list[str]) -> list[str]:
        """ConvLab publishes each default dataset on the Hub as ``ConvLab/<name>``."""
        return [
            f"extended|ConvLab/{name}" if name in DEFAULT_SUBSETS else f"extended|other-{name}"
            for name in subsets
        ]

    def inputs(self, dl_manager) -> list[SubsetInput]:
        subsets = self.config.subsets
        for name in subsets or ():
            if not SUBSET_NAME.match(name):
                raise ValueError(f"ConvLab subset name {name!r} is not a plain dataset name")
        if self.config.data_dir:
            return find_local_inputs(self.config.data_dir, subsets)
        return [
            SubsetInput(name, "zip", dl_manager.download(URL.format(name=name)))
            for name in subsets or DEFAULT_SUBSETS
        ]

    def shards(self, dl_manager):
        inputs = self._listable(self.inputs(dl_manager))
        if self.config.name == ONTOLOGY_VIEW.name:
            return {
                "train": [
                    {"input": source, "table": "ontology"}
                    for source in inputs
                    if ONTOLOGY in source.members()
                ]
            }
        if self.config.name == DATABASE_VIEW.name:
            return {
                "train": [
                    {"input": source, "table": "database"} for source in inputs if database_files(source)
                ]
            }
        by_split: dict[str, list[dict]] = {}
        streaming = isinstance(dl_manager, datasets.StreamingDownloadManager)
        for source in inputs:
            try:
                recover = self.config.on_bad_record == "skip"  # read on after a break in the list
                index = dialogue_index(source, self.reject, streaming=streaming, recover=recover)
            except SourceError as error:  # an unreadable file: with --on-bad-record skip, the others go on
                self.reject(error, None, scope="file")
                continue
            first = True
            copy = _EXTRACTED.get(source.stat_key())
            for split in ordered_splits(index):
                for ranges in shard_ranges(index[split]):
                    shard = {"input": source, "ranges": ranges, "first": first, "copy": copy}
                    by_split.setdefault(split, []).append(shard)
                    first = False
        return {split: by_split[split] for split in ordered_splits(by_split)}

    def _listable(self, inputs: list[SubsetInput]) -> list[SubsetInput]:
        """The inputs whose files can be listed; a corrupt data.zip is an error (skipped under skip)."""
        listable = []
        for source in inputs:
            try:
                source.members()
            except SourceError as error:
                self.reject(error, None, scope="file")
                continue
            listable.append(source)
        return listable

    def parse_shard(self, shard, notes: Notes):
        source: SubsetInput = shard["input"]
        if shard["first"] and source.kind == "dummy":
            notes.add("subset read from dummy_data.json (its first dialogues only, no ontology or database)")
        path = source.label(DIALOGUES)
        copy = shard.get("copy")
        with open(copy, "rb") if copy else source.open(DIALOGUES) as stream:
            for position, dialogue in parse.read_ranges(stream, shard["ranges"], path):
                counted = Notes()
                try:
                    record = parse.parse_dialogue(dialogue, source.name, counted, path, position)
                except SourceError as error:
                    self.reject(error, dialogue)
                    continue
                notes.update(counted)
                yield record

    def table_rows(self, view: View, shard):
        source: SubsetInput = shard["input"]
        if shard["table"] == "ontology":
            yield parse.ontology_row(source.read_json(ONTOLOGY), source.name, Notes(), source.label(ONTOLOGY))
            return
        domains = ontology_domains(source)
        for member in database_files(source):
            yield from parse.database_rows(
                source.read_json(member), source.name, member, parse.database_domain(member, domains)
            )


def database_files(source: SubsetInput) -> list[str]:
    """Every JSON file of ``data/`` besides the dialogues and the ontology: ConvLab's database files."""
    return [name for name in source.members() if name.endswith(".json") and name not in (DIALOGUES, ONTOLOGY)]


def ontology_domains(source: SubsetInput) -> list[str]:
    if ONTOLOGY not in source.members():
        return []
    domains = source.read_json(ONTOLOGY).get("domains")
    return list(domains) if isinstance(domains, dict) else []
