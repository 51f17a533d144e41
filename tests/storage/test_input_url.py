"""``--data-dir`` at a URL (``hdfs://``, ``s3a://``, any fsspec URL), every registered source the same way: the
rows of a local build, and of a stream from the local folder. Each source's own URL tests (what it opens where, and
the files its errors name) live with its other tests (``tests/<source>/test_<source>_url.py``, MNBVC's in
``tests/mnbvc/test_mnbvc_formats.py``); ``convhub.storage.folders.local_copy``, which two of them use, is tested here.

The files are on a real S3 API (moto's server on 127.0.0.1, the ``bucket`` fixture), reached through s3fs: its URLs
are no local paths, so a step that opened the file on the local disk fails here. ``tests/engine/test_spark.py`` has Spark's tasks read a ``file://`` URL.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from convhub import registry
from convhub.engine.build import build_source, check_source
from convhub.storage.folders import local_copy
from tests.support.data_files import tables, uploaded


@pytest.mark.parametrize("source", registry.names())
def test_a_data_dir_at_a_url_builds_the_local_builds_rows(source, bucket, sample_builds, tmp_path):
    url = uploaded(registry.get(source).sample_dir(), bucket)
    result = build_source(source, tmp_path / "from-url", url, num_proc=1)
    local = sample_builds[source]
    assert tables(result.output) == tables(local.output)
    assert result.statistics.sorted() == local.statistics.sorted()
    assert result.notes == local.notes
    _, statistics = check_source(source, url)
    assert statistics.sorted() == local.statistics.sorted()


@pytest.mark.parametrize("source", registry.names())
def test_a_url_with_no_source_file_names_it(source, bucket):
    empty = bucket / "empty"
    empty.mkdir(parents=True)
    (empty / "notes.txt").write_text("not a source file")
    with pytest.raises(FileNotFoundError, match=f"^no .* (in|under) {re.escape(str(empty))}"):
        check_source(source, str(empty))


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
    with pytest.raises(FileNotFoundError, match="missing"):
        local_copy(str(bucket / "missing"), tmp_path)
    (bucket / "empty").mkdir()  # S3 has no folders: an empty one is nothing, and is missing
    with pytest.raises(FileNotFoundError, match="empty"):
        local_copy(str(bucket / "empty"), tmp_path)


def test_a_local_copy_of_an_empty_folder_says_there_is_no_file_there(tmp_path):
    """A file system with real folders (HDFS; fsspec's memory file system here) can hold an empty one."""
    from convhub.storage.folders import folder_at

    empty = folder_at(f"memory://{tmp_path.name}/empty")
    empty.mkdir(parents=True)
    try:
        with pytest.raises(FileNotFoundError, match="no file there"):
            local_copy(str(empty), tmp_path)
    finally:
        empty.fs.rm(empty.parent.path, recursive=True)


def test_a_file_is_versioned_by_its_own_size_and_time_whatever_find_says(bucket, tmp_path, monkeypatch):
    """fsspec's generic ``find`` (HDFS's, for one) lists a lone file with no size or time: a changed file at the
    same URL must still be copied again."""

    def generic_find(self, path, maxdepth=None, withdirs=False, detail=False, **kwargs):
        return {path: {}} if detail else [path]

    monkeypatch.setattr(type(bucket.fs), "find", generic_find)
    source = bucket / "dialogues.jsonl"
    source.write_bytes(b"first")
    assert Path(local_copy(str(source), tmp_path)).read_bytes() == b"first"
    source.write_bytes(b"second version")
    assert Path(local_copy(str(source), tmp_path)).read_bytes() == b"second version"


def test_a_local_copy_another_task_made_first_is_kept(bucket, tmp_path, monkeypatch):
    """Two tasks on one executor may copy the same folder at once: the second to finish keeps the first's copy."""
    folder = bucket / "d" / "data"
    folder.mkdir(parents=True)
    (folder / "dialogues.json").write_bytes(b"[]")
    replace = os.replace

    def after_the_other_task(source, target):
        os.makedirs(target)
        Path(target, "dialogues.json").write_bytes(b"[] ")  # the other task's copy, put there first
        return replace(source, target)

    monkeypatch.setattr(os, "replace", after_the_other_task)
    copy = Path(local_copy(str(folder), tmp_path))
    assert (copy / "dialogues.json").read_bytes() == b"[] "
    assert [path.name for path in copy.parent.iterdir()] == ["data"]  # the partial copy removed


@pytest.mark.parametrize("source", registry.names())
def test_a_stream_reads_a_data_dir_at_a_url(source, bucket):
    """The rows of the same stream from the local folder (which ``tests/engine/test_streaming.py`` holds to the build's)."""
    sample = registry.get(source).sample_dir()
    url = uploaded(sample, bucket)

    def streamed(data_dir: str) -> dict[str, list]:
        streams = registry.get(source)(config_name="turns", data_dir=data_dir).as_streaming_dataset()
        return {split: list(stream) for split, stream in streams.items()}

    at_url = streamed(url)
    assert at_url == streamed(str(sample)) and all(at_url.values())
