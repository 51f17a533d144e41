"""The keyed-row glue (``convhub.engine.grouping.group_by_key``): rows keyed and converted in one pass, regrouped by the embedded
engine, and handed back per conversation in order, a refused row rejected alone."""

from __future__ import annotations

from convhub.engine.grouping import group_by_key, local_groupby
from convhub.engine.runners.input_shards import GroupShard, Partition
from convhub.errors import SourceError


def convert(number: int, row: dict) -> tuple:
    if row.get("bad"):
        raise SourceError("f.jsonl", f"line {number}", "bad", "refused")
    return (row["text"], number)


def key_row(number, row, raw):
    if row.get("skip"):
        return None
    if "group" not in row:
        raise SourceError("f.jsonl", f"line {number}", "group", "missing")
    return (row["group"],), (row["order"],), group_by_key.payload(convert, raw, number, row)


ROWS = [
    {"group": "b", "order": 2, "text": "b2"},
    {"group": "a", "order": 1, "text": "a1"},
    {"skip": True},
    {"order": 1},
    {"group": "b", "order": 1, "text": "b1", "bad": True},
    {"group": "b", "order": 1, "text": "b1-again"},
]


def test_rows_keyed_regrouped_and_read_back_in_order(tmp_path):
    rejected = []

    def reject(error, raw):
        rejected.append((error.record, error.field, raw))

    numbered = [(number, 0, f"raw{number}".encode(), row) for number, row in enumerate(ROWS, start=1)]
    keyed_rows = list(group_by_key.keyed_file_rows(numbered, 0, key_row, reject))
    assert [key for key, _, _ in keyed_rows] == [
        (("b",), (2, 0, 1)),
        (("a",), (1, 0, 2)),
        (("b",), (1, 0, 5)),
        (("b",), (1, 0, 6)),
    ]
    assert keyed_rows[0][2] == len(b"raw1") + 1  # the line's bytes with its end
    assert rejected == [("line 4", "group", b"raw4")]
    partitioned = local_groupby.write_partitions(lambda index: keyed_rows, [1], str(tmp_path), 1)
    group = GroupShard(files=[("f", "")], sizes=[1], partitions=1)
    rows = local_groupby.read_partition(Partition(group, partitioned, 0, (0, 1)))
    grouped = [(group, list(run)) for group, run in group_by_key.grouped_rows(rows, reject)]
    assert grouped == [
        (("a",), [((1, 0, 2), ("a1", 2))]),
        (("b",), [((1, 0, 6), ("b1-again", 6)), ((2, 0, 1), ("b2", 1))]),
    ]
    assert rejected[1] == ("line 5", "bad", b"raw5")  # rejected where its conversation is read, alone


def test_a_stream_regroups_only_adjacent_rows():
    """``adjacent_runs``: each run of one group sorted by key; a group whose rows lie apart comes as two runs."""
    rows = [{"group": g, "order": o, "text": f"{g}{o}"} for g, o in [("a", 2), ("a", 1), ("b", 1), ("a", 3)]]
    numbered = [(number, 0, b"raw", row) for number, row in enumerate(rows, start=1)]
    runs = group_by_key.grouped_rows(
        group_by_key.adjacent_runs(group_by_key.keyed_file_rows(numbered, 0, key_row))
    )
    assert [(group, [value for _, value in run]) for group, run in runs] == [
        (("a",), [("a1", 2), ("a2", 1)]),
        (("b",), [("b1", 3)]),
        (("a",), [("a3", 4)]),
    ]
