"""GigaMemory's ``--data-dir`` at a URL: pass 1 reads a local copy of each file (made once per version), and a task
where that copy is not reads its lines at the URL; errors name the URL. ``tests/storage/test_input_url.py`` builds and
streams every source from a URL the same way.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import datasets
import pytest

from convhub import registry
from convhub.builders.gigamemory import builder
from convhub.builders.gigamemory.builder import GigamemoryBuilder
from convhub.engine.build import check_source
from convhub.engine.checks import quarantine
from convhub.errors import Notes, SourceError
from tests.support.data_files import uploaded


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
    assert shards and all(shard["path"].startswith("s3://") and "local" in shard for shard in shards)
    here = [record for shard in shards for record in builder.parse_shard(shard, Notes())]
    elsewhere = [
        record
        for shard in shards
        for record in builder.parse_shard({**shard, "local": str(tmp_path / "not-on-this-machine")}, Notes())
    ]
    assert here == elsewhere and len(here) == 2  # the two dialogues of the file


def test_gigamemory_pass_one_reads_a_file_at_its_url_as_its_local_copy(bucket, tmp_path):
    sample = Path(registry.get("gigamemory").sample_dir()) / "dialogues.jsonl"
    url = uploaded(sample.parent, bucket) + "/dialogues.jsonl"
    at_url, url_notes = builder.index_file(url)
    here, notes = builder.index_file(str(sample))
    assert at_url == here and url_notes == notes and len(here) == 2


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
