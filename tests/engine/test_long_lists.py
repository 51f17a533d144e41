"""``convhub.engine.readers.long_lists``: a large element's long lists read as ``LazyJsonArray``s give exactly the
values, errors and rejections ``json``'s whole decode gives (issue 54). The lists here are short: the tests lower
the thresholds (``walk_every_element``) so that every element is walked and a list of three items is lazy."""

from __future__ import annotations

import io
import json
import pickle
import re

import pytest

from convhub.builders.locomo import parse as locomo
from convhub.builders.locomo.builder import SAMPLES
from convhub.builders.longmemeval import parse as longmemeval
from convhub.builders.longmemeval.builder import INSTANCES
from convhub.engine.readers import json_list, long_lists
from convhub.engine.readers.json_list import scan_json_array
from convhub.engine.readers.long_lists import LazyJsonArray, materialized
from convhub.engine.readers.record_loop import convert_records
from convhub.errors import Notes, SourceError

PATHS: long_lists.LongLists = (("s", re.compile(r"t[0-9]+")), ("h", int))
CHUNK_SIZES = (1, 7, 64, 1 << 22)

#: Items json reads with a twist (as ``test_json_list.GOOD_TEXTS``): integers past 64 bits, NaN, infinities,
#: float overflow, a pair written by ``ensure_ascii``, lone surrogates, a repeated key, non-ASCII text.
ITEMS = (
    '{"n": 123456789012345678901234567890}, {"x": NaN}, -Infinity, 1.5e400, -0.0, '
    '"\\ud83d\\ude00", {"lone": "\\ud800"}, {"a": 1, "a": 2}, [1, [2, {}]], "北山 ] } [", null, true, 12'
)
GOOD_TEXTS = [
    '[{"k": "x", "s": {"t1": [' + ITEMS + '], "t2": [1, 2], "u": [' + ITEMS + "]}}]",
    '[{"h": [[' + ITEMS + '], [], [1, 2, 3]], "h2": [[' + ITEMS + "]]}]",
    '[ {"s" : { "t1" :\n[ 1 ,\t2 , 3 , 4 ] , "t1": [5, 6, 7, 8] } , "s": 3 } , {"h": {"0": [1, 2, 3, 4]}} ]',
    '[{"s": {"t1": {"not": "a list"}, "t2": "nor this", "t3": []}}, {"h": []}, 7, "x", [1, 2, 3, 4]]',
]


@pytest.fixture
def walk_every_element(monkeypatch):
    """Every element walked, every list of more than two items on a path lazy, indexed every second item."""
    monkeypatch.setattr(json_list, "LONG_ELEMENT_CHARS", 0)
    monkeypatch.setattr(long_lists, "KEPT_ITEMS", 2)
    monkeypatch.setattr(long_lists, "STRIDE", 2)


def scanned(raw: bytes, chunk_size: int = 1 << 22, **options) -> list:
    return list(
        scan_json_array(io.BytesIO(raw), "f.json", chunk_size=chunk_size, long_lists=PATHS, **options)
    )


def lazy_lists_in(value) -> list[LazyJsonArray]:
    if isinstance(value, LazyJsonArray):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return [lazy for item in items for lazy in lazy_lists_in(item)]


@pytest.mark.usefixtures("walk_every_element")
@pytest.mark.parametrize("text", GOOD_TEXTS)
@pytest.mark.parametrize("chunk_size", CHUNK_SIZES)
def test_values_with_lazy_lists_are_json_loads_values(text, chunk_size):
    raw = text.encode()
    found = scanned(raw, chunk_size)
    assert repr([materialized(value) for *_, value in found]) == repr(json.loads(text))
    assert [repr(json.loads(raw[start:end])) for start, end, *_ in found] == [
        repr(materialized(value)) for *_, value in found
    ]
    assert [(start, end) for start, end, *_ in found] == [
        (start, end) for start, end, *_ in scan_json_array(io.BytesIO(raw), "f.json")
    ]


@pytest.mark.usefixtures("walk_every_element")
def test_only_long_lists_on_a_path_are_lazy_and_each_reads_as_its_list():
    [(_, _, _, value)] = scanned(GOOD_TEXTS[0].encode())
    assert isinstance(value["s"]["t1"], LazyJsonArray)
    assert value["s"]["t2"] == [1, 2] and type(value["s"]["t2"]) is list  # (two items: kept)
    assert type(value["s"]["u"]) is list  # (not on a path)
    [(_, _, _, value)] = scanned(GOOD_TEXTS[1].encode())
    assert [type(session) for session in value["h"]] == [LazyJsonArray, list, LazyJsonArray]
    assert type(value["h2"][0]) is list


