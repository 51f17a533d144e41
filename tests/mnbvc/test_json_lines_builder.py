"""The row helpers of JSON Lines sources (``convhub.builders.mnbvc.json_lines_builder``): a line's place in the
per-record loop, warnings
that stop at their limit, and a source row rebuilt in its key order."""

from __future__ import annotations

import logging

from convhub.builders.mnbvc import json_lines_builder
from convhub.engine.readers.contract import place_of_line
from convhub.engine.readers.record_loop import convert_records
from convhub.errors import FieldError, Notes, SourceError


def test_a_row_of_json_lines_is_named_by_its_line_and_converted_with_its_place():
    def convert(row, place, notes):
        notes.add("seen")
        if row.get("bad"):
            raise FieldError("bad", "not allowed")
        return {"line": place.line, "start": place.start, **row}

    notes, rejected = Notes(), []
    rows = [
        (place_of_line("f.jsonl", number, None, 10 * number), row)
        for number, row in enumerate([{"a": 1}, {"bad": True}, {"a": 3}], 1)
    ]
    reject = lambda error, raw: rejected.append(error)  # noqa: E731
    converted = list(convert_records(rows, convert, notes, reject))
    assert converted == [{"line": 1, "start": 10, "a": 1}, {"line": 3, "start": 30, "a": 3}]
    assert notes == {"seen": 2}
    assert str(rejected[0]) == str(SourceError("f.jsonl", "line 2", "bad", "not allowed"))


def test_line_warnings_stop_at_their_limit(caplog):
    warn = json_lines_builder.LineWarnings("f.jsonl", logging.getLogger("test.jsonl"), 2, "odd values")
    with caplog.at_level(logging.WARNING):
        for number in range(1, 6):
            warn(number, "field", "odd")
    assert [record.getMessage() for record in caplog.records] == [
        "f.jsonl, line 1, field: odd (raw string kept)",
        "f.jsonl, line 2, field: odd (raw string kept)",
        "f.jsonl: more odd values; counted in the normalizations",
    ]


def test_rebuilt_row_keeps_the_key_order():
    row = json_lines_builder.rebuilt_row(["id", "q", "meta", "gone"], {"id": 1, "meta": None}, {"q": "text"})
    assert list(row.items()) == [("id", 1), ("q", "text"), ("meta", None)]
