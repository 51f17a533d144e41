"""Which files LoCoMo reads: the download without ``--data-dir`` (its subset named after the URL), a folder's or
one file's ``*.json`` (``convhub.engine.inputs.listing``), none of them read while listing."""

from __future__ import annotations

import functools
import json
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import datasets

import convhub.builders.locomo.builder as locomo_builder
from convhub.builders.locomo.builder import LocomoBuilder
from convhub.engine.build import build_source
from tests.locomo.locomo_samples import SAMPLE, split_sample


class RecordingDownloads:
    """Stands in for ``datasets.DownloadManager``: records the URL and answers with a local path."""

    def __init__(self, local_path: str):
        self.local_path = local_path
        self.urls: list[str] = []

    def download(self, url: str) -> str:
        self.urls.append(url)
        return self.local_path


def test_without_data_dir_the_builder_downloads_locomo10_into_one_test_split():
    downloads = RecordingDownloads(str(SAMPLE))
    shard = {"path": str(SAMPLE), "name": "locomo10.json"}  # named by the URL, not by the copy's hash
    assert LocomoBuilder(config_name="sessions").shards(downloads) == {"test": [shard]}
    assert downloads.urls == [
        "https://raw.githubusercontent.com/snap-research/LoCoMo/main/data/locomo10.json"
    ]


def test_a_build_without_data_dir_names_its_subset_after_the_url_not_the_downloads_hash(
    tmp_path, monkeypatch
):
    """``datasets`` saves a download under a hash of its URL: the rows' subset is still the URL's file name's stem
    (``locomo10`` for the real URL; a file server on 127.0.0.1 stands for GitHub)."""
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(SAMPLE.parent))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setattr(locomo_builder, "URL", f"http://127.0.0.1:{server.server_port}/{SAMPLE.name}")
        result = build_source("locomo", tmp_path / "out", None, configs=["sessions"], num_proc=1)
    finally:
        server.shutdown()
        server.server_close()
    table = datasets.Dataset.from_parquet(str(tmp_path / "out" / "sessions" / "*.parquet"))
    stem = Path(SAMPLE.name).stem
    assert set(table["subset"]) == {stem} and table.num_rows == len(
        json.loads(SAMPLE.read_text(encoding="utf-8"))
    )
    assert result.configs["sessions"].splits["test"].num_examples == table.num_rows


def test_listing_the_files_reads_none_of_them(tmp_path):
    """sample_id is checked across files as the workers parse them, not by a reading of every file first."""
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text("not JSON at all", encoding="utf-8")
    listed = LocomoBuilder(config_name="sessions", data_dir=str(tmp_path)).shards(RecordingDownloads(""))
    assert listed == {"test": [{"path": str(tmp_path / name), "name": name} for name in ("a.json", "b.json")]}


def test_data_dir_may_be_a_folder_or_one_file(tmp_path):
    data_dir = split_sample(tmp_path / "data")
    folder = LocomoBuilder(config_name="qa", data_dir=str(data_dir)).shards(RecordingDownloads(""))
    names = ("part_a.json", "part_b.json")
    assert folder == {"test": [{"path": str(data_dir / name), "name": name} for name in names]}
    one = LocomoBuilder(config_name="qa", data_dir=str(data_dir / "part_b.json")).shards(
        RecordingDownloads("")
    )
    assert one == {"test": [{"path": str(data_dir / "part_b.json"), "name": "part_b.json"}]}
