"""The embedded engine's group-by (``convhub.engine.grouping.local_groupby``), with keyed rows the tests make themselves: every
conversation comes out whole and in key order, whatever the writers, partitions and slices; the order of the
groups is Python's; the first error is a serial pass's."""

from __future__ import annotations

import marshal
import os
from functools import partial

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convhub.engine.grouping import group_by_key, local_groupby
from convhub.engine.runners import cuts
from convhub.engine.runners.input_shards import (
    PARTITION_BYTE_WORK,
    GroupShard,
    Partition,
    shard_name,
    shard_work,
)
from convhub.errors import SourceError

#: Texts that stress byte order: a prefix, a zero character, a lone surrogate, past the BMP, the private use area.
TEXTS = [
    "",
    "a",
    "ab",
    "a\x00",
    "a\x00b",
    "a\x01",
    "b",
    "中",
    "\ud800",
    "\ud7ff",
    "\ue000",
    "\U0001f600",
    "A",
]


def keyed_file(files: list[list[tuple]], file_index: int):
    """A stand-in for a source's ``keyed_rows``: file ``file_index`` of ``files`` holds (group, order) keys; the
    payload says where the row was, and a row whose group is ``("bad",)`` is a SourceError."""
    for line, (group, order) in enumerate(files[file_index], start=1):
        if group == ("bad",):
            raise SourceError(f"f{file_index}", f"line {line}", None, "bad row")
        yield (group, order), marshal.dumps((file_index, line)), 10


def read_all(partitioned: local_groupby.Partitioned, slices: int = 1) -> list[list[tuple]]:
    """Every conversation of every partition (each read as ``slices`` slices): its (key, payload) rows."""
    conversations = []
    for partition in range(len(partitioned.source_bytes)):
        for number in range(slices):
            shard = Partition(GROUP, partitioned, partition, (number, slices))
            for row in local_groupby.read_partition(shard):
                if not conversations or conversations[-1][-1][0][0] != row[0][0]:
                    conversations.append([])
                conversations[-1].append((row[0], marshal.loads(row[1])))
    return conversations


#: The group shard the partitions in these tests were regrouped from (only its name is read).
GROUP = GroupShard(files=[("f0", "")], sizes=[0], partitions=1)

SCATTERED = [
    [(("s", "c1"), (3,)), (("s", "c2"), (1,)), (("t", "c1"), (1,))],
    [(("s", "c1"), (1,)), (("s", "c3"), (2,)), (("s", "c2"), (0,))],
    [(("s", "c3"), (1,)), (("s", "c1"), (2,)), (("s", "c1"), (-5,))],
]


@pytest.mark.slow
@pytest.mark.parametrize("count", [1, 2, 5])
@pytest.mark.parametrize("processes", [1, 2])
def test_every_conversation_comes_out_whole_and_in_key_order(tmp_path, count, processes):
    sizes = [os.path.getsize(__file__)] * len(SCATTERED)
    written = local_groupby.write_partitions(
        partial(keyed_file, SCATTERED), sizes, str(tmp_path), count, processes
    )
    assert len(written.rows) == min(processes, len(SCATTERED))  # one payload file per writer
    assert sum(written.source_bytes) == 10 * 9
    conversations = read_all(written)
    by_group = {conversation[0][0][0]: conversation for conversation in conversations}
    assert len(conversations) == len(by_group) == 4  # no conversation split between partitions or runs
    assert [key[1] for key, _ in by_group[("s", "c1")]] == [(-5,), (1,), (2,), (3,)]
    assert [where for _, where in by_group[("s", "c1")]] == [(2, 3), (1, 1), (2, 2), (0, 1)]
    assert [key[1] for key, _ in by_group[("s", "c2")]] == [(0,), (1,)]
    # within a partition, conversations are in Python's order of their groups
    for partition in range(count):
        shard = Partition(GROUP, written, partition, (0, 1))
        groups = list(dict.fromkeys(key[0] for key, _ in local_groupby.read_partition(shard)))
        assert groups == sorted(groups)
        assert all(group_by_key.partition_of(group, count) == partition for group in groups)


def test_slices_of_a_partition_cover_it_once_in_order(tmp_path):
    files = [[((f"g{n % 11}",), (n,)) for n in range(60)]]
    written = local_groupby.write_partitions(partial(keyed_file, files), [1], str(tmp_path), 1)
    whole = read_all(written)
    assert len(whole) == 11
    assert read_all(written, slices=3) == whole
    sliced = [list(local_groupby.partition_keys(written, 0, (number, 4))) for number in range(4)]
    assert (
        shard_work(Partition(GROUP, written, 0, (1, 4))) == 60 * 10 / 4 * PARTITION_BYTE_WORK
    )  # what the local engine shares out
    assert [len(part) for part in sliced] == [2, 3, 3, 3]
    assert [(group, row[0]) for part in sliced for group, rows in part for row in rows] == [
        key for conversation in whole for key, _ in conversation
    ]


