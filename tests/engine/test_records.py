"""The per-record loop: errors name file, record and field; a rejected record's notes are not counted."""

from __future__ import annotations

import pytest

from convhub.engine.readers.record_loop import convert_records
from convhub.errors import NESTED_TOO_DEEPLY, FieldError, Notes, SourceError


def _convert(raw, notes: Notes) -> dict:
    notes.add("seen")
    if "text" not in raw:
        raise FieldError("turns[0].text", "missing")
    if raw["text"] == "deep":
        raise RecursionError
    return {"text": raw["text"].strip()}


def test_records_are_converted_and_their_notes_counted():
    notes = Notes()
    records = list(convert_records("a.json", [(0, {"text": " hi "}), (1, {"text": "yo"})], _convert, notes))
    assert records == [{"text": "hi"}, {"text": "yo"}]
    assert notes == {"seen": 2}


def test_a_field_error_names_the_file_the_record_and_the_field():
    with pytest.raises(SourceError) as raised:
        list(convert_records("a.json", [("conv-7", {})], _convert, Notes()))
    assert str(raised.value) == "a.json, record conv-7, field 'turns[0].text': missing"


def test_a_value_nested_too_deeply_is_named_by_file_and_record():
    with pytest.raises(SourceError) as raised:
        list(convert_records("a.json", [(3, {"text": "deep"})], _convert, Notes()))
    assert (raised.value.path, raised.value.record, raised.value.problem) == ("a.json", 3, NESTED_TOO_DEEPLY)


def test_a_rejected_record_goes_to_reject_and_its_notes_are_not_counted():
    notes, rejected = Notes(), []
    items = [(0, {}), (1, {"text": "kept"})]
    records = list(
        convert_records(
            "a.json", items, _convert, notes, lambda error, raw: rejected.append((error.record, raw))
        )
    )
    assert records == [{"text": "kept"}]
    assert rejected == [(0, {})]
    assert notes == {"seen": 1}
