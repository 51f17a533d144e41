"""LoCoMo's and LongMemEval's parsers on a session of many tiny turns (issue 54): the turns are made Arrow as they
are parsed (``session_turns``), evidence is still found among them, and the readers do not hold a raw record
while the caller converts and writes it."""

from __future__ import annotations

import io
import json
import sys
import weakref

import pyarrow as pa
import pytest

from convhub import schema
from convhub.builders.locomo import parse as locomo
from convhub.builders.locomo.builder import samples_of, side_table_rows
from convhub.builders.longmemeval import parse as longmemeval
from convhub.builders.longmemeval.builder import INSTANCES
from convhub.engine.readers.contract import Place
from convhub.engine.readers.json_list import JsonList, scan_json_array
from convhub.engine.readers.record_loop import convert_records
from convhub.engine.writers.arrow_rows import ArrowList, records_of_batch, rows_table
from convhub.errors import Notes

LONG = ArrowList.ROWS_CHUNK + 7
SESSIONS_SCHEMA = schema.SESSIONS_FEATURES.arrow_schema


def locomo_sample(count: int) -> dict:
    turns = [
        {"speaker": "Ana" if index % 2 else "Bo", "dia_id": f"D1:{index}", "text": f"t{index}"}
        for index in range(1, count + 1)
    ]
    qa = [{"question": "q?", "answer": "a", "evidence": [f"D1:{count - 2}", "D1:999999"], "category": 4}]
    return {
        "qa": qa,
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Bo",
            "session_1_date_time": "8 May, 2023",
            "session_1": turns,
        },
        "observation": {"session_1_observation": {"Ana": [["Ana talks.", [f"D1:{count}", "D1:0"]]]}},
        "event_summary": {},
        "session_summary": {},
        "sample_id": "conv-long",
    }


def test_a_long_locomo_session_is_arrow_and_its_evidence_is_found():
    record = locomo.parse_sample(locomo_sample(LONG), "one", Notes())
    turns = record["sessions"][0]["turns"]
    assert isinstance(turns, ArrowList) and len(turns) == LONG
    assert turns[LONG - 1]["turn_id"] == f"D1:{LONG}" and turns[LONG - 1]["text"] == f"t{LONG}"
    question = record["questions"][0]
    assert question["evidence_turn_ids"] == [f"D1:{LONG - 2}"]
    assert question["unresolved_evidence"] == ["D1:999999"]
    (observation,) = side_table_rows(record, "observation")
    assert observation["evidence_turn_ids"] == [f"D1:{LONG}"]


def test_a_long_locomo_session_gives_the_table_of_the_dicts():
    """The record with Arrow turns and the same record with its turns made dicts write one table."""
    record = locomo.parse_sample(locomo_sample(LONG), "one", Notes())
    as_dicts = {**record, "sessions": [{**s, "turns": list(s["turns"])} for s in record["sessions"]]}
    assert rows_table([record], SESSIONS_SCHEMA).equals(pa.Table.from_pylist([as_dicts], SESSIONS_SCHEMA))


def test_turn_ids_look_in_dict_and_arrow_sessions():
    record = locomo.parse_sample(locomo_sample(LONG), "one", Notes())
    short = schema.empty_session("session_2", [schema.empty_turn("D2:1", "Ana", "user", "hi")])
    ids = locomo.TurnIds([*record["sessions"], short])
    assert "D1:1" in ids and f"D1:{LONG}" in ids and "D2:1" in ids
    assert "D1:0" not in ids and "D2:2" not in ids and 7 not in ids


def longmemeval_instance(count: int, answers: set[int]) -> dict:
    turns = [
        {"role": "user" if index % 2 else "assistant", "content": f"t{index}"}
        | ({"has_answer": True} if index in answers else {})
        for index in range(1, count + 1)
    ]
    return {
        "question_id": "q1",
        "question_type": "single-session-user",
        "question": "q?",
        "answer": "a",
        "question_date": "2023/05/30 (Tue) 10:00",
        "haystack_session_ids": ["s1"],
        "haystack_dates": ["2023/05/20 (Sat) 02:21"],
        "haystack_sessions": [turns],
        "answer_session_ids": ["s1"],
    }


