"""The per-record loop: errors name file, record and field; a rejected record's notes are not counted; a repeated
id is refused by name (``UniqueIds``)."""

from __future__ import annotations

import pytest

from convhub.engine.readers.contract import Place
from convhub.engine.readers.record_loop import UniqueIds, convert_records
from convhub.errors import NESTED_TOO_DEEPLY, FieldError, Notes, SourceError


def _convert(raw, place: Place, notes: Notes) -> dict:
    notes.add("seen")
    if "text" not in raw:
        raise FieldError("turns[0].text", "missing")
    if raw["text"] == "deep":
        raise RecursionError
    return {"text": raw["text"].strip(), "at": place.position}


def placed(*raws, file: str = "a.json") -> list[tuple[Place, dict]]:
    """Each raw record at its position in ``file``, named by its ``id`` where it has one."""
    return [(Place(file, file, raw.get("id", index), index), raw) for index, raw in enumerate(raws)]


def test_records_are_converted_with_their_place_and_their_notes_counted():
    notes = Notes()
    records = list(convert_records(placed({"text": " hi "}, {"text": "yo"}), _convert, notes))
    assert records == [{"text": "hi", "at": 0}, {"text": "yo", "at": 1}]
    assert notes == {"seen": 2}


def test_a_field_error_names_the_file_the_record_and_the_field():
    with pytest.raises(SourceError) as raised:
        list(convert_records(placed({"id": "conv-7"}), _convert, Notes()))
    assert str(raised.value) == "a.json, record conv-7, field 'turns[0].text': missing"


def test_a_value_nested_too_deeply_is_named_by_file_and_record():
    items = placed({"text": "a"}, {"text": "a"}, {"text": "a"}, {"text": "deep"})
    with pytest.raises(SourceError) as raised:
        list(convert_records(items, _convert, Notes()))
    assert (raised.value.path, raised.value.record, raised.value.problem) == ("a.json", 3, NESTED_TOO_DEEPLY)


def test_a_rejected_record_goes_to_reject_and_its_notes_are_not_counted():
    notes, rejected = Notes(), []
    records = list(
        convert_records(
            placed({}, {"text": "kept"}),
            _convert,
            notes,
            lambda error, raw: rejected.append((error.record, raw)),
        )
    )
    assert records == [{"text": "kept", "at": 1}]
    assert rejected == [(0, {})]
    assert notes == {"seen": 1}


def test_a_repeated_id_in_one_file_names_the_field_and_the_first_record():
    rejected, notes = [], Notes()
    items = [
        (Place("a.json", "a.json", index, index), raw)
        for index, raw in enumerate(
            [{"id": "x", "text": "1"}, {"id": "y", "text": "2"}, {"id": "x", "text": "3"}]
        )
    ]
    unique = UniqueIds("id")
    kept = list(
        convert_records(items, _convert, notes, lambda error, raw: rejected.append((str(error), raw)), unique)
    )
    assert kept == [{"text": "1", "at": 0}, {"text": "2", "at": 1}]
    assert rejected == [
        ("a.json, record 2, field 'id': duplicate id 'x', also in a.json, record 0", items[2][1])
    ]
    assert notes == {"seen": 2}  # (the duplicate's normalizations are not counted)


def test_a_record_that_failed_to_convert_takes_no_id():
    items = placed({"id": "x"}, {"id": "x", "text": "kept"})
    assert list(convert_records(items, _convert, Notes(), lambda error, raw: None, UniqueIds("id"))) == [
        {"text": "kept", "at": 1}
    ]


def test_ids_across_files_name_the_file_that_held_the_id_first_and_a_second_pass_repeats_nothing():
    first_files: dict = {}
    for _ in range(2):  # a stream reads a file again: its own ids are no repeats
        assert (
            len(
                list(
                    convert_records(
                        placed({"id": "x", "text": "1"}),
                        _convert,
                        Notes(),
                        unique=UniqueIds("id", first_files),
                    )
                )
            )
            == 1
        )
    with pytest.raises(SourceError) as raised:
        list(
            convert_records(
                placed({"id": "x", "text": "2"}, file="b.json"),
                _convert,
                Notes(),
                unique=UniqueIds("id", first_files),
            )
        )
    assert str(raised.value) == "b.json, record x, field 'id': duplicate id 'x', also in a.json"
