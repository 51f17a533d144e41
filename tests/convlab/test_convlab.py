"""ConvLab-3 unified datasets: every quirk of SOURCES.md on the project's sample, real files, exact rebuild."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import zipfile
from pathlib import Path

import datasets
import pytest
from conftest import shared_data
from convhub import cli
from convhub.build import build_source, check_source
from convhub.convlab import export, parse, scan
from convhub.convlab.builder import ConvLabBuilder, SubsetInput, find_local_inputs
from convhub.errors import Notes, SourceError
from hypothesis import example, given, settings
from hypothesis import strategies as st

SAMPLE = Path(ConvLabBuilder.sample_dir())
REAL_DATASETS = ConvLabBuilder.DEFAULT_SUBSETS


def sample_dialogues(name: str) -> list[dict]:
    source = {s.name: s for s in find_local_inputs(str(SAMPLE), None)}[name]
    return source.read_json("dialogues.json")


def records_by_id(data_dir, subsets=None) -> tuple[dict[str, dict], dict[str, str], Notes]:
    builder = ConvLabBuilder(data_dir=str(data_dir), subsets=subsets)
    notes = Notes()
    records, splits = {}, {}
    for split, record in builder.iter_records(notes):
        records[record["conversation_id"]] = record
        splits[record["conversation_id"]] = split
    return records, splits, notes


def turn_extra(turn: dict) -> dict:
    return json.loads(turn["extra"]) if turn["extra"] else {}


@pytest.fixture(scope="module")
def sample_records():
    return records_by_id(SAMPLE)


@pytest.fixture(scope="module")
def sample_build(tmp_path_factory):
    return build_source("convlab", tmp_path_factory.mktemp("convlab") / "out", data_dir=str(SAMPLE))


# -- the sample: every quirk of SOURCES.md -----------------------------------------------------


def test_sample_covers_both_layouts():
    kinds = {source.name: source.kind for source in find_local_inputs(str(SAMPLE), None)}
    assert kinds == {"toychat": "folder", "toyhotel": "zip"}


def test_goal_missing_or_present(sample_records):
    records, _, notes = sample_records
    with_goal = json.loads(records["toyhotel-train-0"]["extra"])
    assert with_goal["goal"]["inform"] == {"hotel": {"price range": "cheap", "parking": "yes"}}
    assert "goal" not in json.loads(records["toyhotel-train-1"]["extra"])
    assert "goal" not in json.loads(records["toychat-train-0"]["extra"])
    assert notes["dialogue without goal"] == 4


def test_extra_dialogue_and_turn_keys_are_kept(sample_records):
    records, _, _ = sample_records
    multi = json.loads(records["toyhotel-train-1"]["extra"])
    assert multi["type"] == "multi-domain" and multi["original_id"] == 17  # integer id type kept
    assert set(multi) >= {"user_state_init", "user_state_final", "domains"}
    chat = json.loads(records["toychat-train-0"]["extra"])
    assert chat["topic"] == "weekend" and chat["persona"]["user"] == ["I like hiking."]
    assert json.loads(records["toyhotel-train-0"]["extra"])["finished"] is True
    keys = set()
    for record in records.values():
        for turn in record["sessions"][0]["turns"]:
            keys |= set(turn_extra(turn))
    expected = {"emotion", "booked", "active_intent", "requested_slots", "service_call", "db_results"}
    expected |= {
        "user_state",
        "db_query",
        "candidates",
        "checked_sentence",
        "checked_passage",
        "concepts",
        "tripleset",
    }
    assert expected <= keys


def test_dialogue_acts_missing_on_a_turn_and_on_every_turn_of_a_dataset(sample_records):
    records, _, notes = sample_records
    silent = records["toyhotel-train-1"]["sessions"][0]["turns"][1]
    assert silent["dialogue_acts"] == [] and turn_extra(silent)["dialogue_acts_absent"] is True
    chat_turns = [t for r in records.values() if r["subset"] == "toychat" for t in r["sessions"][0]["turns"]]
    assert chat_turns and all(turn_extra(t)["dialogue_acts_absent"] for t in chat_turns)
    assert notes["turn without dialogue_acts (extra.dialogue_acts_absent)"] == 1 + len(chat_turns)
    two_kinds = records["toyhotel-train-1"]["sessions"][0]["turns"][2]
    assert turn_extra(two_kinds)["dialogue_acts_kinds"] == ["categorical", "non-categorical"]


def test_three_act_kinds_spans_and_empty_binary(sample_records):
    records, _, _ = sample_records
    turns = records["toyhotel-train-0"]["sessions"][0]["turns"]
    first = turns[0]
    assert [(a["type"], a["slot"], a["value"]) for a in first["dialogue_acts"]] == [
        ("categorical", "price range", "cheap"),
        ("categorical", "parking", "yes"),
        ("non-categorical", "area", "north"),
    ]
    span = first["dialogue_acts"][2]
    assert first["text"][span["start"] : span["end"]] == "north"
    assert first["dialogue_acts"][0]["start"] is None  # categorical: no span
    binary = [a for a in turns[1]["dialogue_acts"] if a["type"] == "binary"]
    reqmore = {key: binary[1][key] for key in ("intent", "domain", "slot", "value")}
    assert reqmore == {"intent": "reqmore", "domain": "", "slot": "", "value": None}
    no_span = turns[3]["dialogue_acts"][0]
    assert no_span["type"] == "non-categorical" and no_span["value"] == "01223 000001"
    assert no_span["start"] is None and no_span["end"] is None


def test_state_keeps_empty_dontcare_and_absent_slots_apart(sample_records):
    records, _, notes = sample_records
    full = {
        (s["domain"], s["slot"]): s["value"]
        for s in records["toyhotel-test-0"]["sessions"][0]["turns"][0]["state"]
    }
    assert full[("hotel", "price range")] == "dontcare"
    assert full[("hotel", "name")] == "" and full[("attraction", "area")] == ""
    filled_turn = records["toyhotel-train-1"]["sessions"][0]["turns"][1]
    assert filled_turn["state"] == [
        {"domain": "attraction", "slot": "area", "value": "centre"}
    ]  # absent slots unlisted
    assert turn_extra(filled_turn)["state_empty_domains"] == ["weather"]
    empty_state = records["toyhotel-validation-0"]["sessions"][0]["turns"][0]
    assert empty_state["state"] == [] and turn_extra(empty_state)["state_empty_domains"] == []
    system_turn = records["toyhotel-train-0"]["sessions"][0]["turns"][1]
    assert system_turn["state"] == [] and "state_empty_domains" not in turn_extra(system_turn)
    assert notes["empty domain dict in a state (kept in extra.state_empty_domains)"] == 2


def test_speaker_order_single_turn_and_empty_utterance(sample_records):
    records, _, notes = sample_records
    turns = records["toyhotel-train-1"]["sessions"][0]["turns"]
    assert (turns[0]["speaker"], turns[0]["role"]) == ("system", "assistant")
    assert (turns[-1]["speaker"], turns[-1]["role"]) == ("user", "user")
    assert turns[1]["text"] == ""
    assert len(records["toyhotel-validation-0"]["sessions"][0]["turns"]) == 1
    assert notes["empty utterance"] == 1 and notes["dialogue with a single turn"] == 2
    assert records["toyhotel-train-1"]["speakers"] == ["system", "user"]
    assert records["toychat-train-0"]["language"] == "en"


def test_every_sample_dialogue_rebuilds_exactly(sample_records):
    records, splits, _ = sample_records
    for name in ("toyhotel", "toychat"):
        for dialogue in sample_dialogues(name):
            record = records[dialogue["dialogue_id"]]
            assert splits[dialogue["dialogue_id"]] == dialogue["data_split"]
            assert export.dialogue_from_record(record, dialogue["data_split"]) == dialogue


# -- acts and state that do not fit the typed lists ------------------------------------------


def test_unrepresentable_acts_and_state_keep_the_raw_value():
    notes = Notes()
    odd_acts = {
        "categorical": [{"intent": "inform", "domain": "d", "slot": "s", "value": 3}],
        "binary": [],
        "x": [],
    }
    odd_state = {"d": {"s": ["a", "b"], "t": "ok"}}
    turn = {"speaker": "user", "utterance": "u", "utt_idx": 0, "dialogue_acts": odd_acts, "state": odd_state}
    record = parse.parse_turn(turn, notes, "f", "dlg", 0)
    extra = turn_extra(record)
    assert extra["dialogue_acts"] == odd_acts and extra["state"] == odd_state
    assert record["state"] == [{"domain": "d", "slot": "t", "value": "ok"}]  # what fits stays typed
    assert export.turn_from_record(record) == turn
    assert notes["state not representable as typed slots (raw kept in the turn's extra)"] == 1


_SCALARS = st.one_of(
    st.text(max_size=3),
    st.integers(min_value=-(2**33), max_value=2**33),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, width=32),
)
_KEYS = st.sampled_from(["intent", "domain", "slot", "value", "start", "end", "other"])
_SPAN = st.integers(min_value=-(2**31), max_value=2**31 - 1)
_TEXT_FIELDS = dict.fromkeys(("intent", "domain", "slot", "value"), st.text(max_size=2))
_VALID_ACT = st.fixed_dictionaries({}, optional={**_TEXT_FIELDS, "start": _SPAN, "end": _SPAN})
_VALID_STATE = st.dictionaries(
    st.text(max_size=2), st.dictionaries(st.text(max_size=2), st.text(max_size=2), max_size=3), max_size=3
)


def _mostly(strategy, *others):
    """``strategy`` 4 times in 5, else one of ``others``: exact and inexact values both come up often."""
    return st.integers(0, 4).flatmap(lambda draw: strategy if draw else st.one_of(*others))


def _with_one_odd_field(valid, key, value):
    return st.builds(lambda item, key, value: {**item, key: value}, valid, key, value)


_ACT = _mostly(_VALID_ACT, _with_one_odd_field(_VALID_ACT, _KEYS, _SCALARS), _SCALARS)
_ACTS = _mostly(
    st.dictionaries(
        st.sampled_from([*parse.ACT_KINDS, "x"]), _mostly(st.lists(_ACT, max_size=3), _SCALARS), max_size=4
    ),
    _SCALARS,
)
_STATE = _mostly(
    _VALID_STATE,
    _with_one_odd_field(_VALID_STATE, st.text(max_size=2), _SCALARS),
    _with_one_odd_field(_VALID_STATE, st.text(max_size=2), st.dictionaries(st.just("slot"), _SCALARS)),
    _SCALARS,
)


@settings(max_examples=400, deadline=None)
@given(acts=_ACTS, state=_STATE)
@example(acts={"binary": [{"intent": "a", "other": "x"}]}, state={"d": {}})
@example(acts={"non-categorical": [{"start": 2**31, "end": 3}]}, state={"d": {"s": None}})
@example(acts={"categorical": [{"value": None}], "binary": [{"start": True}]}, state={"d": []})
def test_acts_and_state_are_kept_raw_exactly_when_the_typed_form_would_not_rebuild_them(acts, state):
    """parse_acts / parse_state decide "exact" while reading; that decision is the rebuild's equality."""
    extra: dict = {}
    typed = parse.parse_acts(acts, extra, Notes())
    kinds = list(acts) if isinstance(acts, dict) else []
    assert ("dialogue_acts" in extra) == (parse.acts_to_source(typed, kinds) != acts)
    extra = {}
    typed = parse.parse_state(state, extra, Notes())
    empty = extra.get(parse.STATE_EMPTY_DOMAINS, [])
    assert ("state" in extra) == (parse.state_to_source(typed, empty) != state)