@pytest.mark.usefixtures("walk_every_element")
def test_a_lazy_list_indexes_slices_and_compares_as_its_list():
    expected = json.loads("[" + ITEMS.replace("NaN", "0") + "]")
    [(_, _, _, value)] = scanned(('[{"s": {"t1": [' + ITEMS.replace("NaN", "0") + "]}}]").encode())
    lazy = value["s"]["t1"]
    assert len(lazy) == len(expected) and list(lazy) == expected
    assert [lazy[index] for index in range(-len(expected), len(expected))] == expected + expected
    assert lazy[3:8:2] == expected[3:8:2] and lazy[::-1] == expected[::-1]
    assert lazy == expected and expected == lazy and lazy != expected[:-1] and lazy != "x"
    with pytest.raises(IndexError):
        lazy[len(expected)]
    assert repr(lazy) == f"LazyJsonArray({len(expected)} items)"
    assert pickle.loads(pickle.dumps(lazy)) == expected  # (as a raw record crosses to a worker process)


@pytest.mark.usefixtures("walk_every_element")
def test_a_lazy_list_keeps_its_own_text_not_the_buffers():
    text = '[{"s": {"t1": [1, 2, 3, 4]}, "pad": "' + "x" * 10_000 + '"}]'
    [(_, _, _, value)] = scanned(text.encode())
    assert value["s"]["t1"]._text == "1, 2, 3, 4"


BROKEN_TEXTS = [
    '[{"s": {"t1": [1, 2, 3 4, 5]}}]',
    '[{"s": {"t1": [1, 2, 3, {"a" 1}, 5]}}]',
    '[{"s": {"t1": [1, 2, 3, 4,]}}]',
    '[{"s": {"t1": [1, 2, 3, 4]}, }]',
    '[{"s": {"t1": [1, 2, 3, 4] "t2": 1}}]',
    '[{"s": {"t1": [1, 2, 3, "\x01"]}}]',
    '[{"s": {"t1": [1, 2, 3, 1' + "0" * 5000 + "]}}]",
    '[{"h": [[1, 2, 3, 4], [1, 2, 3, tru]]}]',
    '[{"h": [[1, 2, 3, 4]',
    '[{"s": {"t1": [1, 2, 3, "cut',
    '[{"s": {"t1": [1, 2, 3, 4]}}, {"s": {"t1": [1, 2, 3, 4]}} {"s": 1}]',
    '[{"h": [[' + "[" * 100_000 + "]" * 100_000 + ", 1, 2]]}]",
]


def outcome(raw: bytes, chunk_size: int, **options) -> tuple[list, str | None]:
    values = []
    try:
        for _, _, _, value in scan_json_array(io.BytesIO(raw), "f.json", chunk_size=chunk_size, **options):
            values.append(repr(materialized(value)))
    except SourceError as error:
        return values, str(error)
    return values, None


@pytest.mark.parametrize("text", BROKEN_TEXTS)
@pytest.mark.parametrize("chunk_size", [7, 1 << 22])
def test_a_break_in_a_long_list_is_the_error_of_a_whole_decode(monkeypatch, text, chunk_size):
    raw = text.encode()
    plain = outcome(raw, chunk_size)
    assert plain[1] is not None
    monkeypatch.setattr(json_list, "LONG_ELEMENT_CHARS", 0)
    monkeypatch.setattr(long_lists, "KEPT_ITEMS", 2)
    assert outcome(raw, chunk_size, long_lists=PATHS) == plain


@pytest.mark.parametrize("text", BROKEN_TEXTS[:8])
def test_reading_on_after_a_break_in_a_long_list_rejects_what_a_whole_decode_rejects(monkeypatch, text):
    raw = ("[" + text[1:-1] + ', {"s": {"t1": [1, 2, 3, 4]}}]').encode()

    def rejections(**options) -> list:
        broken: list = []
        values = outcome(
            raw,
            7,
            on_break=lambda error, skipped, _, records: broken.append((error, skipped, records)),
            key="s",
            **options,
        )
        return [values, [(str(error), bytes(skipped), lost) for error, skipped, lost in broken]]

    plain = rejections()
    assert plain[1] and plain[0][0]  # (a break, and the element after it read)
    monkeypatch.setattr(json_list, "LONG_ELEMENT_CHARS", 0)
    monkeypatch.setattr(long_lists, "KEPT_ITEMS", 2)
    assert rejections(long_lists=PATHS) == plain


