"""``--data-dir`` at a URL (``hdfs://``, ``s3a://``, any fsspec URL) for LoCoMo and GigaMemory (MNBVC's has its
own tests in ``tests/mnbvc``): the rows of a local build, the files opened where their task runs. ConvLab reads
local folders only, and says so before any work.

fsspec's in-memory file system stands in for a remote one: its URLs are no local paths, so a step that opened
the file on the local disk fails here. ``tests/test_spark.py`` has Spark's tasks read a ``file://`` URL.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import datasets
import pyarrow.parquet as pq
import pytest
from convhub import cli, quarantine, registry
from convhub.build import build_source, check_source
from convhub.errors import Notes, SourceError
from convhub.folders import folder_at, local_copy
from convhub.gigamemory import parse, scan
from convhub.gigamemory.builder import GigamemoryBuilder


def uploaded(folder: str | Path, bucket, name: str = "data") -> str:
    """The files of a local folder, copied to the in-memory file system: their URL."""
    target = bucket / name
    target.mkdir(parents=True, exist_ok=True)
    for path in sorted(Path(folder).iterdir()):
        if path.is_file():
            (target / path.name).write_bytes(path.read_bytes())
    return str(target)


def tables(output: Path) -> dict[str, object]:
    return {
        path.relative_to(output).as_posix(): pq.read_table(path) for path in sorted(output.rglob("*.parquet"))
    }


@pytest.mark.parametrize("source", ["locomo", "gigamemory"])
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


def test_convlab_refuses_a_url_data_dir_before_any_work(tmp_path, capsys):
    output = tmp_path / "out"
    code = cli.main(["build", "convlab", "--data-dir", "hdfs://nn/convlab", "--output", str(output)])
    assert code == 2
    assert "convlab reads a local --data-dir only, not the URL hdfs://nn/convlab" in capsys.readouterr().err
    with pytest.raises(ValueError, match="reads a local --data-dir only"):
        build_source("convlab", output, "s3a://bucket/convlab")
    assert not output.exists() and list(tmp_path.iterdir()) == []


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


@pytest.mark.parametrize("source", ["locomo", "gigamemory"])
def test_a_stream_reads_a_data_dir_at_a_url(source, bucket, sample_builds, tmp_path):
    url = uploaded(registry.get(source).sample_dir(), bucket)
    streamed = list(
        registry.get(source)(config_name="turns", data_dir=url).as_streaming_dataset(split="test")
    )
    built = pq.read_table(sample_builds[source].output / "turns" / "test-00000-of-00001.parquet").to_pylist()
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