def test_a_source_turn_key_named_like_a_marker_is_escaped_not_refused():
    """Before, the key was refused; now it is kept under one more backslash and comes back as it was."""
    turn = {
        "speaker": "user",
        "utterance": "",
        "utt_idx": 0,
        "state_empty_domains": [],
        "\\dialogue_acts_kinds": 1,
    }
    record = parse.parse_turn(turn, Notes(), "f.json", "dlg", 0)
    extra = turn_extra(record)
    assert extra["\\state_empty_domains"] == [] and extra["\\\\dialogue_acts_kinds"] == 1
    assert extra["dialogue_acts_absent"] is True and "state_empty_domains" not in extra  # the markers, bare
    assert export.turn_from_record(record) == turn


# -- streaming -----------------------------------------------------------------------------------


def test_scan_reports_exact_byte_ranges_across_chunk_boundaries():
    dialogues = [
        {"dialogue_id": f"x-{i}", "data_split": "train", "text": "北山 " * i, "n": 12345} for i in range(40)
    ]
    raw = ("\ufeff[ " + " ,\n".join(json.dumps(d, ensure_ascii=False) for d in dialogues) + "\n]\n").encode()
    found = list(scan.scan_json_array(io.BytesIO(raw), "mem", chunk_size=7))
    assert [value for _, _, value in found] == dialogues
    for start, end, value in found:
        assert json.loads(raw[start:end]) == value
    ranges = scan.index_dialogues(io.BytesIO(raw), "mem")["train"]
    assert [d["dialogue_id"] for _, d in scan.read_ranges(io.BytesIO(raw), ranges[5:9], "mem")] == [
        "x-5",
        "x-6",
        "x-7",
        "x-8",
    ]