def test_keys_made_python_a_run_at_a_time_are_each_conversations_keys(tmp_path, monkeypatch):
    """Conversations of 1 to 9 rows and one of 40, read in runs of at most 8 rows of keys (the longer ones alone):
    each comes out whole, sorted, with its own rows only, as with one conversation per run."""
    lengths = [1, 3, 9, 2, 40, 5, 8, 1, 7]
    rows = [((f"g{index}",), (-line,)) for index, length in enumerate(lengths) for line in range(length)]
    files = [rows[0::2], rows[1::2]]
    written = local_groupby.write_partitions(partial(keyed_file, files), [1, 1], str(tmp_path), 1)
    monkeypatch.setattr(local_groupby, "KEYS_AT_ONCE", 1)
    one_at_a_time = list(local_groupby.partition_keys(written, 0))
    monkeypatch.setattr(local_groupby, "KEYS_AT_ONCE", 8)
    in_runs = list(local_groupby.partition_keys(written, 0))
    assert in_runs == one_at_a_time
    assert [(group, len(rows)) for group, rows in in_runs] == [
        ((f"g{n}",), n_rows) for n, n_rows in enumerate(lengths)
    ]
    for _, rows in in_runs:
        assert [row[0] for row in rows] == sorted(row[0] for row in rows)
    assert list(local_groupby._runs_of_conversations([0, 1, 4, 13, 15, 55, 60], 8)) == [
        [0, 1, 4],
        [4, 13],
        [13, 15],
        [15, 55],
        [55, 60],
    ]


def test_the_first_error_is_the_one_a_serial_pass_meets_first(tmp_path):
    """Writers stop at their own first bad row; the error raised is the one of the earliest file, even when the
    writer of a later file (here the first writer, which takes the biggest file) fails too."""
    files = [[(("a",), (1,)), (("bad",), (2,))], [(("b",), (1,))], [(("bad",), (1,))]]
    sizes = [20, 10, 100]
    assert cuts.share_files(sizes, 2) == [[2], [0, 1]]
    for processes in (1, 2):
        folder = tmp_path / f"p{processes}"
        folder.mkdir()
        with pytest.raises(SourceError, match=r"^f0, record line 2: bad row"):
            local_groupby.write_partitions(partial(keyed_file, files), sizes, str(folder), 2, processes)


def test_partition_shards_slice_each_partition_by_its_source_bytes_and_remove_their_files(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("CONVHUB_TMPDIR", str(tmp_path))

    class Source:
        def keyed_rows(self, group, file_index):
            return keyed_file(files, file_index)

    owner = Source()
    files = [[((f"g{n}",), (n,)) for n in range(30)]]  # 300 source bytes
    group = GroupShard(files=[("f0", "")], sizes=[300], partitions=2)
    shards = local_groupby.partition_shards(owner, group, slice_bytes=50)
    partitioned = shards[0].partitioned
    assert [shard.part[1] for shard in shards] == [
        group_by_key.partition_count(size, 50)
        for size in partitioned.source_bytes
        for _ in range(group_by_key.partition_count(size, 50))
    ]
    assert sum(partitioned.source_bytes) == 300
    assert all(shard.group is group and shard_name(shard) == "f0" for shard in shards)
    rows = [row for shard in shards for row in local_groupby.read_partition(shard)]
    assert sorted(key[0] for key, _ in rows) == sorted((f"g{n}",) for n in range(30))
    paths = [partitioned.keys, *partitioned.rows]
    assert all(os.path.exists(path) for path in paths)
    local_groupby.remove_partitions(shards)
    assert not any(os.path.exists(path) for path in paths)
    assert not os.path.exists(os.path.dirname(partitioned.keys))  # the partitions folder, released


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(TEXTS) | st.text(), st.sampled_from(TEXTS) | st.text()), max_size=12)
)
def test_group_bytes_sort_as_python_sorts_the_texts(groups):
    """The bytes DuckDB sorts give Python's order of the groups, and no two groups share their bytes."""
    assert sorted(groups, key=local_groupby.group_bytes) == sorted(groups)
    assert len({local_groupby.group_bytes(group) for group in groups}) == len(set(groups))


def test_the_engine_sorts_groups_as_python_does(tmp_path):
    """DuckDB's sort of the keys, read back: Python's order of the groups (a zero character, a prefix, a lone
    surrogate and characters past the BMP included)."""
    groups = [(first, second) for first in TEXTS for second in ("x", "")]
    files = [[(group, (0,)) for group in reversed(groups)]]
    written = local_groupby.write_partitions(partial(keyed_file, files), [1], str(tmp_path), 1)
    assert [conversation[0][0][0] for conversation in read_all(written)] == sorted(groups)
