"""A long multi-turn conversation's turns as Arrow columns, not one Python dict per turn.

A turn dict with its id strings costs some 700 bytes of Python objects for a tiny MNBVC turn of about 100 bytes of
input, so a conversation of a million tiny turns peaked at many times its size. From ``COLUMNAR_PAIRS`` rows on,
``multiturn.multiturn_record`` makes the session's turns one Arrow struct array instead (an
``convhub.engine.arrow_rows.ArrowList``), with the values ``parse.converted_turns`` gives, in the same order; the writer
puts the array into the ``sessions`` table as it is.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from builders.mnbvc.parse import ANSWER_SPEAKER, QUESTION_SPEAKER, ConvertedPair
from convhub import schema
from convhub.engine.arrow_rows import ArrowList
from convhub.engine.arrow_structs import string_array, struct_array

#: A conversation of at least this many Q/A rows has its turns made as Arrow columns. Below it, dicts: a few
#: Arrow arrays per conversation would cost more than the dicts of a short one.
COLUMNAR_PAIRS = 4096

#: The Arrow type of one turn, as the ``sessions`` table holds it.
TURN_TYPE: pa.StructType = (
    schema.SESSIONS_FEATURES.arrow_schema.field("sessions").type.value_type.field("turns").type.value_type
)


def columnar_turns(pairs: list[ConvertedPair]) -> ArrowList | None:
    """The turns of ``pairs`` (each pair's ``converted_turns`` with the prefix of its index) as one struct
    array; None when a text is not UTF-8 (a lone surrogate), which the dict turns then name when the record is
    checked (``jsonio.unencodable_field``)."""
    answered = np.fromiter((pair.answer is not None for pair in pairs), dtype=bool, count=len(pairs))
    # each pair gives its question turn, then its answer turn when it has one
    counts = answered.astype(np.int64) + 1
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    total = int(counts.sum())
    is_answer = np.zeros(total, dtype=bool)
    is_answer[starts[answered] + 1] = True
    pair_of_turn = np.repeat(np.arange(len(pairs)), counts)
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
    replied = pa.array(np.flatnonzero(answered)).cast(pa.string())
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
    return ArrowList(struct_array(TURN_TYPE, columns, total))


def _with_answer(pair: ConvertedPair, question, answer) -> tuple:
    """The value of a pair's question turn, then its answer turn's when it has one."""
    return (question,) if pair.answer is None else (question, answer)