@pytest.mark.parametrize("indent", [None, 0, 2, 4])
def test_indented_files_scan_like_the_decoder_and_keep_json_values(indent, monkeypatch):
    """The indented-file fast path (find the closing brace, orjson) gives the decoder's ranges and json's
    values, also for what orjson reads differently: integers past 64 bits, lone surrogates, NaN, 1e400."""
    odd = {
        "big": 18446744073709551616,
        "neg": -9223372036854775809,
        "nan": float("nan"),
        "surrogate": "\ud800",
    }
    dialogues = [
        {"dialogue_id": f"x-{i}", "data_split": "train", "nested": {"a": [{"b": "} \n }"}]}, "n": 1.5}
        for i in range(30)
    ]
    dialogues[7]["odd"] = odd
    dialogues[9]["inf"] = "1e400"
    raw = json.dumps(dialogues, indent=indent).replace('"1e400"', "1e400").encode()
    fast_path = scan._indented_object
    hits = []
    monkeypatch.setattr(scan, "_indented_object", lambda *a: hits.append(fast_path(*a)) or hits[-1])
    for chunk_size in (64, 1 << 22):
        found = list(scan.scan_json_array(io.BytesIO(raw), "mem", chunk_size=chunk_size))
        with monkeypatch.context() as without:
            without.setattr(scan, "_indented_object", lambda *a: None)
            decoded = list(scan.scan_json_array(io.BytesIO(raw), "mem", chunk_size=chunk_size))
        assert [(start, end) for start, end, _ in found] == [(start, end) for start, end, _ in decoded]
        assert len(found) == 30
    # indent=0 closes inner objects at column 0 too: orjson refuses the first candidate, the decoder goes on
    assert (sum(hit is not None for hit in hits) >= 25) == (indent in (2, 4))
    ranges = scan.index_dialogues(io.BytesIO(raw), "mem")["train"]
    read = dict(scan.read_ranges(io.BytesIO(raw), ranges, "mem"))
    assert read[7]["odd"]["big"] == 18446744073709551616 and isinstance(read[7]["odd"]["neg"], int)
    assert read[7]["odd"]["surrogate"] == "\ud800" and read[7]["odd"]["nan"] != read[7]["odd"]["nan"]
    assert read[9]["inf"] == float("inf")
    assert json.dumps(read[3]) == json.dumps(dialogues[3])


