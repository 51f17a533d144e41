"""ConvLab's ``--data-dir`` at a URL: each dataset's ``data.zip``, ``data/`` folder or ``dummy_data.json`` is read from a
local copy made once per version (zips are read by seeking); a task on a machine without the driver's copies makes
its own, and errors name the URL. ``tests/storage/test_input_url.py`` builds and streams every source from a URL the same
way.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import datasets
import pytest

from convhub.builders.convlab.builder import ConvLabBuilder
from convhub.engine.build import build_source, check_source
from convhub.errors import Notes, SourceError
from tests.support.data_files import tables, uploaded


def convlab_shards(url: str, subsets: list[str] | None = None) -> list[dict]:
    builder = ConvLabBuilder(config_name="sessions", data_dir=url, subsets=subsets)
    shards = builder.shards(datasets.DownloadManager(dataset_name="convlab"))
    return [shard for split in shards.values() for shard in split]


@pytest.mark.slow
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
        "toydummy": "file",
        "toyhotel": "zip",
    }
    assert inputs["toyhotel"].origin == f"{url}/toyhotel/data.zip"
    assert (
        inputs["toychat"].origin == f"{url}/toychat/data"
        and inputs["toychat"].shown == inputs["toychat"].origin
    )
    for source in inputs.values():
        assert Path(source.path).exists() and "://" not in source.path
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
