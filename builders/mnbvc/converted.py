"""A 多轮对话 row converted, as the columns of a keyed batch (``convhub.engine.keyed_columns``).

``VALUE_FIELDS`` are the values the ``sessions`` rows are made of; ``values_of`` says them for a row that Python
converted (``multiturn.key_row``), or None when columns cannot say that row exactly, and ``converted_of`` turns
them back into the converted value. Together they define which rows the columnar pass may convert: a row whose
values ``values_of`` gives, and exactly those values.
"""

from __future__ import annotations

from typing import Any

import orjson
import pyarrow as pa

from convhub.engine.keyed_columns import keyed_schema

#: The one normalization a row converted on columns may have: an empty 答 (``parse.convert_pair``).
EMPTY_ANSWER = "empty 答 (question with no answer: no assistant turn)"

VALUE_FIELDS: tuple[pa.Field, ...] = (
    pa.field("source", pa.string()),  # 来源
    pa.field("how", pa.string()),  # what grouped the row: 会话, id or line (``multiturn.conversation_key``)
    pa.field("group_key", pa.string()),  # the 会话, id or line it was grouped by
    pa.field("sequence", pa.string()),  # the raw 多轮序号 as JSON text
    pa.field("question", pa.string()),
    pa.field("answer", pa.string()),  # null: no answer turn (an empty 答)
    pa.field("extra", pa.string()),  # the question turn's extra (JSON text)
    pa.field("time", pa.string()),  # 时间; null: absent
    pa.field("create_time", pa.string()),  # 元数据.create_time; null: absent or null
)
KEYED_SCHEMA = keyed_schema(VALUE_FIELDS)

_INT64 = (-(2**63), 2**63 - 1)


def _utf8(*texts: str | None) -> bool:
    try:
        for text in texts:
            if text is not None:
                text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def values_of(group: tuple[str, ...], converted: tuple) -> dict[str, Any] | None:
    """The value columns of a row converted by ``multiturn._converted_row``, or None when they cannot say it
    exactly: a 多轮序号 that is not a 64-bit integer, a 时间 or create_time that is not a string, a normalization
    other than an empty 答, a warning, a text UTF-8 cannot hold."""
    sequence, question, extra, answer, dated, create_time, row_notes, problems = converted
    if problems or type(sequence) is not int or not _INT64[0] <= sequence <= _INT64[1]:
        return None
    if dict(row_notes) != ({EMPTY_ANSWER: 1} if answer is None else {}):
        return None
    time = dated.get("时间")
    if (dated and not isinstance(time, str)) or not (create_time is None or isinstance(create_time, str)):
        return None
    source, how, key = group
    if not _utf8(source, how, key, question, answer, extra, time, create_time):
        return None
    return {
        "source": source,
        "how": how,
        "group_key": key,
        "sequence": orjson.dumps(sequence).decode(),
        "question": question,
        "answer": answer,
        "extra": extra,
        "time": time,
        "create_time": create_time,
    }


def converted_of(values: dict[str, Any]) -> tuple:
    """The converted value (``multiturn._converted_row``) that ``values_of`` gave these columns for."""
    answer = values["answer"]
    return (
        orjson.loads(values["sequence"]),
        values["question"],
        values["extra"],
        answer,
        {} if values["time"] is None else {"时间": values["time"]},
        values["create_time"],
        ((EMPTY_ANSWER, 1),) if answer is None else (),
        (),
    )