def test_shards_are_consecutive_even_and_balanced_by_bytes():
    from convhub.convlab.builder import MIN_DIALOGUES_PER_SHARD, shard_ranges

    def ranges(count, size=lambda i: 100 + i % 7 * 50):
        starts = [0]
        for i in range(count):
            starts.append(starts[-1] + size(i))
        return [(starts[i], starts[i + 1], i) for i in range(count)]

    assert shard_ranges([]) == []
    small = ranges(2 * MIN_DIALOGUES_PER_SHARD - 1)
    assert shard_ranges(small) == [small]
    for count in (2 * MIN_DIALOGUES_PER_SHARD, 1000, 2500, 8438):
        given = ranges(count)
        shards = shard_ranges(given)
        assert len(shards) >= 2 and len(shards) % 2 == 0 and all(shards)
        assert [item for shard in shards for item in shard] == given
        sizes = [sum(end - start for start, end, _ in shard) for shard in shards]
        assert max(sizes) - min(sizes) <= 2 * 400  # at most one dialogue each side of a cut
    skewed = shard_ranges(ranges(400, lambda i: 1000 if i < 100 else 10))
    assert len(skewed[0]) < len(skewed[1])  # bytes, not dialogue counts, set the cut


def test_every_large_split_gets_two_shards_and_a_large_zip_is_read_from_one_copy(tmp_path, monkeypatch):

    template = sample_dialogues("toyhotel")[0]
    dialogues = [
        {**template, "dataset": "big", "data_split": split, "dialogue_id": f"big-{split}-{i}"}
        for split, count in (("train", 250), ("validation", 200), ("test", 20))
        for i in range(count)
    ]
    (tmp_path / "in" / "big").mkdir(parents=True)
    with zipfile.ZipFile(tmp_path / "in" / "big" / "data.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("data/dialogues.json", json.dumps(dialogues, indent=2))
    expected = [d["dialogue_id"] for d in dialogues]

    def build(name, num_proc):
        result = build_source(
            "convlab", tmp_path / name, data_dir=str(tmp_path / "in"), configs=["sessions"], num_proc=num_proc
        )
        tables = {
            split: datasets.load_dataset(
                "parquet",
                data_files=[str(result.output / f) for f in result.configs["sessions"].files[split]],
                split="train",
                cache_dir=str(tmp_path / "cache"),
            )
            for split in ("train", "validation", "test")
        }
        return {split: table.to_list() for split, table in tables.items()}

    monkeypatch.setattr(scan, "EXTRACT_MIN_BYTES", 1 << 40)
    from_zip = build("zip", 1)
    builder = ConvLabBuilder(config_name="sessions", data_dir=str(tmp_path / "in"))
    shards = builder.shards(datasets.DownloadManager())
    assert [len(shards[split]) for split in ("train", "validation", "test")] == [2, 2, 1]
    assert all(shard["copy"] is None for split in shards.values() for shard in split)
    scan._INDEX_CACHE.clear()
    monkeypatch.setattr(scan, "EXTRACT_MIN_BYTES", 0)
    shards = builder.shards(datasets.DownloadManager())
    copies = {shard["copy"] for split in shards.values() for shard in split}
    assert len(copies) == 1 and Path(copies.pop()).read_bytes() == json.dumps(dialogues, indent=2).encode()
    from_copy = build("copy", 2)
    assert from_copy == from_zip
    assert [row["conversation_id"] for split in from_zip.values() for row in split] == expected


def _dialogues_text(count: int, indent, split=lambda i: "train") -> bytes:
    turn = {"speaker": "user", "utterance": "} \n ] {", "utt_idx": 0}
    dialogues = [
        {"dataset": "d", "data_split": split(i), "dialogue_id": f"d-{i}", "n": i, "turns": [turn]}
        for i in range(count)
    ]
    return json.dumps(dialogues, indent=indent, ensure_ascii=False).encode()


_TEXT_EDITS = st.sampled_from(
    [
        ("none", lambda raw: raw),
        ("bom", lambda raw: "\ufeff".encode() + raw),
        ("truncated", lambda raw: raw[: len(raw) * 2 // 3]),
        ("trailing data", lambda raw: raw + b" x"),
        ("duplicate id", lambda raw: raw.replace(b'"d-2"', b'"d-1"')),
        ("bad split", lambda raw: raw.replace(b'"train"', b'"tr ain"', 1)),
        ("missing comma", lambda raw: raw.replace(b"},\n", b"}\n", 1)),
        ("not an object", lambda raw: raw.replace(b"[\n", b"[\n  7,\n", 1)),
        ("invalid utf-8", lambda raw: raw.replace(b"d-3", b"d-\xff3")),
        ("long integer", lambda raw: raw.replace(b'"n": 1', b'"n": 184467440737095516160')),
        ("nan", lambda raw: raw.replace(b'"n": 1', b'"n": NaN')),
        ("lone surrogate", lambda raw: raw.replace(b'"d-4"', b'"d-\\ud8004"')),
        ("crlf", lambda raw: raw.replace(b"\n", b"\r\n")),
        ("empty list", lambda raw: b"[\n]"),
    ]
)


def _index_or_error(raw: bytes, chunk_size: int = 1 << 22):
    try:
        return scan.index_dialogues(io.BytesIO(raw), "mem", chunk_size=chunk_size)
    except SourceError as error:
        return str(error)


@settings(max_examples=300, deadline=None)
@given(
    count=st.integers(0, 12),
    indent=st.sampled_from([None, 0, 1, 2, 4, "\t"]),
    edit=_TEXT_EDITS,
    chunk_size=st.sampled_from([16, 97, 1 << 22]),
)
def test_the_indented_fast_path_gives_the_decoding_scans_index_or_error(count, indent, edit, chunk_size):
    """The bytes-level index (``index_plain_list``) is gone; the one trick left, the scan's indented-object
    fast path, gives exactly the index, or the error, the decoder alone gives, for good and bad files."""
    plain = _dialogues_text(count, indent, split=lambda i: ("train", "test")[i % 2])
    raw = edit[1](plain)
    hits = []
    fast_path = scan._indented_object
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(scan, "_indented_object", lambda *a: hits.append(fast_path(*a)) or hits[-1])
        fast = _index_or_error(raw, chunk_size)
        patch.setattr(scan, "_indented_object", lambda *a: None)
        decoded = _index_or_error(raw, chunk_size)
    assert fast == decoded
    fits_a_chunk = chunk_size > len(raw)  # (a dialogue cut by a chunk's end goes to the decoder)
    if edit[0] in ("none", "crlf", "long integer") and indent in (1, 2, 4, "\t") and count and fits_a_chunk:
        assert any(hit is not None for hit in hits)  # what json.dump(indent=N) writes takes the fast path


def _write_zip(folder: Path, raw: bytes) -> Path:
    folder.mkdir(parents=True)
    with zipfile.ZipFile(folder / "data.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("data/dialogues.json", raw)
    return folder / "data.zip"


def test_a_stream_of_a_large_zip_reads_one_copy_made_while_scanning(tmp_path, monkeypatch):
    """(Before, a child process inflated the copy beside the scan; now a thread inflates and writes it.)"""

    raw = _dialogues_text(300, 2, split=lambda i: ("train", "validation", "test")[i % 3])
    _write_zip(tmp_path / "in" / "big", raw)
    monkeypatch.setattr(scan, "EXTRACT_MIN_BYTES", 0)
    builder = ConvLabBuilder(config_name="sessions", data_dir=str(tmp_path / "in"))
    shards = builder.shards(datasets.StreamingDownloadManager())
    copies = {shard["copy"] for split in shards.values() for shard in split}
    assert len(copies) == 1 and Path(copies.pop()).read_bytes() == raw
    expected = scan.index_dialogues(io.BytesIO(raw), "mem")
    assert {
        split: [r for shard in found for r in shard["ranges"]] for split, found in shards.items()
    } == expected
    streamed = {
        split: [row["conversation_id"] for row in rows]
        for split, rows in builder.as_streaming_dataset().items()
    }
    assert streamed == {
        split: [f"d-{position}" for _, _, position in ranges] for split, ranges in expected.items()
    }


def test_the_copy_of_a_large_zip_goes_to_convhub_tmpdir(tmp_path, monkeypatch):
    """As MNBVC's partitions: a user whose /tmp is small points every large temporary file elsewhere."""

    _write_zip(tmp_path / "in" / "big", _dialogues_text(20, 2, split=lambda i: ("train", "test")[i % 2]))
    monkeypatch.setattr(scan, "EXTRACT_MIN_BYTES", 0)
    monkeypatch.setattr(scan, "_TEMP_DIR", [])
    monkeypatch.setenv("CONVHUB_TMPDIR", str(tmp_path / "scratch"))
    (tmp_path / "scratch").mkdir()
    builder = ConvLabBuilder(config_name="sessions", data_dir=str(tmp_path / "in"))
    shards = builder.shards(datasets.DownloadManager())
    copies = {shard["copy"] for split in shards.values() for shard in split}
    assert len(copies) == 1
    assert Path(copies.pop()).parent.parent == tmp_path / "scratch"


def test_a_stream_and_a_build_in_one_process_share_one_scan_and_copy(tmp_path, monkeypatch):
    """(Before, a stream on a busy machine made no copy and a build scanned again to make one, beside a
    child process; ``spare_core`` and the child are gone, so both read the copy the first scan wrote.)"""

    raw = _dialogues_text(40, 2, split=lambda i: ("train", "test")[i % 2])
    _write_zip(tmp_path / "in" / "big", raw)
    monkeypatch.setattr(scan, "EXTRACT_MIN_BYTES", 0)
    builder = ConvLabBuilder(config_name="sessions", data_dir=str(tmp_path / "in"))
    expected = scan.index_dialogues(io.BytesIO(raw), "mem")
    streamed = builder.shards(datasets.StreamingDownloadManager())
    ranges = {split: [r for shard in found for r in shard["ranges"]] for split, found in streamed.items()}
    assert ranges == expected
    streamed_ids = [
        row["conversation_id"] for rows in builder.as_streaming_dataset().values() for row in rows
    ]
    assert streamed_ids == [f"d-{position}" for ranges in expected.values() for _, _, position in ranges]
    monkeypatch.setattr(scan, "index_dialogues", None)  # the build reuses the stream's scan
    shards = builder.shards(datasets.DownloadManager())
    copies = {shard["copy"] for split in [*shards.values(), *streamed.values()] for shard in split}
    assert len(copies) == 1 and Path(copies.pop()).read_bytes() == raw
    ranges = {split: [r for shard in found for r in shard["ranges"]] for split, found in shards.items()}
    assert ranges == expected


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda raw: raw.replace(b'"d-2"', b'"d-1"'), "duplicate dialogue_id 'd-1'"),
        (lambda raw: raw[:-40], "not valid JSON"),
        (lambda raw: raw.replace(b"d-3", b"d-\xff3"), "not valid UTF-8"),
    ],
)
def test_a_bad_large_zip_reports_what_the_decoding_scan_reports(tmp_path, monkeypatch, edit, problem):

    _write_zip(tmp_path / "in" / "big", edit(_dialogues_text(30, 2)))
    messages = []
    for threshold in (0, 1 << 40):  # scanned while copied out, then scanned in the zip
        monkeypatch.setattr(scan, "EXTRACT_MIN_BYTES", threshold)
        with pytest.raises(SourceError, match=problem) as error:
            check_source("convlab", str(tmp_path / "in"))
        messages.append(str(error.value))
    assert messages[0] == messages[1]


def test_a_corrupt_zip_member_is_reported_alike_with_or_without_a_copy(tmp_path, monkeypatch):

    path = _write_zip(tmp_path / "in" / "big", _dialogues_text(200, 2))
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 8] = bytes(8)  # inside the deflated member
    path.write_bytes(bytes(data))
    messages = []
    for threshold in (0, 1 << 40):  # scanned while copied out, then scanned in the zip
        monkeypatch.setattr(scan, "EXTRACT_MIN_BYTES", threshold)
        with pytest.raises(SourceError, match="corrupt or truncated zip member") as error:
            check_source("convlab", str(tmp_path / "in"))
        messages.append(str(error.value))
    assert messages[0] == messages[1]


