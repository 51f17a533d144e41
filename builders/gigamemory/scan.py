"""Pass 1's read of a whole file into prepared lines (:mod:`builders.gigamemory.cut`), in file order.

A ``.gz`` is read line by line. A plain file is memory-mapped: each line is cut where it lies (its dialogue is
never copied), a dialogue span seen before is known by a cheap key (its length and the crc32 of its ends) and
one byte comparison, each distinct span is parsed and hashed once, in this process or, for a large file, in
``processes`` workers or an engine's tasks (Spark's executors), and the pages already scanned are released.

This is where pass 1's speed is bought, for the bench target "``sessions`` at least as fast as
``load_dataset('json')``": 1.01x with one process and 1.36x with two on the 1 GB input (2026-11-24). A
restructure that read every file line by line, without the map, the key and the workers, made that build
0.86x as fast with one process and 0.79x with two (reverted in 98c901f). The grouping of the prepared lines
is :mod:`builders.gigamemory.index`.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from builders.gigamemory.cut import (
    PreparedLine,
    prepare_line,
    prepare_whole_line,
    span_dialogue_digest,
    split_line,
    take_cut,
    usable_id,
)
from builders.gigamemory.read import iter_lines
from convhub.storage.folders import open_url

#: A plain file smaller than this has its dialogues digested in-process whatever ``processes`` says.
PARALLEL_INDEX_BYTES = 32 * 2**20
#: Bytes at each end of a span that key it (with its length) before a byte-for-byte comparison.
SPAN_KEY_BYTES = 4096
#: Span bytes per engine task: a task per dialogue (~650 KB) would cost Spark more to schedule than to run.
ENGINE_TASK_BYTES = 32 * 2**20

#: An engine's map: ``run(function, tasks)`` is ``[function(task) for task in tasks]``, run where the engine runs
#: its tasks (``SparkEngine.map``), results in the tasks' order.
TaskRunner = Callable[[Callable, list], list]


def prepared_lines(
    path, processes: int, run: TaskRunner | None = None, url: str | None = None
) -> Iterator[PreparedLine]:
    """Every line prepared, in file order.

    A ``.gz`` is read line by line. A plain file is mapped: each line is cut where it lies (no copy of
    its dialogue), and each distinct dialogue span is parsed and hashed once: in-process or, for a large
    file, in ``processes`` workers, or in an engine's tasks with ``run``, which read ``url`` when given (``path``
    is then this machine's copy of it) and else ``path`` (a shared filesystem on a cluster).
    """
    if str(path).endswith(".gz"):
        digests: dict[str, str] = {}
        for number, offset, raw in iter_lines(path):
            yield prepare_line(path, number, offset, raw, digests=digests)
        return
    mapped = _map(path)
    if mapped is None:
        return
    prepared: list[PreparedLine] = []
    firsts: list[PreparedLine] = []  # the first line of each distinct dialogue span, in file order
    jobs = _scan_mapped(path, mapped, prepared, firsts)
    large = len(mapped) >= PARALLEL_INDEX_BYTES
    if large and run is not None:
        if url is not None:
            jobs = ((url, start, length) for _, start, length in jobs)
        digested = [digest for task in run(_digest_spans_at, _engine_tasks(jobs)) for digest in task]
    elif large and processes > 1:
        import multiprocessing

        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        with multiprocessing.get_context(method).Pool(processes) as pool:
            # the pool takes jobs from the scan (in its task thread) as the scan finds them
            digested = list(pool.imap(_digest_span_at, jobs))
    else:
        digested = []
        with memoryview(mapped) as view:
            for _, start, length in jobs:  # each span just scanned: still in memory
                digested.append(_span_digest(view[start : start + length]))
                _release(mapped, start, start + length)
    for item, (digest, span_sha256) in zip(firsts, digested, strict=True):
        item.digest, item.span_sha256 = digest, span_sha256
    for position, item in enumerate(prepared):
        if item.span_first is not None:
            first = firsts[item.span_first]
            if first.digest is None:  # not one float-free JSON value: the whole line says what it is
                prepared[position] = _prepare_whole_mapped_line(path, mapped, item)
                continue
            item.digest, item.span_sha256 = first.digest, first.span_sha256
            item.span_first = None
    del firsts
    yield from prepared


def _map(path):
    """The plain file's bytes, mapped read-only (None for an empty file). Never closed explicitly: the
    mapping goes with its last reference, so a view still held by a traceback cannot make it fail."""
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            return None
        return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)


def _lines_of(mapped) -> Iterator[tuple[int, int, int]]:
    """(1-based line number, start, end) of every line, its end without ``\\r`` / ``\\n`` (as iter_lines)."""
    size = len(mapped)
    position = number = 0
    while position < size:
        newline = mapped.find(b"\n", position)
        stop = size if newline == -1 else newline
        end = stop
        while end > position and mapped[end - 1] == 13:  # \r
            end -= 1
        number += 1
        yield number, position, end
        position = stop + 1


def _blank(mapped, start: int, end: int) -> bool:
    """``not raw.strip()`` for the line ``mapped[start:end]``, without copying a long line."""
    if mapped[start : min(end, start + 64)].strip():
        return False
    return not mapped[start:end].strip()


def _prepare_mapped_line(path, mapped, number: int, start: int, end: int) -> PreparedLine:
    """A line of a mapped file: cut where it lies; its digest comes once the scan is done (:func:`prepared_lines`)."""
    bom = number == 1 and mapped[start : start + 3] == b"\xef\xbb\xbf"
    if bom:
        start += 3
    prepared = PreparedLine(number, start, end - start, None, None, bom=bom)
    if _blank(mapped, start, end):
        prepared.blank = True
        return prepared
    cut = split_line(mapped, start, end)
    if cut is not None and usable_id(cut[0]):
        take_cut(prepared, *cut)
        return prepared
    prepare_whole_line(path, prepared, mapped[start:end], drop_raw=True)
    return prepared


def _prepare_whole_mapped_line(path, mapped, cut: PreparedLine) -> PreparedLine:
    """A cut line prepared again as a whole line (its span was not one float-free JSON value)."""
    again = PreparedLine(cut.number, cut.offset, cut.length, None, None, bom=cut.bom)
    prepare_whole_line(path, again, mapped[cut.offset : cut.offset + cut.length], drop_raw=True)
    return again


def _scan_mapped(path, mapped, prepared: list[PreparedLine], firsts: list[PreparedLine]) -> Iterator[tuple]:
    """Prepare every line of a mapped file into ``prepared``; yield (path, offset, length) of each span
    not seen before, as it is found (its line appended to ``firsts``)."""
    spans = _SpanPlaces()
    with memoryview(mapped) as view:
        for number, start, end in _lines_of(mapped):
            item = _prepare_mapped_line(path, mapped, number, start, end)
            prepared.append(item)
            if (
                item.span is not None
                and item.digest is None
                and _place_span(mapped, view, item, firsts, spans)
            ):
                yield path, item.offset + item.span[0], item.span[1] - item.span[0]
            _release(mapped, start, end + 1)


@dataclass
class _SpanPlaces:
    """Where pass 1 finds the first line of a span's bytes, in ``firsts``: in time linear in the spans.

    ``by_key`` maps a cheap key (length, crc32 of the first and of the last ``SPAN_KEY_BYTES``) to the
    first span with that key; a span with a taken key is compared with that one span only, and when it
    differs its full sha256 looks it up in ``by_sha256``. So a line costs at most one comparison and one
    hash, however many distinct spans share a key (pairwise comparison made thousands of such lines
    quadratic). The first span of a key is never in ``by_sha256``: the comparison finds its copies.
    """

    by_key: dict[tuple, int] = field(default_factory=dict)
    by_sha256: dict[str, int] = field(default_factory=dict)


def _same_bytes(mapped, view, first_start: int, start: int, length: int) -> bool:
    """Whether ``mapped[start:start + length]`` equals the span at ``first_start`` (a search bounded to
    the span's own length is one comparison, at memcmp speed)."""
    same = mapped.find(view[first_start : first_start + length], start, start + length) == start
    _release(mapped, first_start, first_start + length)
    return same


def _full_sha256(span) -> str:
    """The sha256 of a span's bytes: what tells apart spans of one cheap key."""
    return hashlib.sha256(span).hexdigest()


def _place_span(mapped, view, item: PreparedLine, firsts: list[PreparedLine], spans: _SpanPlaces) -> bool:
    """Set ``item.span_first`` to the place in ``firsts`` of the first line with the same span bytes;
    append ``item`` (and return True) when its span is new.

    A dialogue seen again costs one comparison with the first span of its key, no hash and no parse; a
    different span with the same key costs one sha256 (see :class:`_SpanPlaces`).
    """
    start, end = item.offset + item.span[0], item.offset + item.span[1]
    key = (
        end - start,
        zlib.crc32(view[start : min(end, start + SPAN_KEY_BYTES)]),
        zlib.crc32(view[max(start, end - SPAN_KEY_BYTES) : end]),
    )
    index = spans.by_key.get(key)
    if index is None:
        spans.by_key[key] = len(firsts)
    else:
        first = firsts[index]
        if _same_bytes(mapped, view, first.offset + first.span[0], start, end - start):
            item.span_first = index
            return False
        sha256 = _full_sha256(view[start:end])
        index = spans.by_sha256.get(sha256)
        if index is not None:
            item.span_first = index
            return False
        spans.by_sha256[sha256] = len(firsts)
    item.span_first = len(firsts)
    firsts.append(item)
    return True


_PAGE = mmap.PAGESIZE
_DONTNEED = getattr(mmap, "MADV_DONTNEED", None)


def _release(mapped, start: int, end: int) -> None:
    """Unmap the pages of ``mapped[start:end]`` from this process (they stay in the page cache and come
    back on the next read): a whole-file pass must not count the file in its resident memory.

    Bench target: peak memory at most 1 GiB. The 1 GB input's ``sessions`` build peaked at 316 MiB with this
    and 1,163 MiB without it, with one process (484 and 1,160 MiB with two; 2026-11-24)."""
    if _DONTNEED is None:
        return
    start -= start % _PAGE
    end = min(end, len(mapped))
    if end > start:
        mapped.madvise(_DONTNEED, start, end - start)


def _span_digest(span) -> tuple[str | None, str]:
    """(:func:`span_dialogue_digest` of a span's bytes, the sha256 of the bytes)."""
    return span_dialogue_digest(span), hashlib.sha256(span).hexdigest()


def _digest_span_at(job: tuple) -> tuple[str | None, str]:
    """:func:`_span_digest` of ``length`` bytes at ``offset`` of a plain file (in a worker)."""
    path, offset, length = job
    with open(path, "rb") as handle:
        return _span_digest(os.pread(handle.fileno(), length, offset))


def _engine_tasks(jobs: Iterator[tuple]) -> list[list[tuple]]:
    """The scan's span jobs in runs of about ``ENGINE_TASK_BYTES``, in order: one engine task each."""
    tasks: list[list[tuple]] = []
    size = ENGINE_TASK_BYTES  # the first job opens the first task
    for job in jobs:
        if size >= ENGINE_TASK_BYTES:
            tasks.append([])
            size = 0
        tasks[-1].append(job)
        size += job[2]
    return tasks


def _digest_spans_at(jobs: list[tuple]) -> list[tuple[str | None, str]]:
    """:func:`_digest_span_at` of each job of one engine task, in order; a file at a URL is opened once for the
    task, each span a range read."""
    if "://" not in str(jobs[0][0]):
        return [_digest_span_at(job) for job in jobs]
    digests = []
    with open_url(jobs[0][0]) as handle:
        for _, offset, length in jobs:
            handle.seek(offset)
            digests.append(_span_digest(handle.read(length)))
    return digests
