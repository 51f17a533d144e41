"""Which JSON Lines files a source reads (``convhub.engine.json_lines_files``): found in a folder (and below it,
where the source searches recursively) once each in path order, and chosen by stem where each file is a subset."""

from __future__ import annotations

import pytest

from convhub.engine import json_lines_files
from convhub.errors import SourceError


def test_files_are_found_and_chosen_by_stem(tmp_path):
    for name in ("b.jsonl.gz", "a.jsonl", "notes.txt", "sub/c.jsonl"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}\n")
    files = json_lines_files.find_files(str(tmp_path), "Test")
    assert [name for name, _ in files] == ["a.jsonl", "b.jsonl.gz"]
    chosen = json_lines_files.files_by_stem(files, ["b"], "test")
    assert chosen == [("b.jsonl.gz", str(tmp_path / "b.jsonl.gz"))]
    with pytest.raises(KeyError, match="test has no subset c; subsets: a, b"):
        json_lines_files.files_by_stem(files, ["c"], "test")
    (tmp_path / "a.jsonl.gz").write_text("{}\n")
    with pytest.raises(SourceError, match="same subset 'a'"):
        json_lines_files.files_by_stem(json_lines_files.find_files(str(tmp_path), "Test"), None, "test")
    with pytest.raises(FileNotFoundError, match=r"no Test \*\.jsonl or \*\.jsonl\.gz file.*neither a folder"):
        json_lines_files.find_files(str(tmp_path / "notes.txt") + "-none", "Test")
    assert json_lines_files.file_stem("https://host/data/format_example.jsonl.gz") == "format_example"


def test_local_files_are_found_once_in_path_order(tmp_path):
    for name in ("b.jsonl", "a/c.jsonl.gz", ".hidden.jsonl", ".hidden/d.jsonl", "notes.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}\n")
    (tmp_path / "loop").symlink_to(tmp_path)
    (tmp_path / "same.jsonl").symlink_to(tmp_path / "b.jsonl")
    found = json_lines_files.find_files(str(tmp_path), "Test", recursive=True)
    assert found == [("a/c.jsonl.gz", str(tmp_path / "a/c.jsonl.gz")), ("b.jsonl", str(tmp_path / "b.jsonl"))]