class _FailingStream(io.BytesIO):
    """A stream that raises after ``good`` bytes, as a damaged zip member does partway."""

    def __init__(self, data: bytes, good: int):
        super().__init__(data)
        self.good = good

    def read(self, size=-1):
        if self.tell() >= self.good:
            raise zipfile.BadZipFile("Bad CRC-32")
        return super().read(min(size, self.good - self.tell()))


def test_the_read_ahead_copies_every_byte_and_raises_where_the_stream_broke(tmp_path):
    """The thread that inflates a large zip and writes its copy: the reader gets the bytes in order, the copy
    is complete, a stream error reaches the read past the good bytes, and a reader that stops early (a scan
    error) leaves no thread behind."""
    raw = _dialogues_text(60, 2)
    with (
        open(tmp_path / "copy", "wb") as copy,
        scan._ReadAhead(io.BytesIO(raw), copy, chunk_size=97) as ahead,
    ):
        read = [ahead.read(1000) for _ in range(len(raw) // 1000 + 2)]
    assert b"".join(read) == raw and read[-1] == b"" and all(len(part) == 1000 for part in read[:-2])
    assert (tmp_path / "copy").read_bytes() == raw
    with scan._ReadAhead(io.BytesIO(raw), io.BytesIO(), chunk_size=50) as ahead:
        assert scan.index_dialogues(ahead, "mem", chunk_size=300) == scan.index_dialogues(
            io.BytesIO(raw), "mem"
        )

    with (
        open(tmp_path / "broken", "wb") as copy,
        scan._ReadAhead(_FailingStream(raw, 500), copy, 64) as ahead,
    ):
        assert ahead.read(400) == raw[:400]  # what was asked, across the 64-byte chunks
        with pytest.raises(zipfile.BadZipFile, match="Bad CRC-32"):
            ahead.read(1000)
        assert ahead.read(10) == b""  # the error ends the stream

    ahead = scan._ReadAhead(io.BytesIO(raw * 50), io.BytesIO(), chunk_size=16, depth=1)
    with ahead:
        ahead.read(10)  # the scan stops here: the thread waits on a full queue
    assert not ahead._thread.is_alive()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (b'{"a": 1}', "expected a JSON list"),
        (b'[{"dialogue_id": "a", "data_split": "train"} {"x": 1}]', "expected ','"),
        (
            b'[{"dialogue_id": "a", "data_split": "train"}, {"dialogue_id": "a", "data_split": "test"}]',
            "duplicate",
        ),
        (b'[{"dialogue_id": "a", "data_split": "train"', "not valid JSON"),
        (b'[{"dialogue_id": "a", "data_split": "tr ain"}]', "not a usable split name"),
        (b"[1]", "expected a dialogue object"),
    ],
)
def test_bad_dialogues_file_names_file_and_record(text, problem):
    with pytest.raises(SourceError, match=problem) as error:
        scan.index_dialogues(io.BytesIO(text), "bad/dialogues.json")
    assert "bad/dialogues.json" in str(error.value)


