"""MNBVC dialogue rows (多轮对话, 问答, 论坛) → canonical conversation records.

Pure functions, no ``datasets``: format detection, the Q/A pair that 问答 and 多轮对话 rows share, and one
function per row format that turns a source row into its canonical record (多轮对话, whose conversations span
rows, is in ``multiturn``; ``export`` is the inverse).

What is kept so that a later export can rebuild every source row exactly: the turn that a source row
starts (the question of a Q/A pair, the topic post of a forum thread) carries in its ``extra`` the file,
the line, the row with only its text fields taken out (``row``, every value with its own JSON type, the
raw ``扩展字段`` string included) and the row's key order (``keys``). Forum replies carry their own reply
object the same way.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

from convhub import schema
from convhub.builders.mnbvc.dates import date_iso, parse_date
from convhub.builders.mnbvc.extension import Extension, parse_extension
from convhub.builders.mnbvc.formats import Formats
from convhub.builders.mnbvc.json_lines_builder import LineWarnings, Objects
from convhub.builders.mnbvc.language import detect_language
from convhub.engine.readers.contract import Place, place_of_line
from convhub.engine.readers.record_loop import convert_records
from convhub.errors import FieldError, Notes, Reject, SourceError, raise_error

logger = logging.getLogger(__name__)

MULTITURN, QA, FORUM = "multiturn", "qa", "forum"
FORMATS = (MULTITURN, QA, FORUM)

QUESTION_SPEAKER, ANSWER_SPEAKER = "问", "答"
TOPIC_SPEAKER = "楼主"
#: Forum speakers that name the thread's author (树洞 boards write 洞主): their replies map to ``user``.
THREAD_AUTHOR_NAMES = frozenset({"楼主", "洞主"})
TOPIC_TURN_ID = "topic"
MAX_WARNINGS_PER_FILE = 20


def row_format(row: dict[str, Any]) -> tuple[str, bool] | None:
    """(format, final) of one row: a forum thread, a multi-turn Q/A row (one with 会话/多轮序号), both final, a
    plain Q/A row (qa: a later row of the file may still be multi-turn), or None."""
    if "回复" in row or "主题" in row:
        return FORUM, True
    if "问" in row or "答" in row:
        extension = parse_extension(row_metadata(row).get("扩展字段"))
        multiturn = bool(extension.value) and ("会话" in extension.value or "多轮序号" in extension.value)
        return (MULTITURN, True) if multiturn else (QA, False)
    return None


FILE_FORMATS = Formats(
    "MNBVC",
    FORMATS,
    row_format,
    "an MNBVC dialogue row (no 问/答, no 主题/回复)",
    "问",
    aliases={
        "multi-turn": MULTITURN,
        "dialogue": MULTITURN,
        "多轮对话": MULTITURN,
        "问答": QA,
        "问答语料": QA,
        "论坛": FORUM,
        "论坛语料": FORUM,
    },
)


def row_metadata(row: dict[str, Any]) -> dict[str, Any]:
    metadata = row.get("元数据")
    return metadata if isinstance(metadata, dict) else {}


def checked_metadata(row: dict[str, Any], file: str, line: int) -> dict[str, Any]:
    """The row's 元数据 (``{}`` when absent); one that is not an object is a SourceError."""
    metadata = row.get("元数据")
    if metadata is not None and not isinstance(metadata, dict):
        problem = f"expected an object, got {type(metadata).__name__}"
        raise SourceError(file, f"line {line}", "元数据", problem)
    return metadata or {}


