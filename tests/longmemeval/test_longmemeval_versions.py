"""LongMemEval's versions (issue #51): without ``--data-dir`` the cleaned release's oracle file is downloaded (a file
server on 127.0.0.1 stands for the Hub), the cleaned files are subsets of their own names, and the card names each
input file by name, size and sha256 (``source_files``, which ``convhub score`` reads)."""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import datasets
import pytest
import yaml

import convhub.builders.longmemeval.builder as longmemeval_builder
from convhub.build import build_source
from convhub.builders.longmemeval.builder import LongMemEvalBuilder

SAMPLE = Path(LongMemEvalBuilder.sample_dir())


def front_matter(folder: Path) -> dict:
    text = (folder / "README.md").read_text(encoding="utf-8")
    return yaml.safe_load(text.split("---\n")[1])


def listed(path: Path, name: str | None = None) -> dict:
    data = path.read_bytes()
    return {"name": name or path.name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def test_the_default_download_is_the_cleaned_releases_oracle_file():
    assert longmemeval_builder.URL == (
        "https://huggingface.co/datasets/xiaowu0162/longmemeval-cleaned/resolve/main/longmemeval_oracle.json"
    )


@pytest.fixture
def file_server(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(served))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield served, f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_a_build_without_data_dir_downloads_the_url_and_names_subset_and_card_after_its_file(
    tmp_path, monkeypatch, file_server
):
    served, base = file_server
    shutil.copy(SAMPLE / "longmemeval_oracle.json", served / "longmemeval_oracle.json")
    monkeypatch.setattr(longmemeval_builder, "URL", f"{base}/longmemeval_oracle.json")
    result = build_source("longmemeval", tmp_path / "out", None, configs=["sessions"], num_proc=1)
    rows = datasets.Dataset.from_parquet(str(tmp_path / "out" / "sessions" / "*.parquet"))
    assert set(rows["subset"]) == {"longmemeval_oracle"} and rows.num_rows == 3
    assert {json.loads(extra)["file"] for extra in rows["extra"]} == {"longmemeval_oracle.json"}
    expected = [listed(served / "longmemeval_oracle.json")]
    assert result.source_files == expected == front_matter(result.output)["source_files"]


def test_the_cleaned_files_are_subsets_of_their_own_names_and_the_card_lists_each(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for name in ("longmemeval_s_cleaned.json", "longmemeval_m_cleaned.json", "longmemeval_oracle.json"):
        shutil.copy(SAMPLE / ("longmemeval_s" if "cleaned" in name else name), data / name)
    (data / "README.md").write_text("notes of the download, not read")
    result = build_source("longmemeval", tmp_path / "out", str(data), configs=["sessions"], num_proc=1)
    rows = datasets.Dataset.from_parquet(str(tmp_path / "out" / "sessions" / "*.parquet"))
    assert sorted(set(rows["subset"])) == [
        "longmemeval_m_cleaned",
        "longmemeval_oracle",
        "longmemeval_s_cleaned",
    ]
    assert "longmemeval_s_cleaned:e47becba" in rows["conversation_id"]
    names = ["longmemeval_m_cleaned.json", "longmemeval_oracle.json", "longmemeval_s_cleaned.json"]
    expected = [listed(data / name) for name in names]  # sorted by name: a stable order
    assert front_matter(result.output)["source_files"] == expected
    card = (result.output / "README.md").read_text(encoding="utf-8")
    for entry in expected:
        assert f"| `{entry['name']}` | {entry['bytes']:,} | {entry['sha256']} |" in card
    only = build_source(
        "longmemeval", tmp_path / "one", str(data), ["sessions"], 1, subsets=["longmemeval_oracle"]
    )
    assert front_matter(only.output)["source_files"] == [listed(data / "longmemeval_oracle.json")]


def test_the_same_input_gives_the_same_card_bytes(tmp_path):
    first = build_source("longmemeval", tmp_path / "a", str(SAMPLE), configs=["sessions"], num_proc=1)
    second = build_source("longmemeval", tmp_path / "b", str(SAMPLE), configs=["sessions"], num_proc=1)
    assert (first.output / "README.md").read_bytes() == (second.output / "README.md").read_bytes()