def test_unknown_speaker_names_the_turn(tmp_path):
    data = tmp_path / "broken" / "data"
    data.mkdir(parents=True)
    dialogue = {"dataset": "broken", "data_split": "train", "dialogue_id": "broken-train-0", "domains": []}
    dialogue["turns"] = [{"speaker": "wizard", "utterance": "hi", "utt_idx": 0}]
    (data / "dialogues.json").write_text(json.dumps([dialogue]))
    with pytest.raises(SourceError, match=r"broken-train-0 turn 0.*'speaker'.*neither"):
        check_source("convlab", str(tmp_path))


def test_missing_subset_is_an_error_not_a_download(tmp_path):
    (tmp_path / "woz").mkdir()
    with pytest.raises(FileNotFoundError, match="no ConvLab dataset camrest"):
        find_local_inputs(str(tmp_path), ("camrest",))
    with pytest.raises(FileNotFoundError, match="no ConvLab dataset in"):
        find_local_inputs(str(tmp_path), None)


# -- the build ---------------------------------------------------------------------------------


def test_per_subset_configs_load_one_dataset_alone(sample_build):
    output = str(sample_build.output)
    everything = datasets.load_dataset(output, "sessions")
    alone = datasets.load_dataset(output, "sessions-toychat")
    assert set(alone) == {"train", "test"}  # toychat has no validation split
    assert set(alone["train"]["subset"]) == {"toychat"}
    assert set(everything["train"]["subset"]) == {"toychat", "toyhotel"}
    for view in ("turns", "messages", "dialogues"):
        for subset in ("toychat", "toyhotel"):
            part = datasets.load_dataset(output, f"{view}-{subset}")
            whole = datasets.load_dataset(output, view)
            for split in part:
                assert part[split].features == whole[split].features
                assert part[split].num_rows == sum(s == subset for s in whole[split]["subset"])
    card = (sample_build.output / "README.md").read_text()
    assert "config_name: turns-toyhotel" in card and "`database-toyhotel`" in card
    assert "qa" not in sample_build.configs  # ConvLab has no questions