def test_a_long_longmemeval_session_is_arrow_with_every_has_answer_turn():
    answers = {1, ArrowList.ROWS_CHUNK, ArrowList.ROWS_CHUNK + 1, LONG}
    record = longmemeval.convert_instance(longmemeval_instance(LONG, answers), Notes(), "s", "s.json")
    turns = record["sessions"][0]["turns"]
    assert isinstance(turns, ArrowList) and len(turns) == LONG
    assert record["questions"][0]["evidence_turn_ids"] == [f"s1_{number}" for number in sorted(answers)]
    assert record["speakers"] == ["user", "assistant"]
    assert json.loads(turns[0]["extra"]) == {"has_answer": True} and turns[1]["extra"] is None


def test_a_bad_turn_of_a_long_longmemeval_session_is_named():
    instance = longmemeval_instance(LONG, set())
    instance["haystack_sessions"][0][ArrowList.ROWS_CHUNK + 2]["role"] = "system"
    with pytest.raises(Exception, match=rf"haystack_sessions\[0\]\[{ArrowList.ROWS_CHUNK + 2}\]\.role"):
        longmemeval.convert_instance(instance, Notes(), "s", "s.json")


LIST = b'[{"id": "a", "x": [1, 2]}, {"id": "b", "x": [3]}]'


def assert_held_only_by_the_caller(value) -> None:
    # (the name ``value`` and getrefcount's argument: a generator suspended at its yield would be a third)
    assert sys.getrefcount(value) == 3, sys.getrefcount(value)


@pytest.mark.parametrize("recover", [False, True])
def test_the_list_reader_holds_no_element_it_handed_on(recover, tmp_path):
    on_break = (lambda *args, **kwargs: None) if recover else None
    scan = scan_json_array(io.BytesIO(LIST), "l.json", on_break=on_break, key="id")
    for _, _, _, value in scan:
        assert_held_only_by_the_caller(value)
    (tmp_path / "l.json").write_bytes(LIST)
    reject = (lambda *args, **kwargs: None) if recover else None
    for _, value in JsonList("element", "id").read(str(tmp_path / "l.json"), reject):
        assert_held_only_by_the_caller(value)


def test_locomo_and_longmemeval_readers_hold_no_sample_they_handed_on(tmp_path):
    path = tmp_path / "l.json"
    path.write_bytes(b'[{"sample_id": "a"}, {"sample_id": "b"}]')
    for _, sample in samples_of(str(path)):
        assert_held_only_by_the_caller(sample)
    path.write_bytes(b'[{"question_id": "a"}, {"question_id": "b"}]')
    for _, instance in INSTANCES.read(str(path)):
        assert_held_only_by_the_caller(instance)


class Raw:
    """A raw record that can be watched (a weak reference) while its converted record is handed on."""


def test_the_record_loop_holds_no_raw_record_while_its_record_is_handed_on():
    def items():
        for position in range(2):
            yield Place("f.json", "f.json", position, position), Raw()

    for raw_ref in convert_records(items(), lambda raw, place, notes: weakref.ref(raw), Notes()):
        assert raw_ref() is None


def as_lists(records: list[dict]) -> list[dict]:
    return [
        {**record, "sessions": [{**s, "turns": list(s["turns"])} for s in record["sessions"]]}
        for record in records
    ]


def test_a_sessions_batch_read_back_keeps_long_sessions_arrow_and_every_value():
    """Read back for a view that takes Python records (LoCoMo's observations), a long session's turns stay the
    batch's Arrow array; every other value is ``to_pylist``'s, also in a slice of the batch."""
    long_record = locomo.parse_sample(locomo_sample(LONG), "one", Notes())
    short_record = locomo.parse_sample(locomo_sample(3) | {"sample_id": "conv-short"}, "one", Notes())
    table = rows_table([short_record, long_record, short_record, long_record], SESSIONS_SCHEMA)
    batch = pa.Table.from_batches(table.to_batches()).combine_chunks().to_batches()[0]
    for sliced in [batch, batch.slice(1, 2), batch.slice(2, 2)]:
        records = records_of_batch(sliced)
        assert as_lists(records) == sliced.to_pylist()
        long_sessions = [s for record in records for s in record["sessions"] if len(s["turns"]) >= LONG]
        assert long_sessions and all(isinstance(s["turns"], ArrowList) for s in long_sessions)
        assert [list(record) for record in records] == [list(row) for row in sliced.to_pylist()]


def test_a_batch_of_short_sessions_is_read_back_as_to_pylist():
    record = locomo.parse_sample(locomo_sample(3), "one", Notes())
    batch = rows_table([record], SESSIONS_SCHEMA).to_batches()[0]
    assert records_of_batch(batch) == batch.to_pylist()
