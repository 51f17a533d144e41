"""``--data-dir`` at a URL (``hdfs://``, ``s3a://``, any fsspec URL) for LoCoMo, GigaMemory and ConvLab (MNBVC's
has its own tests in ``tests/mnbvc``): the rows of a local build, the files opened where their task runs, or read
from a copy made once per version where a source must seek (GigaMemory's pass 1, ConvLab's zips).

fsspec's in-memory file system stands in for a remote one: its URLs are no local paths, so a step that opened
the file on the local disk fails here. ``tests/test_spark.py`` has Spark's tasks read a ``file://`` URL.
"""

from __future__ import annotations

import dataclasses
import gzip
import shutil
from pathlib import Path

import datasets
import pyarrow.parquet as pq
import pytest
from convhub import quarantine, registry
from convhub.build import build_source, check_source
from convhub.convlab.builder import ConvLabBuilder
from convhub.errors import Notes, SourceError
from convhub.folders import folder_at, local_copy
from convhub.gigamemory import parse, scan
from convhub.gigamemory.builder import GigamemoryBuilder


def uploaded(folder: str | Path, bucket, name: str = "data") -> str:
    """The files of a local folder and its subfolders, copied to the in-memory file system: their URL."""
    target = bucket / name
    for path in sorted(Path(folder).rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            copied = target / path.relative_to(folder).as_posix()
            copied.parent.mkdir(parents=True, exist_ok=True)
            copied.write_bytes(path.read_bytes())
    return str(target)


def tables(output: Path) -> dict[str, object]:
    return {
        path.relative_to(output).as_posix(): pq.read_table(path) for path in sorted(output.rglob("*.parquet"))
    }


@pytest.mark.parametrize("source", ["locomo", "gigamemory", "convlab"])
def test_a_data_dir_at_a_url_builds_the_local_builds_rows(source, bucket, sample_builds, tmp_path):
    url = uploaded(registry.get(source).sample_dir(), bucket)
    result = build_source(source, tmp_path / "from-url", url, num_proc=1)
    local = sample_builds[source]
    assert tables(result.output) == tables(local.output)
    assert result.statistics.sorted() == local.statistics.sorted()
    assert result.notes == local.notes
    _, statistics = check_source(source, url)
    assert statistics.sorted() == local.statistics.sorted()


def test_a_locomo_url_to_one_file_and_a_subset_of_a_folder(bucket, sample_builds, tmp_path):
    url = uploaded(registry.get("locomo").sample_dir(), bucket)
    (folder_at(url) / "other.json").write_bytes(b"[]")  # another subset, not asked for
    one_file = build_source("locomo", tmp_path / "file", f"{url}/locomo_sample.json", configs=["sessions"])
    subset = build_source("locomo", tmp_path / "subset", url, configs=["sessions"], subsets=["locomo_sample"])
    expected = tables(sample_builds["locomo"].output)["sessions/test-00000-of-00001.parquet"]
    for result in (one_file, subset):
        assert tables(result.output)["sessions/test-00000-of-00001.parquet"].equals(expected)


def test_a_url_with_no_source_file_names_it(bucket):
    empty = bucket / "empty"
    empty.mkdir(parents=True)
    (empty / "notes.txt").write_text("not a source file")
    for source, kind in (("locomo", "LoCoMo"), ("gigamemory", "GigaMemory")):
        with pytest.raises(FileNotFoundError, match=f"no {kind} .* in {empty}"):
            check_source(source, str(empty))


def gigamemory_shards(url: str) -> list[dict]:
    return GigamemoryBuilder(data_dir=url).shards(datasets.DownloadManager(dataset_name="gigamemory"))["test"]


@pytest.mark.parametrize("compressed", [False, True])
def test_a_gigamemory_task_without_the_local_copy_reads_its_lines_at_the_url(bucket, tmp_path, compressed):
    """Pass 1 reads a downloaded copy on the driver; a task on another machine (here: the copy is gone) reads
    the same lines at the URL, with range reads, or decompressing a ``.gz`` from its start."""
    sample = Path(registry.get("gigamemory").sample_dir()) / "dialogues.jsonl"
    folder = tmp_path / "giga"
    folder.mkdir()
    if compressed:
        (folder / "dialogues.jsonl.gz").write_bytes(gzip.compress(sample.read_bytes()))
    else:
        shutil.copy(sample, folder / "dialogues.jsonl")
    url = uploaded(folder, bucket)
    shards = gigamemory_shards(url)
    assert shards and all(shard["path"].startswith("memory://") and "local" in shard for shard in shards)
    here = [record for shard in shards for record in parse.parse_shard(shard, Notes())]
    elsewhere = [
        record
        for shard in shards
        for record in parse.parse_shard({**shard, "local": str(tmp_path / "not-on-this-machine")}, Notes())
    ]
    assert here == elsewhere and len(here) == 2  # the two dialogues of the file


def test_gigamemory_pass_one_tasks_read_their_spans_at_the_url(bucket, tmp_path):
    sample = Path(registry.get("gigamemory").sample_dir()) / "dialogues.jsonl"
    url = uploaded(sample.parent, bucket) + "/dialogues.jsonl"
    size = sample.stat().st_size
    jobs = [(str(sample), 0, 100), (str(sample), 50, size - 50)]
    at_url = [(url, offset, length) for _, offset, length in jobs]
    assert scan._digest_spans_at(at_url) == scan._digest_spans_at(jobs)


def convlab_shards(url: str, subsets: list[str] | None = None) -> list[dict]:
    builder = ConvLabBuilder(config_name="sessions", data_dir=url, subsets=subsets)
    shards = builder.shards(datasets.DownloadManager(dataset_name="convlab"))
    return [shard for split in shards.values() for shard in split]


def test_convlab_reads_a_zip_a_data_folder_and_a_dummy_file_at_a_url_from_local_copies(bucket, tmp_path):
    """Each dataset's file (or ``data/`` folder) is copied down once and read where a local one is read; the
    records equal the local folder's, and the inputs keep their URLs for errors and for other machines."""
    folder = tmp_path / "convlab"
    shutil.copytree(ConvLabBuilder.sample_dir(), folder, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    (folder / "toydummy").mkdir()
    dialogues = (folder / "toychat" / "data" / "dialogues.json").read_bytes()
    (folder / "toydummy" / "dummy_data.json").write_bytes(dialogues.replace(b"toychat", b"toydummy"))
    url = uploaded(folder, bucket)
    inputs = {shard["input"].name: shard["input"] for shard in convlab_shards(url)}
    assert {name: source.kind for name, source in inputs.items()} == {
        "toychat": "folder",
        "toydummy": "dummy",
        "toyhotel": "zip",
    }
    assert inputs["toyhotel"].origin == f"{url}/toyhotel/data.zip"
    assert (
        inputs["toychat"].origin == f"{url}/toychat/data"
        and inputs["toychat"].shown == inputs["toychat"].origin
    )
    for source in inputs.values():
        assert Path(source.path).exists() and not source.path.startswith("memory")
    at_url = build_source("convlab", tmp_path / "from-url", url, configs=["sessions", "ontology"])
    local = build_source("convlab", tmp_path / "local", str(folder), configs=["sessions", "ontology"])
    assert tables(at_url.output) == tables(local.output) and tables(local.output)
    assert at_url.notes == local.notes


def test_a_convlab_task_without_the_drivers_copies_makes_its_own(bucket, tmp_path):
    """A Spark task on another machine finds neither the driver's copy of the zip nor the scan's inflated
    ``dialogues.json``: it copies the zip from its URL and inflates it, and reads the same records."""
    url = uploaded(ConvLabBuilder.sample_dir(), bucket)
    builder = ConvLabBuilder(config_name="sessions", data_dir=url)
    here = [record for shard in convlab_shards(url) for record in builder.parse_shard(shard, Notes())]
    elsewhere = []
    for shard in convlab_shards(url):
        source = dataclasses.replace(shard["input"], path=str(tmp_path / "not-on-this-machine"))
        moved = {**shard, "input": source, "copy": str(tmp_path / "no-copy-either")}
        elsewhere.extend(builder.parse_shard(moved, Notes()))
    assert here == elsewhere and len(here) > 2


def test_a_bad_convlab_file_at_a_url_is_named_by_its_url(bucket, tmp_path):
    folder = bucket / "bad" / "broken"
    folder.mkdir(parents=True)
    (folder / "data.zip").write_bytes(b"not a zip")
    with pytest.raises(SourceError, match="not a readable zip") as raised:
        check_source("convlab", str(bucket / "bad"))
    assert raised.value.path == str(folder / "data.zip")
    with pytest.raises(FileNotFoundError, match=f"no ConvLab dataset nothing in {bucket / 'bad'}"):
        check_source("convlab", str(bucket / "bad"), subsets=["nothing"])


def test_a_local_copy_keeps_the_name_and_is_made_once_per_version(bucket, tmp_path):
    source = bucket / "d" / "dialogues.jsonl.gz"
    source.parent.mkdir(parents=True)
    source.write_bytes(b"first")
    first = local_copy(str(source), tmp_path)
    assert Path(first).name == "dialogues.jsonl.gz" and Path(first).read_bytes() == b"first"
    Path(first).write_bytes(b"kept")  # the same version is not copied again
    assert local_copy(str(source), tmp_path) == first and Path(first).read_bytes() == b"kept"
    source.write_bytes(b"second version")
    second = local_copy(str(source), tmp_path)
    assert second != first and Path(second).read_bytes() == b"second version"
    assert not list(tmp_path.rglob("*.partial-*"))
    plain = tmp_path / "plain.jsonl"
    plain.write_bytes(b"{}")
    assert local_copy(plain.as_uri(), tmp_path / "copies") == str(plain)  # a file:// URL is its own copy


def test_a_local_copy_of_a_folder_keeps_its_tree_and_is_made_again_when_one_file_changes(bucket, tmp_path):
    folder = bucket / "d" / "data"
    (folder / "db").mkdir(parents=True)
    (folder / "dialogues.json").write_bytes(b"[]")
    (folder / "db" / "hotel_db.json").write_bytes(b"{}")
    first = Path(local_copy(str(folder), tmp_path))
    assert first.name == "data" and sorted(
        p.relative_to(first).as_posix() for p in first.rglob("*.json")
    ) == [
        "db/hotel_db.json",
        "dialogues.json",
    ]
    assert local_copy(str(folder) + "/", tmp_path) == str(first)
    (folder / "db" / "hotel_db.json").write_bytes(b'{"changed": 1}')
    second = Path(local_copy(str(folder), tmp_path))
    assert second != first and (second / "db" / "hotel_db.json").read_bytes() == b'{"changed": 1}'
    with pytest.raises(FileNotFoundError, match="no file there"):
        local_copy(str(bucket / "missing"), tmp_path)


@pytest.mark.parametrize("source", ["locomo", "gigamemory", "convlab"])
def test_a_stream_reads_a_data_dir_at_a_url(source, bucket, sample_builds, tmp_path):
    url = uploaded(registry.get(source).sample_dir(), bucket)
    streamed = list(
        registry.get(source)(config_name="turns", data_dir=url).as_streaming_dataset(split="test")
    )
    files = sorted(
        (sample_builds[source].output / "turns").glob("**/test-*.parquet")
    )  # ConvLab's: per subset
    built = [row for path in files for row in pq.read_table(path).to_pylist()]
    assert streamed == built and streamed


def test_a_bad_gigamemory_line_at_a_url_is_named_by_its_url_not_the_local_copy(bucket, tmp_path):
    lines = (Path(registry.get("gigamemory").sample_dir()) / "dialogues.jsonl").read_bytes().splitlines()
    folder = bucket / "bad"
    folder.mkdir(parents=True)
    (folder / "dialogues.jsonl").write_bytes(lines[0] + b"\n{not json\n")
    url = str(folder / "dialogues.jsonl")
    with pytest.raises(SourceError) as raised:
        check_source("gigamemory", str(folder))
    assert raised.value.path == url and raised.value.record == "at line 2"
    check_source("gigamemory", str(folder), on_bad_record="skip", quarantine_dir=str(tmp_path))
    assert [entry["file"] for entry in quarantine.collect(tmp_path)] == [url]