def test_built_sessions_rebuild_the_source_dialogues(sample_build):
    loaded = datasets.load_dataset(str(sample_build.output), "sessions")
    rebuilt = {}
    for split, rows in loaded.items():
        for row in rows:
            rebuilt[row["conversation_id"]] = export.dialogue_from_record(row, split)
    for name in ("toyhotel", "toychat"):
        for dialogue in sample_dialogues(name):
            assert rebuilt[dialogue["dialogue_id"]] == dialogue


def test_dialogues_view_types_goal_domains_and_db_results(sample_build):
    rows = {
        r["conversation_id"]: r for r in datasets.load_dataset(str(sample_build.output), "dialogues")["train"]
    }
    first = rows["toyhotel-train-0"]
    assert first["original_id"] == "PMUL0001.json" and first["domains"] == ["hotel", "general"]
    assert first["goal"]["request"] == [{"domain": "hotel", "slot": "phone", "value": ""}]
    assert [
        (r["turn_id"], r["domain"], r["rank"], json.loads(r["entity"])["name"]) for r in first["db_results"]
    ] == [
        ("1", "hotel", 0, "Lark House"),
        ("1", "hotel", 1, "Acorn Lodge"),
    ]
    assert rows["toyhotel-train-1"]["goal"] is None and rows["toyhotel-train-1"]["original_id"] == "17"


def test_ontology_config_is_typed_and_rebuilds_exactly(sample_build):
    rows = {r["subset"]: r for r in datasets.load_dataset(str(sample_build.output), "ontology")["train"]}
    hotel = rows["toyhotel"]
    area = next(
        s for d in hotel["domains"] if d["name"] == "hotel" for s in d["slots"] if s["name"] == "area"
    )
    assert area["is_categorical"] is True and area["possible_values"] == ["north", "east", "centre"]
    reqmore = next(a for a in hotel["dialogue_acts"] if a["intent"] == "reqmore")
    assert (reqmore["type"], reqmore["domain"], reqmore["user"], reqmore["system"]) == (
        "binary",
        "",
        False,
        True,
    )
    with zipfile.ZipFile(SAMPLE / "toyhotel" / "data.zip") as archive:
        source = json.loads(archive.read("data/ontology.json"))
    assert export.ontology_from_row(hotel) == source  # the empty "weather" domain of the state included


def test_database_config(sample_build):
    rows = datasets.load_dataset(str(sample_build.output), "database")["train"]
    by_file = {}
    for row in rows:
        by_file.setdefault(row["file"], []).append(row)
    assert {row["domain"] for row in by_file["hotel_db.json"]} == {"hotel"}
    assert json.loads(by_file["hotel_db.json"][0]["entity"])["stars"] == 4
    pair = by_file["attraction_db.json"][1]
    assert (
        pair["domain"] == "attraction"
        and pair["entity_index"] == 1
        and json.loads(pair["entity"])[0] == "Kettle's Yard"
    )
    assert set(rows["subset"]) == {"toyhotel"}


def test_check_cli_on_the_sample(capsys):
    assert cli.main(["check", "convlab", "--sample"]) == 0
    out = capsys.readouterr().out
    assert "convlab: OK" in out and "toyhotel" in out and "empty utterance" in out


def test_num_proc_build_gives_the_same_rows(tmp_path, sample_build):
    other = build_source("convlab", tmp_path / "np", data_dir=str(SAMPLE), configs=["sessions"], num_proc=2)
    for split, info in other.configs["sessions"].splits.items():
        assert info.num_examples == sample_build.configs["sessions"].splits[split].num_examples


# -- real files --------------------------------------------------------------------------------


def dummy_folder(tmp_path) -> Path:
    """The 16 real dummy_data.json, each as <name>/dummy_data.json (symlinks: nothing copied)."""
    root = tmp_path / "dummies"
    for name in REAL_DATASETS:
        (root / name).mkdir(parents=True)
        os.symlink(shared_data("convlab", name, "dummy_data.json"), root / name / "dummy_data.json")
    return root


