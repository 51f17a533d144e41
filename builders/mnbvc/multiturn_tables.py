"""MNBVC 多轮对话 conversations made on columns: a sorted table of keyed rows (``convhub.engine.keyed_columns``)
becomes a table of ``sessions`` rows with Arrow compute and numpy over all its conversations at once.

``multiturn.records_from_sorted`` is the reference: one dict record per conversation, Python per row. Here a
conversation whose rows were all converted on columns (``converted.values_of``) is made as the reference makes
it, field by field (``multiturn.multiturn_record``, ``parse.conversation_record``), the same values and the
same ``Notes``. A conversation with a row only Python converts exactly (a ``payload``) goes the reference's way
(``python_records``), in its place among the others; so do the warnings and the rejected rows, which only such
rows have. What Python still does per conversation: ``language.detect_language`` of its sample, which Arrow cuts
(``language_columns``), and reading each distinct first-row date once (``dates.parse_date``).

The tables given are slices of one table made per input table: a slice may keep a validity bitmap of all ones
where ``from_pylist`` of its rows alone would have none (equal values; a writer that joins tables copies them).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from builders.mnbvc import converted, multiturn, session_columns
from builders.mnbvc.language_columns import detect_languages
from builders.mnbvc.parse import ANSWER_SPEAKER, MULTITURN, QUESTION_SPEAKER, ConvertedPair, Warnings
from builders.mnbvc.turn_columns import TURN_TYPE
from convhub import schema
from convhub.engine import keyed, keyed_columns
from convhub.engine.arrow_structs import struct_array
from convhub.errors import Notes, Reject, raise_error

#: The ``sessions`` view's Arrow schema: the tables made here are of it.
SESSIONS_SCHEMA: pa.Schema = schema.SESSIONS_FEATURES.arrow_schema
_SESSION_TYPE: pa.StructType = SESSIONS_SCHEMA.field("sessions").type.value_type
_TURNS_TYPE: pa.ListType = _SESSION_TYPE.field("turns").type
_FORMAT_EXTRA = schema.to_json({"format": MULTITURN})


def grouped_tables(
    tables: Iterable[pa.Table], names: list[str], notes: Notes, reject: Reject = raise_error
) -> Iterator[dict | pa.Table]:
    """The ``sessions`` rows of sorted tables of whole conversations (``keyed_columns.whole_conversations``), in
    order: a table for each run of conversations converted on columns, a record (``python_records``) for each
    conversation with a payload row. ``names``: the files, by ``file_index``."""
    python = PythonConversations(names, notes, reject)
    for table in tables:
        if table.num_rows == 0:
            continue
        starts = keyed_columns.conversation_starts(table)
        bounds = np.append(starts, table.num_rows)
        held = table.column("payload").is_valid().to_numpy(zero_copy_only=False)
        by_python = np.add.reduceat(held.astype(np.int64), starts) > 0
        # the conversations converted on columns made at once, then cut around the others
        columnar = (
            table if not by_python.any() else table.filter(pa.array(np.repeat(~by_python, np.diff(bounds))))
        )
        made = sessions_table(columnar, names, notes) if columnar.num_rows else None
        begin = done = 0  # the first conversation not yet given, and the first row of ``made`` not yet given
        for conversation in [*np.flatnonzero(by_python).tolist(), len(starts)]:
            if conversation > begin and made is not None:
                yield made.slice(done, conversation - begin)
                done += conversation - begin
            if conversation < len(starts):
                low, high = int(bounds[conversation]), int(bounds[conversation + 1])
                yield from python.records(table.slice(low, high - low))
            begin = conversation + 1


class PythonConversations:
    """The reference's way for the conversations that need it: ``multiturn.records_from_sorted``'s loop over
    ``keyed_columns.payload_rows``, one conversation at a time between tables, with one ``Warnings`` per file for
    the whole call (as the reference keeps), so that a file's warnings stop at the same limit."""

    def __init__(self, names: list[str], notes: Notes, reject: Reject):
        self.names, self.notes, self.reject = names, notes, reject
        self.warnings = {name: Warnings(name) for name in names}

    def records(self, table: pa.Table) -> Iterator[dict]:
        """The record of the one conversation of ``table`` (none when every row of it is refused)."""
        rows = keyed_columns.payload_rows(table, converted.converted_of)
        yield from python_records(rows, self.names, self.notes, self.reject, self.warnings)


