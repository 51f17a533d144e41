"""Canonical LoCoMo records → LoCoMo samples again: the inverse of ``builders.locomo.parse``.

Pure functions from a ``sessions`` row (Json columns decoded, or JSON text as the parser writes them) to
the sample it was parsed from, equal to it as a JSON value (integer answers come back integers, absent
keys stay absent, empty ``img_url`` lists stay). What is not kept, and so not rebuilt: the key order inside
objects (LoCoMo's own file is not consistent about it: turns list ``img_url`` before or after ``dia_id``), so
keys are written in the order most of ``locomo10.json`` uses. :func:`write_files` writes one
``<subset>.json`` per subset, as ``json.dumps(samples, indent=2)`` like LoCoMo's file.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from builders.locomo.parse import SESSION_TABLES, SPEAKER_KEYS
from convhub.export.exporter import Build, as_object, source_rows
from convhub.export.files import JsonListWriter, safe_join


def sample_from_record(record: dict[str, Any]) -> dict[str, Any]:
    """One ``sessions`` row → the LoCoMo sample (``qa``, ``conversation``, side tables, ``sample_id``)."""
    extra = as_object(record["extra"])
    absent = {name for name in SESSION_TABLES if name in extra and extra[name] is None}
    conversation = dict(zip(SPEAKER_KEYS, record["speakers"], strict=True))
    tables: dict[str, dict[str, Any]] = {name: {} for name in SESSION_TABLES}
    for session in record["sessions"]:
        number = session["session_id"].removeprefix("session_")
        session_extra = as_object(session["extra"])
        if session_extra.get("has_date_time", True):
            conversation[f"session_{number}_date_time"] = session["date_time"]
        conversation[session["session_id"]] = [turn_from_record(turn) for turn in session["turns"]]
        for name in ("event_summary", "observation"):
            if name in session_extra:
                tables[name][SESSION_TABLES[name].format(number)] = session_extra[name]
        if session["summary"] is not None:
            tables["session_summary"][SESSION_TABLES["session_summary"].format(number)] = session["summary"]
    conversation.update(extra.pop("conversation", {}))
    for name in SESSION_TABLES:
        tables[name].update(extra.pop(name, None) or {})
    sample = {"qa": [qa_from_question(question) for question in record["questions"]]}
    sample["conversation"] = conversation
    sample.update({name: table for name, table in tables.items() if name not in absent})
    sample["sample_id"] = record["conversation_id"]
    sample.update(extra)
    return sample


def turn_from_record(turn: dict[str, Any]) -> dict[str, Any]:
    """A turn → ``speaker``, image keys, ``dia_id``, the turn's own other keys, ``text``."""
    extra = as_object(turn["extra"])
    source: dict[str, Any] = {"speaker": turn["speaker"]}
    images = turn["images"] or []
    urls = [image["url"] for image in images if image["url"] is not None]
    if "img_url" in extra:  # an empty (or null) img_url, which no image holds
        source["img_url"] = extra.pop("img_url")
    elif urls:
        source["img_url"] = urls
    for key, field in (("blip_caption", "caption"), ("query", "query")):
        if images and images[0][field] is not None:
            source[key] = images[0][field]
    source["dia_id"] = turn["turn_id"]
    source.update(extra)  # re-download and any other key of the turn
    source["text"] = turn["text"]
    return source


def qa_from_question(question: dict[str, Any]) -> dict[str, Any]:
    """A question → LoCoMo's ``question``, ``answer`` (raw type), ``evidence`` (raw), ``category``..."""
    extra = as_object(question["extra"])
    qa: dict[str, Any] = {"question": question["question"]}
    raw = {field: extra.pop(field) for field in ("answer", "adversarial_answer") if field in extra}
    if question["answer"] is not None:
        qa["answer"] = raw.get("answer", question["answer"])
    if "evidence" in extra:
        qa["evidence"] = extra.pop("evidence")
    qa["category"] = question["category_id"]
    if question["adversarial_answer"] is not None:
        qa["adversarial_answer"] = raw.get("adversarial_answer", question["adversarial_answer"])
    qa.update(extra)
    return qa


def samples_by_subset(build: Build) -> Iterator[tuple[str, dict[str, Any]]]:
    """(subset, sample) of every ``sessions`` row, in the build's order (a subset's samples in file order)."""
    for _, record in source_rows(build, "locomo"):
        yield record["subset"], sample_from_record(record)


def write_files(build: Build, folder: Path) -> list[str]:
    """One ``<subset>.json`` list per subset, formatted as LoCoMo's own file (``indent=2``, ASCII-escaped)."""
    writers: dict[str, JsonListWriter] = {}
    try:
        for subset, sample in samples_by_subset(build):
            if subset not in writers:
                writers[subset] = JsonListWriter(safe_join(folder, f"{subset}.json"), ensure_ascii=True)
            writers[subset].append(sample)
    finally:
        for writer in writers.values():
            writer.close()
    return [f"{subset}.json" for subset in writers]
