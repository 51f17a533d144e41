"""``Statistics.add_table``: the card's statistics from a table of ``sessions`` rows equal ``add`` of each row,
counters' key order included, whatever the table's chunks and slices."""

from __future__ import annotations

import pyarrow as pa

from convhub import schema
from convhub.engine.stats import Statistics

ARROW_SCHEMA = schema.SESSIONS_FEATURES.arrow_schema


def turn(index: int, role: str | None, text: str, acts=0, state=0, images=0) -> dict:
    made = schema.empty_turn(f"t{index}", "speaker", role, text)
    made["dialogue_acts"] = [{"type": "x", "intent": "i"}] * acts
    made["state"] = [{"domain": "d", "slot": "s", "value": "v"}] * state
    made["images"] = [{"url": "u"}] * images
    return made


def record(number: int, subset: str | None, language: str | None, sessions: list, categories=()) -> dict:
    questions = []
    for index, category in enumerate(categories):
        question = schema.empty_question(f"q{index}", "why?")
        question["category"] = category
        questions.append(question)
    return {
        "conversation_id": f"c{number}",
        "source": "test",
        "subset": subset,
        "language": language,
        "speakers": [],
        "sessions": [schema.empty_session(f"s{index}", turns) for index, turns in enumerate(sessions)],
        "questions": questions,
        "extra": None,
    }


RECORDS = [
    record(0, "b", "zh", [[turn(0, "user", "你好😀"), turn(1, "assistant", "hi", acts=2)]], ["single-hop"]),
    record(1, "a", "en", [], []),
    record(2, "a", None, [[], [turn(0, "system", "x", state=1, images=3)]], [None, "multi-hop", None]),
    record(3, None, "en", [[turn(0, None, "")]]),
    record(4, "b", "ja", [[turn(0, "assistant", "あ" * 7), turn(1, "user", "z")], [turn(2, "user", "y")]]),
    record(5, "a", "en", [[turn(0, "user", "q", acts=1, state=1)]], ["multi-hop"]),
]


def by_rows(records: list[dict], split: str = "train") -> dict:
    statistics = Statistics()
    for row in records:
        statistics.add(split, row)
    return _seen(statistics)


def _seen(statistics: Statistics) -> dict:
    """Every (split, subset)'s counts, and each counter's keys in their order."""
    return {
        key: (stats.to_dict(), [list(getattr(stats, name)) for name in stats.COUNTERS])
        for key, stats in statistics.by_split_subset.items()
    }


def by_table(table: pa.Table, split: str = "train", statistics: Statistics | None = None) -> dict:
    statistics = Statistics() if statistics is None else statistics
    statistics.add_table(split, table)
    return _seen(statistics)


def test_a_table_counts_as_its_rows():
    table = pa.Table.from_pylist(RECORDS, schema=ARROW_SCHEMA)
    assert by_table(table) == by_rows(RECORDS)


def test_chunks_and_slices_count_only_their_rows():
    chunked = pa.concat_tables(pa.Table.from_pylist([row], schema=ARROW_SCHEMA) for row in RECORDS)
    assert by_table(chunked) == by_rows(RECORDS)
    whole = pa.Table.from_pylist(RECORDS, schema=ARROW_SCHEMA)
    assert by_table(whole.slice(2, 3)) == by_rows(RECORDS[2:5])


def test_tables_added_after_rows_merge_as_rows_would():
    named = [row for row in RECORDS if row["subset"] is not None]  # the card's table sorts the subsets
    statistics, expected = Statistics(), Statistics()
    for row in named[:3]:
        statistics.add("train", row)
        expected.add("train", row)
    statistics.add("test", named[3])
    expected.add("test", named[3])
    for row in named[3:]:
        expected.add("train", row)
    rest = pa.Table.from_pylist(named[3:], schema=ARROW_SCHEMA)
    assert by_table(rest, statistics=statistics) == _seen(expected)
    assert statistics.table() == expected.table()


def test_an_empty_table_counts_nothing():
    assert by_table(pa.Table.from_pylist([], schema=ARROW_SCHEMA)) == {}