def python_records(rows, names, notes, reject, warnings) -> Iterator[dict]:
    """``multiturn.records_from_sorted``'s loop, line for line, with ``warnings`` (file name -> ``Warnings``)
    given: that function makes its own per call, and a call per conversation would restart each file's limit on
    warnings. (Its loop takes them as an argument, and this copy goes, when ``multiturn`` may change.)"""
    counted = Notes()
    for group, run in keyed.grouped_rows(rows, reject):
        pairs = []
        counted.clear()
        for (rank, value, text, file_index, line), row in run:
            sequence, question, extra, answer, dated, create_time, row_notes, problems = row
            name = names[file_index]
            for kind, count in row_notes:
                counted[kind] += count
            for problem in problems:
                warnings[name](line, "元数据.扩展字段", problem)
            if pairs:
                dated, create_time = multiturn._NOT_FIRST, None
            order = (rank, value, text)
            pairs.append(ConvertedPair(name, order, sequence, question, extra, answer, dated, create_time))
        if pairs:
            record = multiturn.multiturn_record(pairs, *group, multiturn.group_id(*group), counted)
            notes.update(counted)
            pairs = None
            yield record


def _array(table: pa.Table, name: str) -> pa.Array:
    """One column of ``table`` as one array (a table of whole conversations is several batches joined)."""
    return table.column(name).combine_chunks()


def sessions_table(table: pa.Table, names: list[str], notes: Notes) -> pa.Table:
    """The ``sessions`` rows of a sorted table of whole conversations whose rows were all converted on columns,
    equal to ``arrow_rows.rows_table`` of the records ``multiturn.records_from_sorted`` makes of them; what the
    reference counts is counted in ``notes``."""
    rows = table.num_rows
    starts = keyed_columns.conversation_starts(table)
    count = len(starts)
    lengths = np.diff(np.append(starts, rows))
    owner = np.repeat(np.arange(count), lengths)  # the conversation of each row
    answer = _array(table, "answer")
    answered = answer.is_valid().to_numpy(zero_copy_only=False)
    if unanswered := int(rows - answered.sum()):
        notes.add(converted.EMPTY_ANSWER, unanswered)
    turn_counts = answered.astype(np.int64) + 1
    turns, turn_bounds = _turns(table, answer, answered, turn_counts, starts, owner)
    first = pa.array(starts)
    source, how, key = (_array(table, name).take(first) for name in ("source", "how", "group_key"))
    session_id = session_columns.session_keys(how, key)
    sessions = session_columns.dated_sessions(
        _array(table, "time").take(first), _array(table, "create_time").take(first), notes
    )
    session_extra = session_columns.session_extras(table, starts, owner, how, names, notes)
    by_fallback = how.to_numpy(zero_copy_only=False) != "会话"
    for grouped_by in np.unique(how.to_numpy(zero_copy_only=False)[by_fallback]):
        rows_by = int(lengths[by_fallback & (how.to_numpy(zero_copy_only=False) == grouped_by)].sum())
        notes.add(f"multi-turn row with an empty or missing 会话 (grouped by {grouped_by})", rows_by)
    turn_offsets = pa.array(turn_bounds.astype(np.int32), pa.int32())
    session = pa.StructArray.from_arrays(
        [
            session_id,
            sessions["date_time"],
            sessions["timestamp"],
            pa.nulls(count, pa.string()),
            pa.ListArray.from_arrays(turn_offsets, turns, type=_TURNS_TYPE),
            session_extra,
        ],
        fields=list(_SESSION_TYPE),
    )
    one_each = pa.array(np.arange(count + 1, dtype=np.int32), pa.int32())
    languages = detect_languages(turns.field("text"), turn_bounds)
    for language, times in zip(*np.unique(languages[languages != "zh"], return_counts=True), strict=True):
        notes.add(f"conversation detected as {language}, not zh", int(times))
    columns = {
        "conversation_id": session_columns.group_ids(source, session_id),
        "source": pa.array(np.full(count, "mnbvc", dtype=object), pa.string()),
        "subset": pc.binary_join_element_wise(f"{MULTITURN}/", source, ""),
        "language": pa.array(languages, pa.string()),
        "speakers": _speakers(answered, starts),
        "sessions": pa.ListArray.from_arrays(one_each, session, type=SESSIONS_SCHEMA.field("sessions").type),
        "questions": pa.ListArray.from_arrays(
            pa.array(np.zeros(count + 1, dtype=np.int32), pa.int32()),
            pa.array([], SESSIONS_SCHEMA.field("questions").type.value_type),
            type=SESSIONS_SCHEMA.field("questions").type,
        ),
        "extra": pa.array(np.full(count, _FORMAT_EXTRA, dtype=object), pa.string()),
    }
    return pa.Table.from_arrays([columns[name] for name in SESSIONS_SCHEMA.names], schema=SESSIONS_SCHEMA)


