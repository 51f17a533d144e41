"""ConvLab-3's scan of a ``dialogues.json``: exact byte ranges and errors at any chunk size, byte-balanced shards,
and a large zip read from one copy.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import datasets
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convhub.build import build_source, check_source
from convhub.builders.convlab.builder import (
    DIALOGUES_PER_SHARD,
    MIN_DIALOGUES_PER_SHARD,
    ConvLabBuilder,
)
from convhub.engine.readers import byte_ranges
from convhub.errors import SourceError
from tests.convlab.convlab_samples import index_dialogues, sample_dialogues

# -- streaming -----------------------------------------------------------------------------------


def test_the_index_gives_ranges_that_read_back_each_dialogue():
    dialogues = [
        {"dialogue_id": f"x-{i}", "data_split": "train", "text": "北山 " * i, "n": 12345} for i in range(40)
    ]
    raw = ("\ufeff[ " + " ,\n".join(json.dumps(d, ensure_ascii=False) for d in dialogues) + "\n]\n").encode()
    ranges = index_dialogues(io.BytesIO(raw), "mem")["train"]
    assert [d["dialogue_id"] for *_, d in byte_ranges.read_ranges(io.BytesIO(raw), ranges[5:9], "mem")] == [
        "x-5",
        "x-6",
        "x-7",
        "x-8",
    ]


def test_read_ranges_gives_json_values_where_orjson_reads_differently():
    """Integers past 64 bits, lone surrogates, NaN, 1e400: ``read_ranges`` reads each dialogue as json does."""
    odd = {
        "big": 18446744073709551616,
        "neg": -9223372036854775809,
        "nan": float("nan"),
        "surrogate": "\ud800",
    }
    dialogues = [{"dialogue_id": f"x-{i}", "data_split": "train", "n": 1.5} for i in range(30)]
    dialogues[7]["odd"] = odd
    dialogues[9]["inf"] = "1e400"
    raw = json.dumps(dialogues, indent=2).replace('"1e400"', "1e400").encode()
    ranges = index_dialogues(io.BytesIO(raw), "mem")["train"]
    read = {
        position: value for _, _, position, value in byte_ranges.read_ranges(io.BytesIO(raw), ranges, "mem")
    }
    assert read[7]["odd"]["big"] == 18446744073709551616 and isinstance(read[7]["odd"]["neg"], int)
    assert read[7]["odd"]["surrogate"] == "\ud800" and read[7]["odd"]["nan"] != read[7]["odd"]["nan"]
    assert read[9]["inf"] == float("inf")
    assert json.dumps(read[3]) == json.dumps(dialogues[3])


def test_shards_are_consecutive_even_and_balanced_by_bytes():
    def shard_ranges(ranges):
        return byte_ranges.shard_ranges(ranges, DIALOGUES_PER_SHARD, MIN_DIALOGUES_PER_SHARD)

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


@pytest.mark.slow
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

    monkeypatch.setattr(byte_ranges, "EXTRACT_MIN_BYTES", 1 << 40)
    from_zip = build("zip", 1)
    builder = ConvLabBuilder(config_name="sessions", data_dir=str(tmp_path / "in"))
    shards = builder.shards(datasets.DownloadManager())
    assert [len(shards[split]) for split in ("train", "validation", "test")] == [2, 2, 1]
    assert all(shard["copy"] is None for split in shards.values() for shard in split)
    byte_ranges._INDEX_CACHE.clear()
    monkeypatch.setattr(byte_ranges, "EXTRACT_MIN_BYTES", 0)
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
        return index_dialogues(io.BytesIO(raw), "mem", chunk_size=chunk_size)
    except SourceError as error:
        return str(error)


@settings(max_examples=300, deadline=None)
@given(
    count=st.integers(0, 12),
    indent=st.sampled_from([None, 0, 1, 2, 4, "\t"]),
    edit=_TEXT_EDITS,
    chunk_size=st.sampled_from([16, 97]),
)
def test_the_scan_gives_one_index_or_error_at_any_chunk_size(count, indent, edit, chunk_size):
    """A dialogue, a number or an escape cut by a chunk's end is read as in one chunk, for good and bad files."""
    plain = _dialogues_text(count, indent, split=lambda i: ("train", "test")[i % 2])
    raw = edit[1](plain)
    assert _index_or_error(raw, chunk_size) == _index_or_error(raw)


def _write_zip(folder: Path, raw: bytes) -> Path:
    folder.mkdir(parents=True)
    with zipfile.ZipFile(folder / "data.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("data/dialogues.json", raw)
    return folder / "data.zip"


@pytest.mark.slow
def test_a_stream_of_a_large_zip_reads_one_copy_made_while_scanning(tmp_path, monkeypatch):
    raw = _dialogues_text(300, 2, split=lambda i: ("train", "validation", "test")[i % 3])
    _write_zip(tmp_path / "in" / "big", raw)
    monkeypatch.setattr(byte_ranges, "EXTRACT_MIN_BYTES", 0)
    builder = ConvLabBuilder(config_name="sessions", data_dir=str(tmp_path / "in"))
    shards = builder.shards(datasets.StreamingDownloadManager())
    copies = {shard["copy"] for split in shards.values() for shard in split}
    assert len(copies) == 1 and Path(copies.pop()).read_bytes() == raw
    expected = index_dialogues(io.BytesIO(raw), "mem")
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
    monkeypatch.setattr(byte_ranges, "EXTRACT_MIN_BYTES", 0)
    monkeypatch.setenv("CONVHUB_TMPDIR", str(tmp_path / "scratch"))
    (tmp_path / "scratch").mkdir()
    builder = ConvLabBuilder(config_name="sessions", data_dir=str(tmp_path / "in"))
    shards = builder.shards(datasets.DownloadManager())
    copies = {shard["copy"] for split in shards.values() for shard in split}
    assert len(copies) == 1
    assert Path(copies.pop()).parent == tmp_path / "scratch"


@pytest.mark.slow
def test_a_stream_and_a_build_in_one_process_share_one_scan_and_copy(tmp_path, monkeypatch):
    """A build after a stream in one process reads the copy and the index the stream's scan made."""

    raw = _dialogues_text(40, 2, split=lambda i: ("train", "test")[i % 2])
    _write_zip(tmp_path / "in" / "big", raw)
    monkeypatch.setattr(byte_ranges, "EXTRACT_MIN_BYTES", 0)
    builder = ConvLabBuilder(config_name="sessions", data_dir=str(tmp_path / "in"))
    expected = index_dialogues(io.BytesIO(raw), "mem")
    streamed = builder.shards(datasets.StreamingDownloadManager())
    ranges = {split: [r for shard in found for r in shard["ranges"]] for split, found in streamed.items()}
    assert ranges == expected
    streamed_ids = [
        row["conversation_id"] for rows in builder.as_streaming_dataset().values() for row in rows
    ]
    assert streamed_ids == [f"d-{position}" for ranges in expected.values() for _, _, position in ranges]
    monkeypatch.setattr(byte_ranges, "index_list", None)  # the build reuses the stream's scan
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
    for threshold in (0, 1 << 40):  # scanned in a copy, then in the zip
        monkeypatch.setattr(byte_ranges, "EXTRACT_MIN_BYTES", threshold)
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
    for threshold in (0, 1 << 40):  # scanned in a copy, then in the zip
        monkeypatch.setattr(byte_ranges, "EXTRACT_MIN_BYTES", threshold)
        with pytest.raises(SourceError, match="corrupt or truncated zip member") as error:
            check_source("convlab", str(tmp_path / "in"))
        messages.append(str(error.value))
    assert messages[0] == messages[1]