def as_text(value: Any) -> str:
    """A value as text: a string as it is, anything else as its JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def with_extension(extra: dict[str, Any], extension: Extension, **following: Any) -> dict[str, Any]:
    """``extra`` with the parsed ``扩展字段``, the ``following`` fields, then its problems when it had some (the
    order of the keys is the order of the Json text)."""
    extra["扩展字段"] = extension.value
    extra.update(following)
    if extension.problems:
        extra["扩展字段_problems"] = list(extension.problems)
    return extra


def source_name(row: dict[str, Any]) -> str:
    value = row.get("来源")
    return "" if value is None else str(value)


def subset_wanted(subsets: Iterable[str] | None, kind: str, source: str) -> bool:
    """``--subset`` names a format (``forum``), a 来源 (``ShareGPT``) or both (``forum/北大树洞``)."""
    if not subsets:
        return True
    return any(wanted in (kind, source, f"{kind}/{source}") for wanted in subsets)


#: Logs each unreadable ``扩展字段`` of a file (``Warnings(file)``) with its line, up to a limit per file.
Warnings = partial(
    LineWarnings, logger=logger, limit=MAX_WARNINGS_PER_FILE, what="unreadable 扩展字段 strings"
)
#: What takes such a warning: (line number, field, problem).
WarnLine = Callable[[int, str, str], None]


def count_extension(
    extension: Extension, where: str, number: int, notes: Notes, warnings: WarnLine
) -> Extension:
    """Count what was odd about a parsed ``扩展字段``; an unreadable one goes to ``warnings`` with its line."""
    for problem in extension.problems:
        if problem.startswith("unreadable") or not extension.readable:
            notes.add(f"{where} unreadable (raw string kept)")
            warnings(number, where, extension.problems[0])
        else:
            notes.add(f"{where}: {problem}")
    return extension


def _text(value: Any, field: str, notes: Notes) -> str:
    """A text field as a string; a non-string stays raw in the row (see ``_row_without``)."""
    if isinstance(value, str):
        return value
    notes.add(f"{field} not a string (text empty, raw value kept)")
    return ""


def _row_without(row: dict[str, Any], text_types: dict[str, type]) -> dict[str, Any]:
    """The row with its text fields taken out (they are turns); a text field of another type (or null) stays."""
    return {key: value for key, value in row.items() if not isinstance(value, text_types.get(key, ()))}


_FORMAT_EXTRA = {kind: schema.to_json({"format": kind}) for kind in FORMATS}


def conversation_record(conversation_id: str, kind: str, source: str, sessions: list, notes: Notes) -> dict:
    texts = (turn["text"] for session in sessions for turn in session["turns"])
    language = detect_language(texts)
    if language != "zh":
        notes.add(f"conversation detected as {language}, not zh")
    speakers = list(dict.fromkeys(turn["speaker"] for session in sessions for turn in session["turns"]))
    return {
        "conversation_id": conversation_id,
        "source": "mnbvc",
        "subset": f"{kind}/{source}",
        "language": language,
        "speakers": speakers,
        "sessions": sessions,
        "questions": [],
        "extra": _FORMAT_EXTRA[kind],
    }


def set_session_date(
    session: schema.Session, row: dict[str, Any], fallback_field: str, fallback: Any, notes: Notes
) -> None:
    """``date_time`` is MNBVC's ``时间`` (raw); when a producer left it out, the row's own creation time."""
    if "时间" in row:
        session["date_time"] = row["时间"] if isinstance(row["时间"], str) else json.dumps(row["时间"])
        session["timestamp"] = parse_date(row["时间"], "时间", notes)
        return
    notes.add(f"时间 absent (session date_time from {fallback_field})")
    if isinstance(fallback, str) and fallback:
        session["date_time"] = fallback
        session["timestamp"] = parse_date(fallback, fallback_field, notes)


# -- Q/A pairs: 问答 and 多轮对话 rows ------------------------------------------------------------------


def require_pair(row: dict[str, Any], file: str, line: int) -> None:
    """A row of neither 问 nor 答 is no Q/A row: a SourceError."""
    if "问" not in row and "答" not in row:
        raise SourceError(file, f"line {line}", "问", "missing (neither 问 nor 答: not a Q/A row)")


def sequence_number(extension: Extension) -> tuple[int, int, str]:
    """A sort key for ``多轮序号``: integers (or integer strings) first, then other text, then missing."""
    value = (extension.value or {}).get("多轮序号")
    if isinstance(value, bool) or value is None or value == "":
        return (2, 0, "")
    if isinstance(value, int):
        return (0, value, "")
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        try:
            return (0, int(value), "")
        except ValueError:  # past the int-string limit (4300 digits): ordered as other text
            pass
    return (1, 0, json.dumps(value, ensure_ascii=False))


@dataclass(slots=True)
class ConvertedPair:
    """A Q/A row as its turns need it, all but the turn ids (they depend on the row's position in its
    conversation). A multi-turn build converts each row once, in the partition pass (``regroup``)."""

    file: str
    order: tuple[int, int, str]  # sequence_number(扩展字段)
    sequence: Any  # the raw 多轮序号 (None when absent)
    question: str
    extra: str | None  # the question turn's extra (Json text)
    answer: str | None  # the answer turn's text; None: no answer turn
    dated: dict[str, Any]  # {"时间": the row's 时间} when it has one, else {}
    create_time: Any  # 元数据.create_time


def convert_pair(
    file: str,
    line: int,
    row: dict[str, Any],
    notes: Notes,
    warnings: WarnLine,
    extension: Extension | None = None,
    order: tuple[int, int, str] | None = None,
) -> ConvertedPair:
    """A Q/A row as its turns need it (see ``converted_turns``), its ``扩展字段`` counted (``extension`` and
    ``order``, its ``sequence_number``: when already known of this row).

    An empty ``答`` (MNBVC keeps a question with no answer) gives no assistant turn, so chat data never holds an
    empty assistant message; ``答`` stays in the question turn's ``row`` when it is not a string and is ``""``
    otherwise, so an export can write it back.
    """
    require_pair(row, file, line)
    metadata = checked_metadata(row, file, line)
    if extension is None:
        extension = parse_extension(metadata.get("扩展字段"))
    count_extension(extension, "元数据.扩展字段", line, notes, warnings)
    question = _text(row.get("问"), "问", notes)
    if "问" not in row:
        notes.add("问 absent (empty question turn)")
    extra: dict[str, Any] = {
        "file": file,
        "line": line,
        "keys": list(row),
        "row": _row_without(row, {"问": str, "答": str}),
    }
    with_extension(extra, extension)
    create_time = metadata.get("create_time")
    created_iso = date_iso(create_time, "create_time", notes)
    if created_iso is not None:
        extra["create_timestamp"] = created_iso
    answer = row.get("答")
    answer_text = None
    if isinstance(answer, str) and answer == "":
        notes.add("empty 答 (question with no answer: no assistant turn)")
    elif answer is not None or "答" in row:
        answer_text = _text(answer, "答", notes)
    dated = {"时间": row["时间"]} if "时间" in row else {}
    return ConvertedPair(
        file,
        sequence_number(extension) if order is None else order,
        (extension.value or {}).get("多轮序号"),
        question,
        schema.to_json(extra),
        answer_text,
        dated,
        create_time,
    )


def converted_turns(pair: ConvertedPair, turn_prefix: str) -> list[schema.Turn]:
    """The turns of a converted pair, their ids ``<prefix>q`` and ``<prefix>a``."""
    question = schema.empty_turn(f"{turn_prefix}q", QUESTION_SPEAKER, "user", pair.question)
    question["extra"] = pair.extra
    if pair.answer is None:
        return [question]
    turn = schema.empty_turn(f"{turn_prefix}a", ANSWER_SPEAKER, "assistant", pair.answer)
    turn["reply_to"] = question["turn_id"]
    return [question, turn]


def _id_string(value: Any, notes: Notes, field: str) -> str | None:
    return None if value is None else _id_text(value, notes, field)


def _id_text(value: Any, notes: Notes, field: str) -> str:
    """An id that is there, as a string (a number's raw type noted)."""
    if isinstance(value, str):
        return value
    notes.add(f"{type(value).__name__} {field} → string (raw type kept in the row)")
    return as_text(value)


def row_records(
    kind: str, objects: Objects, file: str, notes: Notes, subsets=None, reject: Reject = raise_error
) -> Iterator[dict[str, Any]]:
    """问答 and 论坛 rows, each a conversation by itself (its id the file and the line), of the wanted subsets."""
    wanted = (
        (place_of_line(file, line, file, offset), row)
        for line, offset, _, row in objects
        if subset_wanted(subsets, kind, source_name(row))
    )
    convert = partial(qa_record if kind == QA else forum_record, warnings=Warnings(file))
    return convert_records(wanted, convert, notes, reject)


def qa_record(row: dict[str, Any], place: Place, notes: Notes, warnings: WarnLine) -> dict[str, Any]:
    file, line = place.name, cast(int, place.line)
    pair = convert_pair(file, line, row, notes, warnings)
    session_id = _id_string(row.get("id"), notes, "id") or f"line {line}"
    session = schema.empty_session(session_id, converted_turns(pair, ""))
    set_session_date(session, row, "create_time", row_metadata(row).get("create_time"), notes)
    return conversation_record(f"{file}:{line}", QA, source_name(row), [session], notes)


# -- 论坛语料: a thread is a conversation ------------------------------------------------------------------


def forum_record(row: dict[str, Any], place: Place, notes: Notes, warnings: WarnLine) -> dict[str, Any]:
    """The topic post and each reply as turns; ``reply_to`` from 引用ID, speaker from 回复人.

    The topic post's speaker is ``楼主`` (MNBVC rows do not name the author); replies by ``楼主`` or
    ``洞主`` (the thread's author on 树洞 boards) are ``user`` turns like the topic, other replies
    ``assistant`` turns.
    """
    file, line = place.name, cast(int, place.line)
    replies = row.get("回复", [])
    if not isinstance(replies, list):
        raise FieldError("回复", f"expected a list of replies, got {type(replies).__name__}")
    metadata = checked_metadata(row, file, line)
    topic_text = _text(row.get("主题", ""), "主题", notes)
    if "主题" not in row:
        notes.add("forum thread without 主题 (empty topic turn)")
    elif topic_text == "":
        notes.add("forum thread with an empty 主题 (kept as an empty topic turn)")
    extension = count_extension(
        parse_extension(metadata.get("扩展字段")), "元数据.扩展字段", line, notes, warnings
    )
    topic = schema.empty_turn(TOPIC_TURN_ID, TOPIC_SPEAKER, "user", topic_text)
    posted_iso = date_iso(metadata.get("发帖时间"), "发帖时间", notes)
    kept = {
        "file": file,
        "line": line,
        "keys": list(row),
        "row": _row_without(row, {"主题": str, "回复": list}),
    }
    topic["extra"] = schema.to_json(with_extension(kept, extension, timestamp=posted_iso))
    turns = [topic] + [
        forum_reply(reply, index, line, notes, warnings) for index, reply in enumerate(replies)
    ]
    _check_turn_ids(turns, notes)
    session_id = _id_string(row.get("ID", row.get("id")), notes, "ID") or f"line {line}"
    session = schema.empty_session(session_id, turns)
    set_session_date(session, row, "发帖时间", metadata.get("发帖时间"), notes)
    return conversation_record(f"{file}:{line}", FORUM, source_name(row), [session], notes)


def forum_reply(reply: Any, index: int, line: int, notes: Notes, warnings: WarnLine) -> schema.Turn:
    if not isinstance(reply, dict):
        raise FieldError(f"回复[{index}]", f"expected an object, got {type(reply).__name__}")
    floor = reply.get("楼ID")
    if type(floor) is str and floor:  # the usual 楼ID, as _id_string gives it
        turn_id = floor
    elif floor is None or floor == "":
        notes.add("forum reply without 楼ID (turn_id from its position)")
        turn_id = f"#{index + 1}"
    else:
        turn_id = _id_text(floor, notes, "楼ID")
    extension = count_extension(
        parse_extension(reply.get("扩展字段")), "回复.扩展字段", line, notes, warnings
    )
    details = extension.value or {}
    speaker = details.get("回复人")
    if speaker is None or speaker == "":
        notes.add("forum reply without 回复人 (speaker empty)")
        speaker = ""
    speaker = as_text(speaker)
    role = "user" if speaker in THREAD_AUTHOR_NAMES else "assistant"
    turn = schema.empty_turn(turn_id, speaker, role, _text(reply.get("回复", ""), "回复.回复", notes))
    quoted = details.get("引用ID")
    if quoted is not None and quoted != "":
        turn["reply_to"] = as_text(quoted)
    replied_iso = date_iso(details.get("回复时间"), "回复时间", notes)
    kept = {"keys": list(reply), "reply": _row_without(reply, {"回复": str})}
    turn["extra"] = schema.to_json(with_extension(kept, extension, timestamp=replied_iso))
    return turn


def _check_turn_ids(turns: list[schema.Turn], notes: Notes) -> None:
    """楼ID should be unique in a thread; a repeated one is made unique (``~2``) and counted."""
    seen: dict[str, int] = {}
    for turn in turns:
        count = seen.get(turn["turn_id"], 0) + 1
        seen[turn["turn_id"]] = count
        if count > 1:
            notes.add("forum reply with a repeated 楼ID (turn_id suffixed ~n, raw kept)")
            turn["turn_id"] = f"{turn['turn_id']}~{count}"
    ids = {turn["turn_id"] for turn in turns}
    for turn in turns:
        if turn["reply_to"] is not None and turn["reply_to"] not in ids:
            notes.add("forum 引用ID naming no reply of the thread (reply_to kept as written)")