def _turns(table, answer, answered, turn_counts, starts, owner) -> tuple[pa.StructArray, np.ndarray]:
    """Every conversation's turns in order (``parse.converted_turns`` of each row, its index in its conversation
    the prefix of the ids) as one struct array, and where each conversation's turns begin and end."""
    rows = len(answered)
    total = int(turn_counts.sum())
    first_turn = np.cumsum(turn_counts) - turn_counts  # each row's question turn
    is_answer = np.zeros(total, dtype=bool)
    is_answer[first_turn[answered] + 1] = True
    row_of_turn = np.repeat(np.arange(rows), turn_counts)
    index = np.arange(rows) - starts[owner]  # each row's place in its conversation
    mask = pa.array(is_answer)
    turn_ids = pc.binary_join_element_wise(
        pa.array(index[row_of_turn]).cast(pa.string()), pc.if_else(mask, "a", "q"), ""
    )
    # a question's text is row r of the questions, an answer's row r of the answers, after them
    texts = pa.concat_arrays([_array(table, "question"), answer]).take(
        pa.array(row_of_turn + np.where(is_answer, rows, 0))
    )
    reply_index = pa.array(np.arange(total) - 1, mask=~is_answer)
    columns = {
        "turn_id": turn_ids,
        "speaker": pc.if_else(mask, ANSWER_SPEAKER, QUESTION_SPEAKER),
        "role": pc.if_else(mask, "assistant", "user"),
        "text": texts,
        "reply_to": turn_ids.take(reply_index),
        "extra": _array(table, "extra").take(pa.array(row_of_turn, mask=is_answer)),
    }
    turn_bounds = np.append(first_turn[starts], total)
    plain = {name: session_columns.without_validity(column) for name, column in columns.items()}
    return struct_array(TURN_TYPE, plain, total), turn_bounds


def _speakers(answered: np.ndarray, starts: np.ndarray) -> pa.ListArray:
    """["问"], or ["问", "答"] for a conversation with an answer turn."""
    with_answer = np.add.reduceat(answered.astype(np.int64), starts) > 0 if len(starts) else answered[:0]
    sizes = with_answer.astype(np.int64) + 1
    values = np.full(int(sizes.sum()), QUESTION_SPEAKER, dtype=object)
    values[(np.cumsum(sizes) - 1)[with_answer]] = ANSWER_SPEAKER
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32)
    return pa.ListArray.from_arrays(
        pa.array(offsets, pa.int32()),
        pa.array(values, pa.string()),
        type=SESSIONS_SCHEMA.field("speakers").type,
    )