def test_materialized_makes_every_lazy_list_a_list_and_leaves_plain_values_as_they_are():
    plain = {"a": [1, {"b": 2}], "c": "d"}
    assert materialized(plain) is plain
    assert materialized(7) == 7
    deep: list = []
    for _ in range(50_000):  # (no recursion through a raw value nested deep)
        deep = [deep]
    assert materialized(deep) is deep


# -- the sources: the same records, a bad turn named, a rejected record's raw whole ------------------------


def locomo_file(turns: int) -> bytes:
    session = [
        {"speaker": "Ana", "dia_id": f"D1:{index}", "text": f"t{index}"} for index in range(1, turns + 1)
    ]
    sample = {
        "sample_id": "conv-1",
        "conversation": {"speaker_a": "Ana", "speaker_b": "Bo", "session_1": session, "session_01": session},
        "qa": [{"question": "q?", "answer": "a", "evidence": [f"D1:{turns}"], "category": 4}],
        "observation": {"session_1_observation": {"Ana": [["Ana talks.", "D1:2"]]}},
        "event_summary": {},
        "session_summary": {},
    }
    return json.dumps([sample, {**sample, "sample_id": "conv-2"}]).encode()


def longmemeval_file(turns: int) -> bytes:
    session = [{"role": "user", "content": f"t{index}", "has_answer": index == 3} for index in range(turns)]
    instance = {
        "question_id": "q1",
        "question_type": "single-session-user",
        "question": "q?",
        "answer": "a",
        "question_date": "2023/05/30 (Tue) 10:00",
        "haystack_session_ids": ["s1", "s2"],
        "haystack_dates": ["2023/05/20 (Sat) 02:21", "2023/05/21 (Sun) 02:21"],
        "haystack_sessions": [session, session[:2]],
        "answer_session_ids": ["s1"],
    }
    return json.dumps([instance, {**instance, "question_id": "q2"}]).encode()


SOURCES = {
    "locomo": (SAMPLES, locomo.convert, locomo_file),
    "longmemeval": (INSTANCES, longmemeval.convert, longmemeval_file),
}


def built(source: str, path, reject=None) -> tuple[list, Notes]:
    reader, convert, _ = SOURCES[source]
    notes = Notes()
    records = []
    for record in convert_records(
        reader.read(str(path), reject), convert, notes, **({"reject": reject} if reject else {})
    ):
        records.append({**record, "sessions": [{**s, "turns": list(s["turns"])} for s in record["sessions"]]})
    return records, notes


@pytest.mark.parametrize("source", SOURCES)
def test_a_source_builds_the_same_records_with_its_long_lists_lazy(tmp_path, monkeypatch, source):
    path = tmp_path / "data.json"
    path.write_bytes(SOURCES[source][2](9))
    expected = built(source, path)
    monkeypatch.setattr(json_list, "LONG_ELEMENT_CHARS", 0)
    monkeypatch.setattr(long_lists, "KEPT_ITEMS", 2)
    seen = []
    reader = SOURCES[source][0]
    for _, value in reader.read(str(path)):
        seen.extend(type(lazy) for lazy in lazy_lists_in(value))
    assert seen == [LazyJsonArray, LazyJsonArray]  # (LoCoMo's session_01 is no session: kept whole)
    assert built(source, path) == expected


@pytest.mark.parametrize("source", SOURCES)
def test_a_record_rejected_for_a_bad_turn_in_a_lazy_list_is_quarantined_whole(tmp_path, monkeypatch, source):
    data = json.loads(SOURCES[source][2](9))
    session = data[1]["conversation"]["session_1"] if source == "locomo" else data[1]["haystack_sessions"][0]
    session[7]["speaker" if source == "locomo" else "role"] = "nobody"
    path = tmp_path / "data.json"
    path.write_bytes(json.dumps(data).encode())
    monkeypatch.setattr(json_list, "LONG_ELEMENT_CHARS", 0)
    monkeypatch.setattr(long_lists, "KEPT_ITEMS", 2)
    rejected: list = []
    records, _ = built(
        source, path, reject=lambda error, raw=None, *args, **kwargs: rejected.append((error, raw))
    )
    assert len(records) == 1
    [(error, raw)] = rejected
    assert "[7]" in str(error) and raw == data[1] and type(raw) is dict
    assert not lazy_lists_in(raw)