def test_the_16_real_dummy_files_parse_and_rebuild(tmp_path):
    root = dummy_folder(tmp_path)
    records, splits, notes = records_by_id(root)
    assert len(records) == 10 * len(REAL_DATASETS)
    assert notes["subset read from dummy_data.json (its first dialogues only, no ontology or database)"] == 16
    for name in REAL_DATASETS:
        for dialogue in json.loads((root / name / "dummy_data.json").read_text(encoding="utf-8")):
            record = records[dialogue["dialogue_id"]]
            assert export.dialogue_from_record(record, splits[dialogue["dialogue_id"]]) == dialogue
    assert {r["language"] for r in records.values() if r["subset"] == "crosswoz"} == {"zh"}
    assert all(
        turn_extra(t)["dialogue_acts_absent"]
        for r in records.values()
        if r["subset"] == "metalwoz"
        for t in r["sessions"][0]["turns"]
    )


def readme_table(name: str) -> dict[str, tuple[int, int, float]]:
    """split → (dialogues, utterances, avg_utt) from the dataset README's "Data Splits" table."""
    rows = {}
    for line in shared_data("convlab", name, "README.md").read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) > 4 and cells[0] in ("train", "validation", "test", "all"):
            rows[cells[0]] = (int(cells[1]), int(cells[2]), float(cells[3]))
    return rows


@pytest.fixture(scope="module")
def real_build(tmp_path_factory):
    data_dir = shared_data("convlab")
    shared_data("convlab", "camrest", "data.zip")
    return build_source(
        "convlab", tmp_path_factory.mktemp("real") / "out", data_dir=str(data_dir), subsets=["camrest", "woz"]
    )


@pytest.mark.parametrize("name", ["camrest", "woz"])
def test_full_builds_match_the_readme_tables(real_build, name):
    table = readme_table(name)
    assert set(table) == {"train", "validation", "test", "all"}
    stats = {split: s for (split, subset), s in real_build.statistics.sorted() if subset == name}
    for split, (dialogues, utterances, avg_utt) in table.items():
        if split == "all":
            dialogues_built = sum(s.conversations for s in stats.values())
            turns_built = sum(s.turns for s in stats.values())
        else:
            dialogues_built, turns_built = stats[split].conversations, stats[split].turns
        assert (dialogues_built, turns_built) == (dialogues, utterances), split
        assert round(turns_built / dialogues_built, 2) == avg_utt, split
    loaded = datasets.load_dataset(str(real_build.output), f"sessions-{name}")
    assert {split: rows.num_rows for split, rows in loaded.items()} == {
        split: row[0] for split, row in table.items() if split != "all"
    }
    turns = datasets.load_dataset(str(real_build.output), f"turns-{name}")
    assert sum(rows.num_rows for rows in turns.values()) == table["all"][1]


def test_real_ontology_and_database(real_build):
    ontology = {r["subset"]: r for r in datasets.load_dataset(str(real_build.output), "ontology")["train"]}
    assert set(ontology) == {"camrest", "woz"}
    with zipfile.ZipFile(shared_data("convlab", "woz", "data.zip")) as archive:
        source = json.loads(archive.read("data/ontology.json"))
    woz = ontology["woz"]
    woz["extra"] = None if woz["extra"] is None else json.dumps(woz["extra"])
    assert export.ontology_from_row(woz) == source
    database = datasets.load_dataset(str(real_build.output), "database-camrest")["train"]
    assert database.num_rows == 110 and set(database["domain"]) == {"restaurant"}
    assert set(database["file"]) == {"CamRestDB.json"}
    assert "database-woz" not in (real_build.output / "README.md").read_text()  # WOZ ships no database


def test_real_zip_dialogues_rebuild_exactly():
    records, _, _ = records_by_id(shared_data("convlab"), ("camrest", "woz"))
    for name in ("camrest", "woz"):
        source = SubsetInput(name, "zip", str(shared_data("convlab", name, "data.zip")))
        for dialogue in source.read_json("dialogues.json"):
            assert (
                export.dialogue_from_record(records[dialogue["dialogue_id"]], dialogue["data_split"])
                == dialogue
            )


def test_card_statistics_per_subset_and_split(real_build):
    card = (real_build.output / "README.md").read_text()
    assert re.search(r"\| train \| camrest \| 406 \| 406 \| 3,342 \| 0 \| 8\.23 \|", card)
    assert re.search(r"\| test \| woz \| 400 \| 400 \| 2,892 \| 0 \| 7\.23 \|", card)


@pytest.mark.parametrize("name", ["x[1]", "a*", "what?"])
def test_a_dataset_folder_whose_name_is_a_data_files_pattern_is_refused_by_name(tmp_path, name):
    """``x[1]`` would load ``x1``'s files and ``a*`` every folder's: refused before any work, not merged."""
    sample = Path(ConvLabBuilder.sample_dir()) / "toychat"
    shutil.copytree(sample, tmp_path / "data" / name)
    shutil.copytree(sample, tmp_path / "data" / "x1")
    with pytest.raises(SourceError, match="rename the folder") as caught:
        build_source("convlab", tmp_path / "out", data_dir=str(tmp_path / "data"))
    assert name in str(caught.value)
    assert not (tmp_path / "out").exists()
