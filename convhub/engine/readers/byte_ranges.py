"""A member that is one large JSON list (ConvLab's), read by byte ranges so that ``num_proc`` workers share one
file: indexed once by group (:func:`index_list`), each group cut into shards of about equal bytes
(:func:`ranged_shards`, a source's ``shards``), each shard read back with forward seeks (:class:`ByteRanges`, its
``READER``).
"""

from __future__ import annotations

import atexit
import contextlib
import math
import os
import posixpath
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

from convhub.engine.inputs.file_sets import DataInput
from convhub.engine.readers.contract import Place
from convhub.engine.readers.exact_json import load_value
from convhub.engine.readers.json_list import CHUNK_BYTES, scan_json_array
from convhub.engine.runners.cuts import balanced_runs
from convhub.engine.runners.input_shards import Shard
from convhub.errors import Reject, SourceError, raise_error

Range = tuple[int, int, int]  # (start byte, end byte, position in the list) of one element
#: A zipped list at least this large is inflated to one copy before it is scanned.
EXTRACT_MIN_BYTES = 8 << 20
#: What the index needs of one element (value, position) → the group it goes to; raises a SourceError for a bad one.
GroupOf = Callable[[Any, int], str]

#: (stat key of the member) → (group → ranges, the copy of a large zipped member or None)
_INDEX_CACHE: dict[tuple, tuple[dict[str, list[Range]], str | None]] = {}


def indexed(
    source: DataInput,
    member: str,
    group_of: GroupOf,
    reject: Reject = raise_error,
    recover: bool = False,
    element: str = "element",
    key: str | None = None,
) -> tuple[dict[str, list[Range]], str | None]:
    """(group → the byte ranges of its elements, the copy to read them from) of the JSON list ``member``, scanned
    and copied once per file and process (the streams of several configs and a build after them scan and copy
    once). Bad elements go to ``reject``; an index that rejected some is not kept, so that each build reports them.

    A zipped member of ``EXTRACT_MIN_BYTES`` or more is first inflated to one temporary copy, which the scan and
    every shard then read: a zip member cannot seek, so each shard would otherwise inflate it again from its
    start, a cost that grows with the square of the file."""
    cache_key = source.stat_key(member)
    if cache_key in _INDEX_CACHE:
        return _INDEX_CACHE[cache_key]
    rejected = []

    def counting_reject(error, raw=None, scope="record", records=None):
        rejected.append(error)
        reject(error, raw, scope, records=records)

    copy = None
    if source.kind == "zip" and source.member_size(member) >= EXTRACT_MIN_BYTES:
        copy = _copy_path(f"{source.name}-{posixpath.basename(member)}")
        with source.open(member) as stream, open(copy, "wb") as written:
            shutil.copyfileobj(stream, written, 16 << 20)
    with opened(source, member, copy) as stream:
        index = index_list(stream, source.label(member), group_of, counting_reject, recover, element, key)
    if not rejected:
        _INDEX_CACHE[cache_key] = (index, copy)
    return index, copy


def opened(source: DataInput, member: str, copy: str | None) -> contextlib.AbstractContextManager[IO[bytes]]:
    """The member's stream: its copy where this process has it (a task elsewhere reads the member itself)."""
    return open(copy, "rb") if copy and os.path.exists(copy) else source.open(member)


def _copy_path(suffix: str) -> str:
    """A new file under ``$CONVHUB_TMPDIR`` (else the system's temporary folder), removed at this process's exit."""
    handle, path = tempfile.mkstemp(
        prefix="convhub-inputs-", suffix=f"-{suffix}", dir=os.environ.get("CONVHUB_TMPDIR")
    )
    os.close(handle)
    atexit.register(_remove_copy, path, os.getpid())
    return path


def _remove_copy(path: str, pid: int) -> None:
    # a forked worker inherits the hook: only the process that made the copy removes it
    if os.getpid() == pid:
        with contextlib.suppress(OSError):
            os.remove(path)


