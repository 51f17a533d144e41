"""多轮对话: one row per question/answer pair; the rows of one conversation share a 来源 and a ``会话``.

A build regroups the rows of each conversation wherever they are, on either engine (``convhub.engine.grouping.group_by_key``):
``key_row`` gives each row its sort key and converts it, in the pass that reads the files; ``records_from_sorted``
turns a conversation's sorted rows into its record. A stream reads each file once: ``multiturn_runs`` regroups
only adjacent rows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any

from convhub import schema
from convhub.builders.mnbvc import turn_columns
from convhub.builders.mnbvc.extension import Extension, parse_extension
from convhub.builders.mnbvc.json_lines_builder import LineWarnings, Objects
from convhub.builders.mnbvc.parse import (
    MULTITURN,
    ConvertedPair,
    Warnings,
    as_text,
    conversation_record,
    convert_pair,
    require_pair,
    row_metadata,
    sequence_number,
    set_session_date,
    source_name,
    subset_wanted,
)
from convhub.engine.grouping import group_by_key
from convhub.engine.grouping.group_by_key import SortKey
from convhub.errors import Notes, Reject, raise_error

#: A gap in 多轮序号 of at most this many numbers is listed number by number (``missing_多轮序号``);
#: beyond, as [first, last] ranges (``missing_多轮序号_ranges``). The raw 多轮序号 of every row is kept either way.
MAX_MISSING_LISTED = 1000


def conversation_key(row: dict[str, Any], extension: Extension, file: str, line: int) -> tuple[str, str]:
    """(how, key) that groups the rows of one conversation: its ``会话`` when it has a value (an integer and its
    decimal string are one conversation), else the row's ``id`` (MNBVC's md5 of the whole source conversation),
    else the row alone. The 来源 is part of the group (``key_row``), so two producers' ``会话`` 1 never merge."""
    session = (extension.value or {}).get("会话")
    if session is not None and session != "":
        return "会话", as_text(session)
    if row.get("id") is not None and row.get("id") != "":
        return "id", as_text(row["id"])
    return "line", f"{file}:{line}"


#: What ``group_id`` escapes so that no two (来源, how, key) give one id (a %-escape, as in a URL): 来源 ends
#: at the first ``/``; a 会话 cannot spell the ``id:``/``line:`` prefix; no key holds the ``#N`` piece suffix.
_SOURCE_ESCAPES = str.maketrans({"%": "%25", "/": "%2F"})
_SESSION_ESCAPES = str.maketrans({"%": "%25", "#": "%23", ":": "%3A"})
_FALLBACK_ESCAPES = str.maketrans({"%": "%25", "#": "%23"})


def session_key(how: str, key: str) -> str:
    """The session id of a multi-turn conversation: its 会话, or ``id:``/``line:`` and the fallback key.

    Escaped as ``_SOURCE_ESCAPES`` says; a value without ``%``, ``#`` (and, in a 会话, ``:``) is itself.
    """
    if how == "会话":
        return key.translate(_SESSION_ESCAPES)
    return f"{how}:{key.translate(_FALLBACK_ESCAPES)}"


def group_id(source: str, how: str, key: str) -> str:
    """``来源/session key``: 来源 ``a/b`` with 会话 ``c`` is ``a%2Fb/c``, 来源 ``a`` with 会话 ``b/c`` is ``a/b/c``."""
    return f"{source.translate(_SOURCE_ESCAPES)}/{session_key(how, key)}"


def missing_ranges(numbers: Iterable[int]) -> list[tuple[int, int]]:
    """(first, last) of each run of integers from 1 to ``max(numbers)`` that ``numbers`` lacks: a walk over the
    sorted distinct numbers, whose cost follows the rows, not the numbers (a hostile 多轮序号 of 2**40)."""
    gaps, previous = [], 0
    for number in sorted(set(numbers)):
        if number > previous + 1:
            gaps.append((previous + 1, number - 1))
        previous = max(previous, number)
    return gaps


def multiturn_record(
    pairs: Iterable[ConvertedPair], source: str, how: str, key: str, conversation_id: str, notes: Notes
) -> dict[str, Any] | None:
    """One conversation of the 来源 ``source`` from its converted pairs, already in (多轮序号, file, line) order
    (each pair's own normalizations counted); None when there is none. Gaps and duplicates in ``多轮序号`` are
    counted and listed in the session's ``extra``; duplicate pairs are all kept, in file and line order.

    The pairs are read once, one at a time (``turn_columns.ConversationTurns``): a conversation of many tiny
    turns never holds all its pairs as Python values."""
    turns = turn_columns.ConversationTurns()
    numbers, sequences, files = [], [], {}
    opening = None  # the first pair: its date is the session's
    for pair in pairs:
        opening = pair if opening is None else opening
        rank, value, _ = pair.order
        if rank == 0:
            numbers.append(value)
        sequences.append(pair.sequence)
        files[pair.file] = None
        turns.add(pair)
    if opening is None:
        return None
    if how != "会话":
        notes.add(f"multi-turn row with an empty or missing 会话 (grouped by {how})", len(sequences))
    session_extra: dict[str, Any] = {"grouped_by": how, "多轮序号": sequences}
    duplicates = []
    if len(set(numbers)) < len(numbers):
        duplicates = sorted(number for number, count in Counter(numbers).items() if count > 1)
    gaps = missing_ranges(numbers)
    if duplicates:
        notes.add("multi-turn conversation with a duplicate 多轮序号 (all rows kept)")
        session_extra["duplicate_多轮序号"] = duplicates
    if gaps:
        notes.add("multi-turn conversation with a gap in 多轮序号")
        if sum(last - first + 1 for first, last in gaps) <= MAX_MISSING_LISTED:
            session_extra["missing_多轮序号"] = [n for first, last in gaps for n in range(first, last + 1)]
        else:
            notes.add(
                f"multi-turn conversation missing over {MAX_MISSING_LISTED} 多轮序号 (gaps listed as ranges)"
            )
            session_extra["missing_多轮序号_ranges"] = [[first, last] for first, last in gaps]
    if len(numbers) < len(sequences):
        notes.add("multi-turn row without an integer 多轮序号 (ordered after the numbered rows)")
    if len(files) > 1:
        notes.add("multi-turn conversation spread over several files")
        session_extra["files"] = list(files)
    session = schema.empty_session(session_key(how, key), turns.turns())
    set_session_date(session, opening.dated, "create_time", opening.create_time, notes)
    session["extra"] = schema.to_json(session_extra)
    return conversation_record(conversation_id, MULTITURN, source, [session], notes)


