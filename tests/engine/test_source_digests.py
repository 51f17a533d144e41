"""Every source's card names each input file by name, size and sha256 (YAML ``source_files``, and the body), in a
stable order; past the hash budget files are named by size and modification time; a source of thousands of files
lists a bounded number and says how many more."""

from __future__ import annotations

import hashlib
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml

from convhub import registry
from convhub.build import build_source
from convhub.engine.inputs import digests
from tests.support.data_files import uploaded
from tests.support.hostile_sources import SOURCES


def front_matter(folder: Path) -> dict:
    return yaml.safe_load((folder / "README.md").read_text(encoding="utf-8").split("---\n")[1])


def entry(path: Path, name: str) -> dict:
    data = path.read_bytes()
    return {"name": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


@pytest.mark.parametrize("name", registry.names())
def test_every_sources_card_lists_its_sample_files(sample_builds, name):
    sample = Path(registry.get(name).sample_dir())
    files = sorted(
        path.relative_to(sample).as_posix()
        for path in sample.rglob("*")
        if path.is_file() and not any(part.startswith(".") for part in path.relative_to(sample).parts)
    )
    expected = [entry(sample / relative, relative) for relative in files]
    assert front_matter(sample_builds[name].output)["source_files"] == expected
    card = (sample_builds[name].output / "README.md").read_text(encoding="utf-8")
    assert "### Source files" in card and expected[0]["sha256"] in card


def test_past_the_hash_budget_files_are_named_by_size_and_time(tmp_path, monkeypatch):
    for name in ("b.jsonl", "a.jsonl"):
        (tmp_path / name).write_text("{}\n" * 10)
    os.utime(tmp_path / "a.jsonl", (0, 86400))
    files = digests.input_files(str(tmp_path), None)
    assert [name for name, _ in files] == ["a.jsonl", "b.jsonl"]
    assert digests.describe(files)[0] == entry(tmp_path / "a.jsonl", "a.jsonl")
    monkeypatch.setattr(digests, "HASH_BUDGET_BYTES", 59)  # the two files are 60 bytes
    first = digests.describe(files)[0]
    assert first == {"name": "a.jsonl", "bytes": 30, "sha256": None, "modified": "1970-01-02T00:00:00Z"}


def test_a_local_file_below_a_double_colon_is_hashed_and_timed_there(tmp_path, monkeypatch):
    (tmp_path / "a::b").mkdir()  # (fsspec would read "::" as a chain of URLs: the file as tmp_path/a)
    (tmp_path / "a::b" / "x.jsonl").write_text("{}\n" * 10)
    files = digests.input_files(str(tmp_path / "a::b"), None)
    assert digests.describe(files) == [entry(tmp_path / "a::b" / "x.jsonl", "x.jsonl")]
    monkeypatch.setattr(digests, "HASH_BUDGET_BYTES", 0)
    assert digests.describe(files)[0]["bytes"] == 30


def test_files_at_a_url_are_named_by_size_and_time_as_local_ones(tmp_path, bucket, monkeypatch):
    (tmp_path / "a.jsonl").write_text("{}\n" * 10)
    url = uploaded(tmp_path, bucket)
    files = digests.input_files(url, None)
    assert files == [("a.jsonl", f"{url}/a.jsonl")]
    assert digests.describe(files) == [entry(tmp_path / "a.jsonl", "a.jsonl")]
    monkeypatch.setattr(digests, "HASH_BUDGET_BYTES", 0)
    [first] = digests.describe(files)
    assert first["bytes"] == 30 and first["sha256"] is None
    stamp = datetime.strptime(first["modified"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    assert abs(datetime.now(timezone.utc) - stamp) < timedelta(hours=1)  # (S3's LastModified, in UTC)


def test_a_source_of_many_files_lists_a_bounded_number_and_says_how_many_more(tmp_path, monkeypatch):
    source = SOURCES["gigamemory"]
    data = tmp_path / "data"
    for index in range(12):
        source.write(data, [source.record(index)], f"part-{index:02d}.jsonl")
    monkeypatch.setattr(digests, "YAML_FILES", 5)
    monkeypatch.setattr(digests, "BODY_FILES", 3)
    monkeypatch.setattr(digests, "HASH_BUDGET_BYTES", 0)
    result = build_source("gigamemory", tmp_path / "out", str(data), configs=["sessions"], num_proc=1)
    header = front_matter(result.output)
    assert [item["name"] for item in header["source_files"]] == [f"part-{i:02d}.jsonl" for i in range(5)]
    rest = sum((data / f"part-{i:02d}.jsonl").stat().st_size for i in range(5, 12))
    assert header["source_files_not_listed"] == {"files": 7, "bytes": rest}
    assert all(item["sha256"] is None and item["modified"] for item in header["source_files"])
    card = (result.output / "README.md").read_text(encoding="utf-8")
    assert "The files this build read (12, also in the YAML header's `source_files`, its first 5)" in card
    assert "| … and 9 more |" in card and "Not hashed: the files add up to more than 0 GiB" in card
