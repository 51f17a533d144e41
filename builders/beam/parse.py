"""A BEAM chat → one record: batches are sessions ``batch-<n>``, messages turns named by their ``id`` (text
untouched), probing questions ``qa`` rows, ``extra`` holding the question whole, its ability and position."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from convhub import schema
from convhub.builders.beam import layout
from convhub.engine.readers.contract import Place
from convhub.errors import FieldError, Notes

ROLES = {"user": "user", "assistant": "assistant"}
#: The reference answer's key, which differs by ability; the first one a question holds is its ``answer``.
ANSWER_KEYS = ("answer", "ideal_answer", "ideal_response", "ideal_summary", "expected_compliance")
ANCHOR_FORMAT = "%B-%d-%Y"  # March-15-2024
NONE = type(None)


def expect(value: Any, kind: type | tuple, field: str, what: str) -> Any:
    """``value`` if of ``kind`` (a bool is no integer), else the FieldError naming ``field``."""
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise FieldError(field, f"expected {what}, got {value!r:.60}")
    return value


def convert(raw: dict[str, Any], place: Place, notes: Notes) -> dict[str, Any]:
    """``BeamBuilder.CONVERT``: a raw chat of either layout (``layout.ChatFiles``) → its record, through what
    ``layout`` gives of both: ``batches`` and ``questions`` (or None), ``extra`` (all else)."""
    batches, probing, extra = layout.hub_chat(raw, place) if "row" in raw else layout.folder_chat(raw)
    turn_ids, key_orders = set[str](), dict[str, list[str]]()
    batches = expect(batches, (list, NONE), "chat", "a list of batches") or []
    sessions = [parse_batch(b, f"chat[{i}]", turn_ids, key_orders, notes) for i, b in enumerate(batches)]
    probing = expect(probing, (dict, NONE), "probing_questions", "an object of abilities")
    questions = []
    for ability, listed in (probing or {}).items():
        for position, question in enumerate(expect(listed, list, f"probing_questions.{ability}", "a list")):
            questions.append(parse_question((raw["id"], ability, position), question, turn_ids, notes))
    if probing is not None:
        extra["abilities"] = list(probing)  # an ability with no question too
    extra |= {"message_key_orders": key_orders} if key_orders else {}
    record = {"conversation_id": raw["id"], "source": "beam", "subset": raw["id"].split("/")[0]}
    record |= {"language": "en", "speakers": ["user", "assistant"], "sessions": sessions}
    return record | {"questions": questions, "extra": schema.to_json(extra)}


def parse_batch(batch: Any, field: str, turn_ids: set[str], key_orders: dict, notes: Notes) -> schema.Session:
    """A batch → a session dated by its ``time_anchor``, else its first message's; its keys but ``turns``
    in ``extra.batch``, its exchanges' sizes in ``extra.exchange_sizes`` (null: messages listed flat)."""
    expect(batch, dict, field, "a batch object")
    number = expect(batch.get("batch_number"), int, f"{field}.batch_number", "an integer")
    exchanges = expect(batch.get("turns"), list, f"{field}.turns", "a list")
    flat = bool(exchanges) and all(isinstance(item, dict) for item in exchanges)
    groups = [exchanges] if flat else exchanges
    turns = []
    for place, exchange in enumerate(groups):
        where = f"{field}.turns" if flat else f"{field}.turns[{place}]"
        for index, message in enumerate(expect(exchange, list, where, "a list of messages")):
            turns.append(parse_message(message, f"{where}[{index}]", turn_ids, key_orders))
    session = schema.empty_session(f"batch-{number}", turns)
    anchor = batch.get("time_anchor")
    if not isinstance(anchor, str):
        notes.add("batch without a time_anchor (dated by its first message's, if any)")
        anchors = (message.get("time_anchor") for exchange in groups for message in exchange)
        anchor = next((found for found in anchors if isinstance(found, str)), None)
    session["date_time"] = anchor
    try:
        session["timestamp"] = None if anchor is None else datetime.strptime(anchor, ANCHOR_FORMAT)
    except ValueError:
        notes.add("time anchor not Month-DD-YYYY (kept as text, no timestamp)")
    own = {key: value for key, value in batch.items() if key != "turns"}
    sizes = None if flat else [len(exchange) for exchange in groups]
    position = list(batch).index("turns")
    session["extra"] = schema.to_json({"batch": own, "turns_position": position, "exchange_sizes": sizes})
    return session


def parse_message(message: Any, field: str, turn_ids: set[str], key_orders: dict) -> schema.Turn:
    """A message → a turn named by its ``id``, its other keys in ``extra``, an unusual key order noted."""
    expect(message, dict, field, "a message object")
    role = message.get("role")
    if role not in ROLES:
        raise FieldError(f"{field}.role", f"expected 'user' or 'assistant', got {role!r}")
    content = expect(message.get("content"), str, f"{field}.content", "a string")
    turn_id = str(expect(message.get("id"), int, f"{field}.id", "an integer"))
    if turn_id in turn_ids:
        raise FieldError(f"{field}.id", f"{turn_id} is the id of an earlier message too")
    turn_ids.add(turn_id)
    turn = schema.empty_turn(turn_id, role, ROLES[role], content)
    others = {key: value for key, value in message.items() if key not in ("role", "id", "content")}
    turn["extra"] = schema.to_json(others) if others else None
    if list(message) != ["role", "id", *others, "content"]:
        key_orders[turn_id] = list(message)
    return turn


def parse_question(where: tuple, question: Any, turn_ids: set[str], notes: Notes) -> schema.Question:
    """A probing question → a row ``<chat>:<ability>:<position>``: the answer whatever its key (JSON text if
    no string), ``source_chat_ids`` as turn ids, labelled by their key where they are an object of lists."""
    conversation_id, ability, position = where
    field = f"probing_questions.{ability}[{position}]"
    expect(question, dict, field, "a question object")
    text = expect(question.get("question"), str, f"{field}.question", "a string")
    row = schema.empty_question(f"{conversation_id}:{ability}:{position}", text)
    row["category"] = ability
    key = next((key for key in ANSWER_KEYS if key in question), None)
    if key is None:
        notes.add("probing question without a reference answer")
    answer = question.get(key)
    row["answer"] = answer if answer is None or isinstance(answer, str) else schema.to_json(answer)
    rubric = expect(question.get("rubric", []), list, f"{field}.rubric", "a list")
    row["rubric"] = [expect(item, str, f"{field}.rubric[{i}]", "a string") for i, item in enumerate(rubric)]
    evidence = question.get("source_chat_ids")
    if evidence is None:
        notes.add("probing question without source_chat_ids")
    evidence = expect(evidence, (list, dict, NONE), f"{field}.source_chat_ids", "a list or an object") or []
    for label, ids in evidence.items() if isinstance(evidence, dict) else [(None, evidence)]:
        ids_field = f"{field}.source_chat_ids" + (f".{label}" if label else "")
        for chat_id in expect(ids, list, ids_field, "a list of ids"):
            if isinstance(chat_id, int) and not isinstance(chat_id, bool) and str(chat_id) in turn_ids:
                row["evidence_turn_ids"].append(str(chat_id))
                row["evidence_labels"] += [] if label is None else [label]
            else:
                row["unresolved_evidence"].append(schema.to_json(chat_id) or "null")
    if row["unresolved_evidence"]:
        notes.add("source_chat_ids naming no message (in unresolved_evidence)")
    row["extra"] = schema.to_json({"probing_question": question, "ability": ability, "position": position})
    return row