def multiturn_runs(
    objects: Objects, file: str, notes: Notes, subsets=None, reject: Reject = raise_error
) -> Iterator[dict[str, Any]]:
    """多轮对话 when streaming (a file is read once from its URL): each run of adjacent rows of one group, keyed and
    sorted as a build does, is a conversation. One whose rows are apart comes out in pieces (``#2``, ``#3``
    appended to the id, counted); rows spread over several files are joined only by a build."""
    keyed_rows = group_by_key.keyed_file_rows(objects, 0, partial(key_row, file, subsets=subsets), reject)
    pieces: Counter[str] = Counter()

    def piece_id(group: tuple[str, str, str]) -> str:
        conversation_id = group_id(*group)
        pieces[conversation_id] += 1
        if pieces[conversation_id] == 1:
            return conversation_id
        notes.add("streamed multi-turn conversation whose rows are not adjacent (emitted in pieces)")
        return f"{conversation_id}#{pieces[conversation_id]}"

    return records_from_sorted(group_by_key.adjacent_runs(keyed_rows), [file], notes, reject, piece_id)


# -- regrouped by an engine ------------------------------------------------------------------------------


def key_row(name: str, line: int, row: dict[str, Any], raw: bytes, subsets=None) -> group_by_key.Keyed | None:
    """(group, order, payload) of a wanted Q/A row, for an engine to regroup (``convhub.engine.grouping.group_by_key``).

    The group (来源, how, key) names the conversation; ``sequence_number`` orders its rows. A row that is not a
    Q/A row is refused here; one that ``convert_pair`` refuses travels as its error (``group_by_key.payload``), which
    ``records_from_sorted`` hands to ``reject`` alone, in conversation order.
    """
    require_pair(row, name, line)
    source = source_name(row)
    if not subset_wanted(subsets, MULTITURN, source):
        return None
    extension = parse_extension(row_metadata(row).get("扩展字段"))
    order = sequence_number(extension)
    group = (source, *conversation_key(row, extension, name, line))
    return group, order, group_by_key.payload(_converted_row, raw, name, line, row, extension, order)


#: The ``dated`` of a conversation's rows after its first, which ``multiturn_record`` does not read.
_NOT_FIRST: dict = {}


def _converted_row(name: str, line: int, row: dict, extension: Extension, order: tuple) -> tuple:
    """The row converted (``convert_pair``) with the normalizations it counted and the warnings it would log, as
    plain values: each row is converted once, in the pass that reads the files (its processes or Spark tasks)."""
    notes, problems = Notes(), []  # problems: its unreadable 扩展字段, logged later in conversation order
    warnings = lambda number, where, problem: problems.append(problem)  # noqa: E731
    converted = convert_pair(name, line, row, notes, warnings, extension, order)
    fields = (converted.sequence, converted.question, converted.extra, converted.answer, converted.dated)
    return (*fields, converted.create_time, tuple(notes.items()), tuple(problems))


def records_from_sorted(
    rows: Iterable[tuple[SortKey, bytes]],
    names: list[str],
    notes: Notes,
    reject: Reject = raise_error,
    conversation_id: Callable[[tuple], str] = lambda group: group_id(*group),
) -> Iterator[dict[str, Any]]:
    """Canonical records from (sort key, payload) pairs sorted by key (``group_by_key.grouped_rows``): one conversation
    per group (its id ``conversation_id(group)``), whichever engine brought its rows together; a refused row goes
    to ``reject`` alone, and its conversation is built from the others."""
    warnings = {name: Warnings(name) for name in names}
    counted = Notes()  # one conversation's normalizations, emptied for each
    for group, run in group_by_key.grouped_rows(rows, reject):
        counted.clear()
        pairs = _converted_pairs(run, names, warnings, counted)
        source, how, key = group
        record = multiturn_record(pairs, source, how, key, conversation_id(group), counted)
        if record is not None:
            notes.update(counted)
            yield record


def _converted_pairs(
    run: Iterable[tuple[tuple, Any]], names: list[str], warnings: dict[str, LineWarnings], counted: Notes
) -> Iterator[ConvertedPair]:
    """A conversation's (order, converted value) rows as ``ConvertedPair``s, one at a time; each row's
    normalizations go to ``counted`` and its unreadable ``扩展字段`` to its file's warnings as it is read."""
    first = True
    for (rank, value, text, file_index, line), converted in run:
        sequence, question, extra, answer, dated, create_time, row_notes, problems = converted
        name = names[file_index]
        for kind, count in row_notes:
            counted[kind] += count
        for problem in problems:
            warnings[name](line, "元数据.扩展字段", problem)
        if not first:  # only the first row's date is the session's: the others' are let go at once
            dated, create_time = _NOT_FIRST, None
        first = False
        yield ConvertedPair(name, (rank, value, text), sequence, question, extra, answer, dated, create_time)
