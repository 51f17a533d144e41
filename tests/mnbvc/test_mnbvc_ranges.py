"""MNBVC's big 论坛 and 问答 files read as line-aligned byte ranges, one shard each: the same rows, in the same order,
with the file's own line numbers, as one read of the file."""

from __future__ import annotations

import gzip
import itertools
import os
from pathlib import Path

import datasets
import pytest

from convhub.build import build_source
from convhub.builders.mnbvc.builder import MnbvcBuilder
from convhub.builders.mnbvc.json_lines_builder import is_gzip, line_ranges
from convhub.engine.readers import json_lines
from convhub.errors import Notes, SourceError
from tests.mnbvc.mnbvc_rows import records, reply, thread, write_shard


def qa_row(number, question, source="wikihow"):
    return {
        "id": number,
        "问": question,
        "答": "答" * (number % 5),
        "来源": source,
        "元数据": {"扩展字段": ""},
    }


def range_fixture(folder: Path) -> Path:
    """A forum file and a 问答 file of lines of uneven lengths (with a blank line and CRLF endings)."""
    threads = [thread(n, f"主题{n}" * (n % 4 + 1), [reply(1, "回" * (n % 6))]) for n in range(30)]
    write_shard(folder / "forum/a.jsonl", [*threads[:12], "", *threads[12:]])
    write_shard(folder / "qa/b.jsonl", [qa_row(n, f"问{n}" * (n % 3 + 1)) for n in range(25)], crlf=True)
    return folder


def test_big_forum_and_qa_files_read_as_line_ranges_give_the_same_rows(tmp_path, monkeypatch):
    """A plain 论坛/问答 file bigger than RANGE_BYTES is read as several line-aligned byte ranges: the same
    records (ids hold the line numbers) in the same order as one read of the file."""
    folder = range_fixture(tmp_path / "data")
    manager = datasets.DownloadManager(data_dir=str(folder))
    whole = MnbvcBuilder(data_dir=str(folder))
    assert ["range" in shard for shard in whole.shards(manager)["train"]] == [False, False]
    expected = records(folder)
    monkeypatch.setattr(MnbvcBuilder, "RANGE_BYTES", 400, raising=False)
    shards = MnbvcBuilder(data_dir=str(folder)).shards(manager)["train"]
    names = [shard["name"] for shard in shards]
    assert names.count("forum/a.jsonl") > 3 and names.count("qa/b.jsonl") > 3
    assert [shard["range"][2] for shard in shards][:2] == [1, shards[1]["range"][2]]
    assert records(folder) == expected
    assert [r["conversation_id"] for r in expected][-25:] == [f"qa/b.jsonl:{n}" for n in range(1, 26)]


def test_gzipped_forum_file_is_not_split_into_ranges(tmp_path, monkeypatch):
    threads = [thread(n, f"主题{n}", [reply(1, "回")]) for n in range(20)]
    write_shard(tmp_path / "forum.jsonl", threads, gz=True)
    monkeypatch.setattr(MnbvcBuilder, "RANGE_BYTES", 100, raising=False)
    builder = MnbvcBuilder(data_dir=str(tmp_path))
    [shard] = builder.shards(datasets.DownloadManager(data_dir=str(tmp_path)))["train"]
    assert "range" not in shard
    assert len(records(tmp_path)) == 20


def test_error_in_a_later_range_names_the_files_own_line(tmp_path, monkeypatch):
    rows = [thread(n, f"主题{n}", [reply(1, "回复")]) for n in range(40)]
    rows[33] = '{"ID": 33, "主题": oops}'
    write_shard(tmp_path / "forum.jsonl", rows)
    monkeypatch.setattr(MnbvcBuilder, "RANGE_BYTES", 500, raising=False)
    builder = MnbvcBuilder(data_dir=str(tmp_path))
    shards = builder.shards(datasets.DownloadManager(data_dir=str(tmp_path)))["train"]
    later = [shard for shard in shards if shard["range"][2] <= 34 < shard["range"][2] + 100][-1]
    assert later["range"][2] > 1
    with pytest.raises(SourceError, match=r"^forum\.jsonl, record line 34: not valid JSON"):
        list(builder.parse_shard(later, Notes()))
    with pytest.raises(SourceError, match=r"^forum\.jsonl, record line 34: not valid JSON"):
        records(tmp_path)


def test_line_ranges_move_a_cut_inside_a_line_to_its_end(tmp_path):
    path = tmp_path / "f.jsonl"
    lines = [b'{"a": 1}', b"", b'{"b": "' + b"x" * 40 + b'"}', b'{"c": 3}\r', b'{"d": 4}', b'{"e": 5}']
    path.write_bytes(b"\n".join(lines))  # no LF after the last line
    size = path.stat().st_size  # lines start at bytes 0, 9, 10, 60, 70, 79
    assert size == 87
    # range_bytes 27: cuts at 21, 43, 65 fall inside lines 3 (→ byte 60), 3 (skipped) and 4 (→ 70)
    assert line_ranges(str(path), 27) == [(0, 60, 1), (60, 70, 4), (70, 87, 5)]
    # range_bytes 10: a cut at 9, right after an LF, starts a range there
    assert line_ranges(str(path), 10) == [
        (0, 9, 1),
        (9, 60, 2),
        (60, 70, 4),
        (70, 79, 5),
        (79, 87, 6),
    ]
    assert line_ranges(str(path), 10**6) == [(0, size, 1)]
    whole = list(json_lines.iter_lines(path))
    for range_bytes in (1, 5, 10, 27, 44, 86, 87, 88):  # 1: cuts inside the last line
        ranges = line_ranges(str(path), range_bytes)
        assert ranges[0][0] == 0 and ranges[-1][1] == size
        assert all(end == start for (_, end, _), (start, _, _) in itertools.pairwise(ranges))
        read = [line for span in ranges for line in json_lines.iter_lines(path, span=span)]
        assert read == whole, range_bytes


def test_build_with_line_ranges_in_two_processes_equals_one_whole_read(tmp_path, monkeypatch):
    folder = range_fixture(tmp_path / "data")
    one = build_source("mnbvc", tmp_path / "one", str(folder), ["sessions"], num_proc=1)
    monkeypatch.setattr(MnbvcBuilder, "RANGE_BYTES", 400, raising=False)
    two = build_source("mnbvc", tmp_path / "two", str(folder), ["sessions"], num_proc=2)
    load = lambda result: datasets.load_dataset(str(result.output), "sessions", split="train")  # noqa: E731
    assert len(load(one)) == 55
    assert list(load(one)) == list(load(two))
    assert one.notes == two.notes


@pytest.mark.parametrize("gz", [False, True])
def test_gzip_is_told_by_its_bytes_not_its_name(tmp_path, gz):
    path = tmp_path / "f.jsonl"
    text = b'{"a": 1}\r\n\n{"a": 2}\n'
    path.write_bytes(gzip.compress(text) if gz else text)
    assert is_gzip(str(path)) is gz


def test_byte_ranges_read_the_lines_of_the_whole_file(tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_text("".join(f'{{"n": {n}, "pad": "{"x" * n}"}}\n' for n in range(40)))
    ranges = line_ranges(str(path), 100)
    assert len(ranges) > 5 and ranges[0][0] == 0 and ranges[-1][1] == os.path.getsize(path)
    read = [line for span in ranges for line in json_lines.iter_lines(path, span=span)]
    assert read == list(json_lines.iter_lines(path))