def index_list(
    stream: IO[bytes],
    path: str,
    group_of: GroupOf,
    reject: Reject = raise_error,
    recover: bool = False,
    element: str = "element",
    key: str | None = None,
    chunk_size: int = CHUNK_BYTES,
) -> dict[str, list[Range]]:
    """Group (``group_of(value, position)``) → the ranges of its elements, in file order, one chunk and one
    element in memory. A bad element (``group_of`` raises) goes to ``reject`` with its value (raising by
    default); where the list itself breaks, the rest of the file goes there once (scope ``file``), or, with
    ``recover``, the break as :func:`scan_json_array` hands it (``element`` and ``key``: its) and reading goes on.
    """
    groups: dict[str, list[Range]] = {}
    try:
        for start, end, position, value in scan_json_array(
            stream, path, chunk_size, reject if recover else None, element=element, key=key
        ):
            try:
                group = group_of(value, position)
            except SourceError as error:
                reject(error, value)
                continue
            groups.setdefault(group, []).append((start, end, position))
    except SourceError as error:  # the list breaks (a raising reject's own error passes on as it was)
        reject(error, None, "file")
    return groups


def read_ranges(stream: IO[bytes], ranges: Iterable[Range], path: str) -> Iterator[tuple[int, int, int, Any]]:
    """(start byte, end byte, position, value) for each byte range, as :func:`scan_json_array` gave them, read in
    file order with forward seeks only, values exactly ``json.loads``'s."""
    for start, end, position in sorted(ranges):
        stream.seek(start)
        yield start, end, position, load_value(stream.read(end - start), path, position)


def shard_ranges(ranges: list[Range], per_shard: int, min_per_shard: int) -> list[list[Range]]:
    """One group's ranges (file order) → consecutive shards of at most about ``per_shard`` elements.

    A group too small for two shards of ``min_per_shard`` stays one shard (a second process would cost more
    than it saves). Otherwise the count is rounded up to an even number, so that ``num_proc=2`` gives both
    workers work on every split, and cut by bytes (``balanced_runs``), so that they take about equal time. The
    shards never depend on ``num_proc``: the rows and their order never do.
    """
    if len(ranges) < 2 * min_per_shard:
        return [ranges] if ranges else []
    count = math.ceil(len(ranges) / per_shard)
    runs = balanced_runs([end - start for start, end, _ in ranges], count + count % 2, cut="after")
    return [ranges[run.start : run.stop] for run in runs]


def ranged_shards(
    inputs: Iterable[DataInput],
    member: str,
    group_of: Callable[[str], GroupOf],
    reject: Reject = raise_error,
    recover: bool = False,
    element: str = "element",
    key: str | None = None,
    sizes: tuple[int, int] = (1000, 100),
    order: Callable[[Iterable[str]], list[str]] = sorted,
) -> dict[str, list[Shard]]:
    """Group → its shards, input after input: each input's list ``member`` indexed (:func:`indexed`, with
    ``group_of(the file an error names)``; ``reject``, ``recover``, ``element``, ``key``: :func:`index_list`'s)
    and each group cut by :func:`shard_ranges` (``sizes``: its ``per_shard`` and ``min_per_shard``), groups in
    ``order``. A shard is a dict :class:`ByteRanges` reads: its ``input``, ``member``, ``ranges``, ``copy``,
    ``path`` (the file errors name) and ``first`` (whether it is its input's first)."""
    shards: dict[str, list[Shard]] = {}
    for source in inputs:
        path = source.label(member)
        try:
            index, copy = indexed(source, member, group_of(path), reject, recover, element, key)
        except SourceError as error:  # an unreadable file: with a skipping reject, the others go on
            reject(error, None, scope="file")
            continue
        first = True
        for group in order(index):
            for ranges in shard_ranges(index[group], *sizes):
                shard = {"input": source, "member": member, "ranges": ranges, "copy": copy, "path": path}
                shards.setdefault(group, []).append({**shard, "first": first})
                first = False
    return {group: shards[group] for group in order(shards)}


class ByteRanges:
    """The reader of a shard of :func:`ranged_shards` (elements of one JSON list ``member`` of an input, by
    their byte ranges), on any machine: the input is copied here where the driver's copy is not
    (``DataInput.here``). A place names the member's file (``path``) and the input's name (ConvLab's dataset);
    an error names an element by its position in the list. A break cannot happen here: :func:`ranged_shards`
    read the list whole."""

    def read(self, shard: str | dict[str, Any], reject: Reject | None = None) -> Iterator[tuple[Place, Any]]:
        if not isinstance(shard, dict):
            raise TypeError(f"a shard of ranged_shards expected, not {type(shard).__name__}")
        source, path, member = shard["input"].here(), shard["path"], shard["member"]
        with opened(source, member, shard.get("copy")) as stream:
            for start, end, position, value in read_ranges(stream, shard["ranges"], path):
                place = Place(path, source.name, position, position, start=start, end=end, member=member)
                value_box = [value]
                del value  # not held here while its record is converted and written
                yield place, value_box.pop()
