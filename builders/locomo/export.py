"""Canonical LoCoMo records → LoCoMo samples again, equal to the parsed ones as JSON values (integer answers
come back integers, absent keys stay absent, empty ``img_url`` lists stay): the inverse of ``parse``. Key order
inside objects is not kept (LoCoMo's own file varies it), so keys come in the order most of locomo10.json uses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from convhub.builders.locomo.parse import SESSION_TABLES, SPEAKER_KEYS
from convhub.export.exporter import Build, as_object, source_rows
from convhub.export.files import JsonListWriter, safe_join


def sample_from_record(record: dict[str, Any]) -> dict[str, Any]:
    """One ``sessions`` row (Json columns decoded, or JSON text) → its sample: ``qa``, ``conversation``, side
    tables, ``sample_id``, then the sample's own other keys."""
    extra = as_object(record["extra"])
    conversation = dict(zip(SPEAKER_KEYS, record["speakers"], strict=True))
    tables: dict[str, dict[str, Any]] = {name: {} for name in SESSION_TABLES}
    for session in record["sessions"]:
        number, session_extra = session["session_id"].removeprefix("session_"), as_object(session["extra"])
        if session_extra.get("has_date_time", True):
            conversation[f"session_{number}_date_time"] = session["date_time"]
        conversation[session["session_id"]] = [turn_from_record(turn) for turn in session["turns"]]
        # a null summary is no summary (an event or observation entry is an object, never null)
        entries = {**session_extra, "session_summary": session["summary"]}
        for name, key_format in SESSION_TABLES.items():
            if entries.get(name) is not None:
                tables[name][key_format.format(number)] = entries[name]
    conversation.update(extra.pop("conversation", {}))
    questions = [qa_from_question(question) for question in record["questions"]]
    sample = {"qa": questions, "conversation": conversation}
    for name, table in tables.items():
        unclaimed = extra.pop(name, {})  # null: the sample had no such table
        if unclaimed is not None:
            sample[name] = {**table, **unclaimed}
    return {**sample, "sample_id": record["conversation_id"], **extra}


def turn_from_record(turn: dict[str, Any]) -> dict[str, Any]:
    """A turn → ``speaker``, image keys, ``dia_id``, the turn's own other keys, ``text``."""
    extra, images = as_object(turn["extra"]), turn["images"] or []
    source: dict[str, Any] = {"speaker": turn["speaker"]}
    urls = [image["url"] for image in images if image["url"] is not None]
    if "img_url" in extra or urls:  # the extra's: an empty (or null) img_url, which no image holds
        source["img_url"] = extra.pop("img_url", urls)
    for key, field in (("blip_caption", "caption"), ("query", "query")):
        if images and images[0][field] is not None:
            source[key] = images[0][field]
    return {**source, "dia_id": turn["turn_id"], **extra, "text": turn["text"]}


def qa_from_question(question: dict[str, Any]) -> dict[str, Any]:
    """A question → ``question``, ``answer`` (its raw type), ``evidence`` (raw), ``category``, the rest."""
    extra = as_object(question["extra"])
    raw = {key: extra.pop(key) for key in ("answer", "adversarial_answer") if key in extra}
    qa: dict[str, Any] = {"question": question["question"]}
    if question["answer"] is not None:
        qa["answer"] = raw.get("answer", question["answer"])
    if "evidence" in extra:
        qa["evidence"] = extra.pop("evidence")
    qa["category"] = question["category_id"]
    if question["adversarial_answer"] is not None:
        qa["adversarial_answer"] = raw.get("adversarial_answer", question["adversarial_answer"])
    return {**qa, **extra}


def write_files(build: Build, folder: Path) -> list[str]:
    """One ``<subset>.json`` list per subset, its samples in the build's order, formatted as LoCoMo's own file
    (``indent=2``, ASCII-escaped)."""
    writers: dict[str, JsonListWriter] = {}
    try:
        for _, record in source_rows(build, "locomo"):
            if (subset := record["subset"]) not in writers:
                writers[subset] = JsonListWriter(safe_join(folder, f"{subset}.json"), ensure_ascii=True)
            writers[subset].append(sample_from_record(record))
    finally:
        for writer in writers.values():
            writer.close()
    return [f"{subset}.json" for subset in writers]
