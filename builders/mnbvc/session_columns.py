"""The session-level values of MNBVC 多轮对话 conversations made on columns (``multiturn_tables``): ids, dates,
and the session's ``extra``, each equal to what ``multiturn.multiturn_record`` makes of one conversation.

Every function takes the conversations of a sorted table at once: per-conversation values as arrays (one
element a conversation), per-row values with ``starts`` (where each conversation's rows begin) and ``owner``
(each row's conversation). A list a session's ``extra`` holds (its 多轮序号, duplicates, gaps, files) is made
as Arrow lists joined into the JSON text ``schema.to_json`` writes for it.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from builders.mnbvc import dates
from builders.mnbvc.multiturn import MAX_MISSING_LISTED
from convhub import schema
from convhub.errors import Notes

_NULL_TEXT = pa.scalar(None, pa.string())


def session_keys(how: pa.Array, key: pa.Array) -> pa.Array:
    """``multiturn.session_key`` of each conversation: ``%``, ``#`` (and in a 会话, ``:``) escaped, in that
    order, so that an escape's own ``%`` is not escaped again (as ``str.translate`` does it at once)."""
    fallback = pc.replace_substring(pc.replace_substring(key, "%", "%25"), "#", "%23")
    session = pc.replace_substring(fallback, ":", "%3A")
    return pc.if_else(pc.equal(how, "会话"), session, pc.binary_join_element_wise(how, ":", fallback, ""))


def group_ids(source: pa.Array, session_id: pa.Array) -> pa.Array:
    """``multiturn.group_id`` of each conversation from its 来源 and its session id."""
    escaped = pc.replace_substring(pc.replace_substring(source, "%", "%25"), "/", "%2F")
    return pc.binary_join_element_wise(escaped, "/", session_id, "")


def dated_sessions(time: pa.Array, create_time: pa.Array, notes: Notes) -> dict[str, pa.Array]:
    """``date_time`` and ``timestamp`` of each session from its first row's 时间 and create_time, as
    ``parse.set_session_date`` sets them, its notes counted."""
    has_time = time.is_valid().to_numpy(zero_copy_only=False)
    absent = int(len(has_time) - has_time.sum())
    if absent:
        notes.add("时间 absent (session date_time from create_time)", absent)
    created = pc.fill_null(pc.not_equal(create_time, ""), False).to_numpy(zero_copy_only=False)
    fallback = ~has_time & created
    undated = ~has_time & ~fallback
    date_time = pc.if_else(pa.array(undated), _NULL_TEXT, pc.if_else(pa.array(has_time), time, create_time))
    millis = np.zeros(len(has_time), dtype=np.int64)
    known = np.zeros(len(has_time), dtype=bool)
    for rows, values, field in ((has_time, time, "时间"), (fallback, create_time, "create_time")):
        where = np.flatnonzero(rows)
        if len(where):
            millis[where], known[where] = _read(values.take(pa.array(where)), field, notes)
    timestamp = pa.array(millis, pa.int64(), mask=~known).cast(pa.timestamp("ms"))
    return {"date_time": without_validity(date_time), "timestamp": timestamp}


def without_validity(array: pa.Array) -> pa.Array:
    """``array`` without a validity bitmap when it holds no null, as ``from_pylist`` makes it: the bytes of a
    table are the card's ``num_bytes``, and ``if_else`` keeps a bitmap of all ones."""
    buffers = array.buffers()
    if array.null_count or buffers[0] is None:
        return array
    return pa.Array.from_buffers(array.type, len(array), [None, *buffers[1:]], 0, array.offset)


def _read(values: pa.Array, field: str, notes: Notes) -> tuple[np.ndarray, np.ndarray]:
    """(milliseconds, read) of each date string: ``dates.parse_date`` of each distinct one, its notes counted
    once for each session that has it."""
    encoded = values.dictionary_encode()
    distinct = encoded.dictionary.to_pylist()
    indices = encoded.indices.to_numpy(zero_copy_only=False)
    uses = np.bincount(indices, minlength=len(distinct))
    moments = []
    for raw, used in zip(distinct, uses.tolist(), strict=True):
        counted = Notes()
        moments.append(dates.parse_date(raw, field, counted))
        for kind, times in counted.items():
            notes.add(kind, times * used)
    read = pa.array(moments, pa.timestamp("ms"))
    millis = pc.fill_null(read.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
    return millis[indices], read.is_valid().to_numpy(zero_copy_only=False)[indices]


def joined(values: pa.Array, owner: np.ndarray, count: int) -> pa.Array:
    """The texts ``values`` of each conversation joined by commas (``owner``: each value's conversation, in
    order): the inside of a JSON list whose elements are these texts."""
    sizes = np.bincount(owner, minlength=count)
    offsets = pa.array(np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32), pa.int32())
    return pc.binary_join(pa.ListArray.from_arrays(offsets, values), ",")


