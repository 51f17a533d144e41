"""A grouped record's check for strings Parquet cannot store, made on its rows instead (``SurrogateScreen``): a
scan of each payload's ``marshal`` bytes and a check of each key, so that the records of a partition whose rows
and file names are clean are not checked one by one."""

from __future__ import annotations

import marshal

import pytest

from convhub.engine.grouping.group_by_key import payload
from convhub.engine.readers.storable import SurrogateScreen, may_hold_lone_surrogate
from convhub.engine.runners.input_shards import GroupShard, SortedPartition

#: Text UTF-8 can store, near the surrogates: Hangul's last syllables (0xED 0x9E), the private use area past them,
#: a character past the BMP (a surrogate pair in UTF-16, four bytes in UTF-8).
STORABLE = ["中文", "ascii", "한국어\ud7a3\ud7ff", "\ue000", "\U0001f600", ""]
LONE = ["\ud800", "a\udfffb", "\udbff\U0001f600", "x\udc80"]


def partition(rows: list, names: tuple[str, ...] = ("multiturn/m.jsonl",)) -> SortedPartition:
    files = [(name, f"/data/{name}") for name in names]
    return SortedPartition(GroupShard(files, [1] * len(files), 1), iter(rows))


def row(order: int, group: str = "c", order_text: str | None = None, question: str = "你好") -> tuple:
    key = (("ShareGPT", "会话", group), (order if order_text is None else order_text, 0, order))
    converted = {"问": question, "raw": {"来源": "ShareGPT", "多轮序号": order}}
    return key, payload(lambda: converted, b"{}")  # the payload a source's keyed_rows gives


@pytest.mark.parametrize("text", STORABLE)
def test_text_utf8_stores_is_clean_in_keys_values_and_nested(text):
    assert not may_hold_lone_surrogate(marshal.dumps({"k": [text, (1, text)], text: 2.5, "n": 2**70}))


@pytest.mark.parametrize("text", LONE)
def test_a_lone_surrogate_is_seen_in_a_value_and_in_a_key(text):
    assert may_hold_lone_surrogate(marshal.dumps({"k": [1, {"v": text}]}))
    assert may_hold_lone_surrogate(marshal.dumps({text: 1}))


def test_the_screen_passes_the_rows_on_as_they_are_and_says_they_are_clean():
    rows = [row(order) for order in range(1, 4)]
    screen = SurrogateScreen(partition(rows))
    assert list(screen) == rows
    assert screen.clean


@pytest.mark.parametrize("where", ["payload", "group", "order"])
def test_a_row_that_may_hold_a_lone_surrogate_ends_clean_from_that_row_on(where):
    bad = {
        "payload": row(2, question="\ud800"),
        "group": row(2, group="\ud800"),
        "order": row(2, order_text="\udfff"),
    }[where]
    screen = SurrogateScreen(partition([row(1), bad, row(3)]))
    seen = iter(screen)
    next(seen)
    assert screen.clean  # the rows before it: their records need no check
    assert next(seen) == bad
    assert not screen.clean
    next(seen)
    assert not screen.clean  # every later record is checked, the bad one rejected by name


def test_a_file_name_with_a_lone_surrogate_is_never_clean():
    """A file name undecodable bytes became (``surrogateescape``) reaches the records (``extra.file``)."""
    screen = SurrogateScreen(partition([row(1)], names=("multiturn/ok.jsonl", "multiturn/m\udcff.jsonl")))
    assert not screen.clean
    assert list(screen) == [row(1)]
