"""A long multi-turn conversation's turns as Arrow columns, not one Python dict per turn.

A turn dict with its id strings costs some 700 bytes of Python objects for a tiny MNBVC turn of about 100 bytes of
input, so a conversation of a million tiny turns peaked at many times its size. ``ConversationTurns`` takes a
conversation's converted pairs one at a time and, from ``COLUMNAR_PAIRS`` pairs on, makes their turns Arrow struct
arrays a chunk of pairs at a time, with the values ``parse.converted_turns`` gives, in the same order: only one
chunk of pairs is ever held as Python values. The session's turns are then one array (an
``convhub.engine.writers.arrow_rows.ArrowList``), which the writer puts into the ``sessions`` table as it is.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from convhub import schema
from convhub.builders.mnbvc.parse import ANSWER_SPEAKER, QUESTION_SPEAKER, ConvertedPair, converted_turns
from convhub.engine.writers.arrow_rows import SESSION_TURN_TYPE, ArrowList

#: A conversation of at least this many Q/A rows has its turns made as Arrow columns, this many pairs at a time.
#: Below it, dicts: a few Arrow arrays per conversation would cost more than the dicts of a short one.
COLUMNAR_PAIRS = 4096
#: Strings encoded to UTF-8 at a time by :func:`string_array`.
STRING_CHUNK = 16_384


class ConversationTurns:
    """The turns of a conversation's pairs, given in order (``add``): dicts for a short conversation, Arrow
    struct arrays made ``COLUMNAR_PAIRS`` pairs at a time for a long one (``turns``).

    A text UTF-8 cannot encode (a lone surrogate) turns the whole conversation back into dicts, so that the check
    of the record names it (``jsonio.unencodable_field``).
    """

    def __init__(self) -> None:
        self.pending: list[ConvertedPair] = []
        self.chunks: list[pa.StructArray] = []
        self.dicts: list[schema.Turn] | None = None  # once a text cannot be an Arrow string
        self.made = 0  # pairs whose turns are in ``chunks`` or ``dicts``

    def add(self, pair: ConvertedPair) -> None:
        self.pending.append(pair)
        if len(self.pending) >= COLUMNAR_PAIRS:
            self._make_pending()

    def turns(self) -> list[schema.Turn] | ArrowList:
        """Every pair's turns: a list of dicts, or one ``ArrowList`` from ``COLUMNAR_PAIRS`` pairs on."""
        if not self.chunks and self.dicts is None:
            self.dicts = []  # a short conversation
        self._make_pending()
        if self.dicts is not None:
            return self.dicts
        chunks, self.chunks = self.chunks, []
        return ArrowList.joined(chunks)

    def _make_pending(self) -> None:
        if not self.pending:
            return
        if self.dicts is None:
            chunk = columnar_turns(self.pending, self.made)
            if chunk is not None:
                self.chunks.append(chunk)
            else:
                self.dicts = [turn for chunk in self.chunks for turn in chunk.to_pylist()]
                self.chunks = []
        if self.dicts is not None:
            first = self.made
            self.dicts += [
                turn
                for index, pair in enumerate(self.pending, first)
                for turn in converted_turns(pair, f"{index}")
            ]
        self.made += len(self.pending)
        self.pending = []


def columnar_turns(pairs: list[ConvertedPair], first: int = 0) -> pa.StructArray | None:
    """The turns of ``pairs`` (each pair's ``converted_turns`` with the prefix of its index, counted from
    ``first``) as one struct array; None when a text is not UTF-8 (a lone surrogate)."""
    answered = np.fromiter((pair.answer is not None for pair in pairs), dtype=bool, count=len(pairs))
    # each pair gives its question turn, then its answer turn when it has one
    counts = answered.astype(np.int64) + 1
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    total = int(counts.sum())
    is_answer = np.zeros(total, dtype=bool)
    is_answer[starts[answered] + 1] = True
    pair_of_turn = np.repeat(np.arange(first, first + len(pairs)), counts)
    try:
        texts = string_array(
            text for pair in pairs for text in _with_answer(pair, pair.question, pair.answer)
        )
        extras = string_array(extra for pair in pairs for extra in _with_answer(pair, pair.extra, None))
    except UnicodeEncodeError:
        return None
    mask = pa.array(is_answer)
    prefixes = pa.array(pair_of_turn).cast(pa.string())
    turn_ids = pc.binary_join_element_wise(prefixes, pc.if_else(mask, "a", "q"), "")
    # an answer replies to its pair's question; ``take`` with null indices leaves no bytes under the nulls, as
    # ``from_pylist`` does (the table's ``nbytes`` is the card's ``num_bytes``)
    replied = pa.array(np.flatnonzero(answered) + first).cast(pa.string())
    question_ids = pc.binary_join_element_wise(replied, pa.scalar("q"), "")
    reply_index = pa.array(np.cumsum(is_answer) - 1, mask=~is_answer)
    columns = {
        "turn_id": turn_ids,
        "speaker": pc.if_else(mask, ANSWER_SPEAKER, QUESTION_SPEAKER),
        "role": pc.if_else(mask, "assistant", "user"),
        "text": texts,
        "reply_to": question_ids.take(reply_index),
        "extra": extras,
    }
    return struct_array(SESSION_TURN_TYPE, columns, total)


def _with_answer(pair: ConvertedPair, question, answer) -> tuple:
    """The value of a pair's question turn, then its answer turn's when it has one."""
    return (question,) if pair.answer is None else (question, answer)


def string_array(values: Iterable[str | None]) -> pa.Array:
    """A string array of ``values``, encoded here ``STRING_CHUNK`` at a time. Given the texts themselves, pyarrow asks
    each for its UTF-8, which CPython then keeps beside the text for as long as it lives: a second copy of every
    non-ASCII text. A lone surrogate raises UnicodeEncodeError."""
    chunks, values = [], iter(values)
    while chunk := list(itertools.islice(values, STRING_CHUNK)):
        encoded = [None if value is None else value.encode("utf-8") for value in chunk]
        chunks.append(pa.array(encoded, pa.binary()).cast(pa.string()))
    if len(chunks) == 1:
        return chunks[0]
    return pa.concat_arrays(chunks) if chunks else pa.array([], pa.string())


def struct_array(struct_type: pa.StructType, columns: dict[str, pa.Array], count: int) -> pa.StructArray:
    """``count`` structs of ``struct_type`` from ``columns`` by field name; a field without a column holds empty
    (not null) lists when it is a list, else nulls."""
    arrays = [
        columns[field.name] if field.name in columns else _unset(field.type, count) for field in struct_type
    ]
    return pa.StructArray.from_arrays(arrays, fields=list(struct_type))


def _unset(kind: pa.DataType, count: int) -> pa.Array:
    if not pa.types.is_list(kind):
        return pa.nulls(count, kind)
    offsets = pa.array(np.zeros(count + 1, dtype=np.int32), pa.int32())
    return pa.ListArray.from_arrays(offsets, pa.array([], kind.value_type), type=kind)