def _piece(name: str, inside: pa.Array, present: np.ndarray) -> pa.Array:
    """``,"name":[inside]`` where ``present``, else empty: one optional key of a session's extra."""
    text = pc.binary_join_element_wise(f',"{name}":[', inside, "]", "")
    return pc.if_else(pa.array(present), text, "")


def _numbers(values: np.ndarray) -> pa.Array:
    """Integers as their JSON text."""
    return pa.array(values, pa.int64()).cast(pa.string())


def session_extras(
    table: pa.Table, starts: np.ndarray, owner: np.ndarray, how: pa.Array, names: list[str], notes: Notes
) -> pa.Array:
    """The session's ``extra`` of each conversation of a sorted table converted on columns (every 多轮序号 an
    integer, so the rows are in number order): {"grouped_by", "多轮序号", then "duplicate_多轮序号",
    "missing_多轮序号" or "missing_多轮序号_ranges", "files" when there are some}, with their notes."""
    count, rows = len(starts), len(owner)
    number = table.column("number").to_numpy()
    first = np.zeros(rows, dtype=bool)
    first[starts] = True
    previous = np.concatenate([[0], number[:-1]])
    duplicate = ~first & (number == previous)
    duplicated = duplicate & ~np.concatenate([[False], duplicate[:-1]])  # one row per duplicated number
    has_duplicate = np.bincount(owner[duplicated], minlength=count) > 0
    duplicates = joined(_numbers(number[duplicated]), owner[duplicated], count)
    # a gap before a row: numbers from max(previous number, 0) + 1 up to its own, none before the first number
    floor = np.where(first, 0, np.maximum(previous, 0))
    above = np.zeros(rows, dtype=np.int64)
    np.subtract(number, floor, out=above, where=number > floor)
    gap = above > 1
    clipped = np.minimum(above[gap] - 1, MAX_MISSING_LISTED + 1)
    missing = np.bincount(owner[gap], weights=clipped, minlength=count)
    has_gap = np.bincount(owner[gap], minlength=count) > 0
    listed = has_gap & (missing <= MAX_MISSING_LISTED)
    ranged = has_gap & ~listed
    gap_rows = np.flatnonzero(gap)
    listed_rows = gap_rows[listed[owner[gap_rows]]]
    sizes = number[listed_rows] - floor[listed_rows] - 1
    within = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    missing_numbers = np.repeat(floor[listed_rows] + 1, sizes) + within
    ranged_rows = gap_rows[ranged[owner[gap_rows]]]
    ranges = pc.binary_join_element_wise(
        "[", _numbers(floor[ranged_rows] + 1), ",", _numbers(number[ranged_rows] - 1), "]", ""
    )
    files, spread = _files(table, owner, count, names)
    extra = pc.binary_join_element_wise(
        '{"grouped_by":"',
        how,
        '","多轮序号":[',
        joined(table.column("sequence").combine_chunks(), owner, count),
        "]",
        _piece("duplicate_多轮序号", duplicates, has_duplicate),
        _piece(
            "missing_多轮序号",
            joined(_numbers(missing_numbers), np.repeat(owner[listed_rows], sizes), count),
            listed,
        ),
        _piece("missing_多轮序号_ranges", joined(ranges, owner[ranged_rows], count), ranged),
        _piece("files", files, spread),
        "}",
        "",
    )
    for kind, times in (
        ("multi-turn conversation with a duplicate 多轮序号 (all rows kept)", has_duplicate.sum()),
        ("multi-turn conversation with a gap in 多轮序号", has_gap.sum()),
        (
            f"multi-turn conversation missing over {MAX_MISSING_LISTED} 多轮序号 (gaps listed as ranges)",
            ranged.sum(),
        ),
        ("multi-turn conversation spread over several files", spread.sum()),
    ):
        if times:
            notes.add(kind, int(times))
    return extra


def _files(table: pa.Table, owner: np.ndarray, count: int, names: list[str]) -> tuple[pa.Array, np.ndarray]:
    """The files of each conversation as JSON texts joined, in the order its rows first name them, and whether
    it has more than one."""
    file_index = table.column("file_index").to_numpy().astype(np.int64)
    _, firsts = np.unique(owner * max(len(names), 1) + file_index, return_index=True)
    firsts.sort()
    spread = np.bincount(owner[firsts], minlength=count) > 1
    chosen = firsts[spread[owner[firsts]]]
    texts = pa.array([schema.to_json(name) for name in names], pa.string()).take(pa.array(file_index[chosen]))
    return joined(texts, owner[chosen], count), spread
