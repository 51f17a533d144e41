"""A conversation of a million tiny turns (issue 54): the record's surrogate check holds one slice of its JSON,
not the whole record's, a parser's turns can be made Arrow columns a chunk at a time (``arrow_rows.session_turns``)
with the table the dicts gave, and LoCoMo's and LongMemEval's builds of one long session stay within the
large-record line (the reader holds its turns as their text: ``readers.long_lists``)."""

from __future__ import annotations

import tracemalloc

#: The benchmark's inputs and harness, so that the test measures what ``large_record.py --tiny-turns`` does.
import large_record
import orjson
import pyarrow as pa
import pytest

from convhub import schema
from convhub.engine.readers import storable
from convhub.engine.writers.arrow_rows import ArrowList, rows_table, session_turns

SESSIONS_SCHEMA = schema.SESSIONS_FEATURES.arrow_schema


def tiny_turns(count: int, text=lambda index: f"t{index}") -> list[dict]:
    return [schema.empty_turn(f"D1:{index}", "Priya", "user", text(index)) for index in range(count)]


def record_of(turns) -> dict:
    return {
        "conversation_id": "c",
        "source": "locomo",
        "subset": "one",
        "language": "en",
        "speakers": ["Priya", "Tomas"],
        "sessions": [schema.empty_session("session_1", turns)],
        "questions": [],
        "extra": None,
    }


@pytest.mark.slow
def test_the_check_of_a_long_conversation_holds_a_slice_of_its_json():
    """Encoded whole, the check of 200,000 tiny turns took 2.6 times the record's JSON (orjson's growing
    buffer); a slice at a time, a small part of it."""
    record = record_of(tiny_turns(200_000))
    json_size = len(orjson.dumps(record))
    tracemalloc.start()
    try:
        assert storable.unencodable_field(record) is None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 0.25 * json_size, (peak, json_size)


@pytest.mark.slow
def test_a_lone_surrogate_in_the_last_slice_is_named():
    turns = tiny_turns(200_000)
    turns[-1]["text"] = "\udc80"
    assert storable.unencodable_field(record_of(turns)) == "sessions[0].turns[199999].text"


def test_turns_made_a_chunk_at_a_time_give_the_table_of_the_dicts():
    count = 3 * ArrowList.ROWS_CHUNK + 5
    turns = session_turns(iter(tiny_turns(count)))
    assert isinstance(turns, ArrowList) and len(turns) == count
    written = rows_table([record_of(turns)], SESSIONS_SCHEMA)
    assert written.equals(pa.Table.from_pylist([record_of(tiny_turns(count))], SESSIONS_SCHEMA))
    assert turns[count - 1] == tiny_turns(count)[-1]


def test_few_turns_stay_dicts():
    made = session_turns(iter(tiny_turns(ArrowList.ROWS_CHUNK - 1)))
    assert made == tiny_turns(ArrowList.ROWS_CHUNK - 1)
    assert session_turns(iter([])) == []


@pytest.mark.parametrize("bad", [0, ArrowList.ROWS_CHUNK + 1])
def test_a_lone_surrogate_keeps_every_turn_a_dict_for_the_check_to_name(bad):
    count = 2 * ArrowList.ROWS_CHUNK + 3

    def text(index):
        return "\ud800" if index == bad else f"t{index}"

    made = session_turns(iter(tiny_turns(count, text)))
    assert made == tiny_turns(count, text)
    assert storable.unencodable_field(record_of(made)) == f"sessions[0].turns[{bad}].text"


#: Turns in the one long session of each source's case: where the large-record line is met with some margin
#: (``docs/performance.md``, 2026-11-29, third pass). A smaller session is measured against fixed costs (the
#: reader's growing buffer, Parquet's writer, the allocator's pages): at 100,000 turns (6 MB) LoCoMo's build
#: peaked 6.7x its input, LongMemEval's 8.8-10x, while a million turns peak at 3.6x and 5.4x. LongMemEval's
#: 300,000 turns peak at 5.8-5.9x (its ``turns`` view, every turn with its conversation's and session's ids).
TINY_TURNS = {"locomo": 300_000, "longmemeval": 500_000}


@pytest.mark.slow
@pytest.mark.parametrize("source", sorted(TINY_TURNS))
def test_one_long_session_of_tiny_turns_stays_within_the_large_record_line(tmp_path, source):
    """One session of many tiny turns (18 MB for LoCoMo, 30 MB for LongMemEval): the build's peak above a one-turn
    build's, over the input, as ``benchmarks/large_record.py --tiny-turns`` measures it (its harness, a fresh
    process per build)."""
    from harness import BUILD, run_case

    small = large_record.write_tiny_turns(source, tmp_path / "small", 1)
    large = large_record.write_tiny_turns(source, tmp_path / "large", TINY_TURNS[source])
    input_mib = large_record.input_megabytes(large)
    _, small_peak, _ = run_case(BUILD, [source, str(small), "null", "1"])
    _, large_peak, _ = run_case(BUILD, [source, str(large), "null", "1"])
    multiple = (large_peak - small_peak) / input_mib
    assert multiple <= large_record.TARGET_MULTIPLE, f"{multiple:.1f}x the input ({small_peak}, {large_peak})"
