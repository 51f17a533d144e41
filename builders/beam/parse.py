"""A BEAM chat (its ``chat.json``, ``probing_questions.json`` and every other file, already read by ``layout``) →
one canonical record. Batches are sessions (``batch-<n>``), messages are turns named by their BEAM ``id``, and
probing questions are ``qa`` rows. Nothing is rewritten: a message's other keys sit in its turn's ``extra``, the
``->-> b,n`` marker stays in the text, and the question object is kept whole (the contract ``convhub score beam``
reads: the question's ``extra`` holds ``probing_question``, ``ability`` and ``position``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from convhub import schema
from convhub.errors import FieldError, Notes

ROLES = {"user": "user", "assistant": "assistant"}
#: The reference answer's key, which differs by ability; the first one a question holds is its ``answer``.
ANSWER_KEYS = ("answer", "ideal_answer", "ideal_response", "ideal_summary", "expected_compliance")
#: ``March-15-2024``, as BEAM writes a time anchor.
ANCHOR_FORMAT = "%B-%d-%Y"


def convert_chat(chat: dict[str, Any], notes: Notes) -> schema.Conversation:
    """``chat`` (``layout.read_folder``/``layout.hub_chat``): ``conversation_id``, ``scale``, ``batches`` (the
    parsed chat.json or Hub ``chat``, None when the folder has none), ``questions`` (the parsed probing
    questions, or None) and ``extra`` (the conversation's extra: the other files, the Hub's other columns)."""
    sessions, key_orders = [], {}
    batches = chat["batches"]
    if batches is not None and not isinstance(batches, list):
        raise FieldError("chat", f"expected a list of batches, got {type(batches).__name__}")
    seen: set[str] = set()
    for index, batch in enumerate(batches or ()):
        sessions.append(parse_batch(batch, f"chat[{index}]", seen, key_orders, notes))
    questions = []
    probing = chat["questions"]
    if probing is not None and not isinstance(probing, dict):
        raise FieldError("probing_questions", f"expected an object of abilities, got {type(probing).__name__}")
    for ability, listed in (probing or {}).items():
        if not isinstance(listed, list):
            raise FieldError(f"probing_questions.{ability}", f"expected a list, got {type(listed).__name__}")
        for position, question in enumerate(listed):
            field = f"probing_questions.{ability}[{position}]"
            questions.append(parse_question(chat["conversation_id"], ability, position, question, field, seen, notes))
    extra = dict(chat["extra"])
    if probing is not None:
        extra["abilities"] = list(probing)  # an ability with no question is kept too
    if key_orders:
        extra["message_key_orders"] = key_orders
    return {
        "conversation_id": chat["conversation_id"],
        "source": "beam",
        "subset": chat["scale"],
        "language": "en",
        "speakers": ["user", "assistant"],
        "sessions": sessions,
        "questions": questions,
        "extra": schema.to_json(extra),
    }


def parse_batch(batch: Any, field: str, seen: set[str], key_orders: dict, notes: Notes) -> schema.Session:
    """One batch → one session ``batch-<batch_number>``, dated by its ``time_anchor`` or, where it has none, by
    its first message's; its own keys (but ``turns``) in ``extra.batch``, the exchanges' sizes in
    ``extra.exchange_sizes`` (null where the batch lists messages, not exchanges, as the Hub's ``chat`` may)."""
    if not isinstance(batch, dict) or not isinstance(batch.get("turns"), list):
        raise FieldError(field, "expected an object with a list 'turns'")
    number = batch.get("batch_number")
    if not isinstance(number, int) or isinstance(number, bool):
        raise FieldError(f"{field}.batch_number", f"expected an integer, got {number!r}")
    exchanges = batch["turns"]
    flat = all(isinstance(item, dict) for item in exchanges) and bool(exchanges)
    groups = [exchanges] if flat else exchanges
    turns = []
    for place, exchange in enumerate(groups):
        where = f"{field}.turns" if flat else f"{field}.turns[{place}]"
        if not isinstance(exchange, list):
            raise FieldError(where, f"expected a list of messages, got {type(exchange).__name__}")
        for index, message in enumerate(exchange):
            turns.append(parse_message(message, f"{where}[{index}]", seen, key_orders))
    session = schema.empty_session(f"batch-{number}", turns)
    anchor = batch.get("time_anchor")
    if not isinstance(anchor, str):
        anchors = (message.get("time_anchor") for exchange in groups for message in exchange)
        anchor = next((found for found in anchors if isinstance(found, str)), None)
        notes.add("batch without a time_anchor (dated by its first message's, if any)")
    session["date_time"] = anchor
    if anchor is not None:
        try:
            session["timestamp"] = datetime.strptime(anchor, ANCHOR_FORMAT)
        except ValueError:
            notes.add("time anchor not Month-DD-YYYY (kept as text, no timestamp)")
    session["extra"] = schema.to_json(
        {
            "batch": {key: value for key, value in batch.items() if key != "turns"},
            "turns_position": list(batch).index("turns"),
            "exchange_sizes": None if flat else [len(exchange) for exchange in groups],
        }
    )
    return session


def parse_message(message: Any, field: str, seen: set[str], key_orders: dict) -> schema.Turn:
    """A message → a turn named by its ``id``; ``role`` and ``content`` typed, every other key in ``extra``; a
    key order other than ``role, id, ..., content`` kept in the conversation's ``extra.message_key_orders``."""
    if not isinstance(message, dict):
        raise FieldError(field, f"expected a message object, got {type(message).__name__}")
    role, content, number = message.get("role"), message.get("content"), message.get("id")
    if role not in ROLES:
        raise FieldError(f"{field}.role", f"expected 'user' or 'assistant', got {role!r}")
    if not isinstance(content, str):
        raise FieldError(f"{field}.content", f"expected a string, got {type(content).__name__}")
    if not isinstance(number, int) or isinstance(number, bool):
        raise FieldError(f"{field}.id", f"expected an integer, got {number!r}")
    turn_id = str(number)
    if turn_id in seen:
        raise FieldError(f"{field}.id", f"{number} is the id of an earlier message too")
    seen.add(turn_id)
    turn = schema.empty_turn(turn_id, role, ROLES[role], content)
    others = {key: value for key, value in message.items() if key not in ("role", "id", "content")}
    if others:
        turn["extra"] = schema.to_json(others)
    if list(message) != ["role", "id", *others, "content"]:
        key_orders[turn_id] = list(message)
    return turn


def parse_question(
    conversation_id: str, ability: str, position: int, question: Any, field: str, turns: set[str], notes: Notes
) -> schema.Question:
    """A probing question → a ``qa`` row ``<conversation>:<ability>:<position>``: the ability its category, the
    reference answer whatever its key (JSON text if not a string), the rubric typed, ``source_chat_ids`` as
    turn ids (labelled by their key where it is an object of lists); the question whole in ``extra``."""
    if not isinstance(question, dict) or not isinstance(question.get("question"), str):
        raise FieldError(field, "expected an object with a string 'question'")
    row = schema.empty_question(f"{conversation_id}:{ability}:{position}", question["question"])
    row["category"] = ability
    key = next((key for key in ANSWER_KEYS if key in question), None)
    if key is None:
        notes.add("probing question without a reference answer")
    else:
        answer = question[key]
        row["answer"] = answer if isinstance(answer, str) else schema.to_json(answer)
    rubric = question.get("rubric", [])
    if not isinstance(rubric, list) or not all(isinstance(item, str) for item in rubric):
        raise FieldError(f"{field}.rubric", "expected a list of strings")
    row["rubric"] = rubric
    evidence = question.get("source_chat_ids")
    if evidence is None:
        notes.add("probing question without source_chat_ids")
    pieces = evidence_pieces(evidence, f"{field}.source_chat_ids")
    labelled = isinstance(evidence, dict)
    for label, chat_id in pieces:
        if isinstance(chat_id, int) and not isinstance(chat_id, bool) and str(chat_id) in turns:
            row["evidence_turn_ids"].append(str(chat_id))
            row["evidence_labels"] += [label] if labelled else []
        else:
            row["unresolved_evidence"].append(schema.to_json(chat_id))
    if row["unresolved_evidence"]:
        notes.add("source_chat_ids naming no message (in unresolved_evidence)")
    row["extra"] = schema.to_json({"probing_question": question, "ability": ability, "position": position})
    return row


def evidence_pieces(evidence: Any, field: str) -> list[tuple[str, Any]]:
    """(label, message id) of ``source_chat_ids``: a list (no label) or an object of lists (its keys)."""
    if evidence is None:
        return []
    if isinstance(evidence, list):
        return [("", item) for item in evidence]
    if isinstance(evidence, dict):
        pieces = []
        for label, items in evidence.items():
            if not isinstance(items, list):
                raise FieldError(f"{field}.{label}", f"expected a list of ids, got {type(items).__name__}")
            pieces += [(label, item) for item in items]
        return pieces
    raise FieldError(field, f"expected a list or an object of lists, got {type(evidence).__name__}")
