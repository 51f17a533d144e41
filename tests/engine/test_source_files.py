"""Which files a source reads (``convhub.engine.inputs.listing``): found in a folder (and below it,
where the source searches recursively) once each in path order, and chosen by stem where each file is a subset (``Listing``)."""

from __future__ import annotations

import pytest

from convhub.engine.inputs import listing
from convhub.errors import SourceError


def test_files_are_found_and_chosen_by_stem(tmp_path):
    for name in ("b.jsonl.gz", "a.jsonl", "notes.txt", "sub/c.jsonl"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}\n")
    files = listing.find_files(str(tmp_path), "Test")
    assert [name for name, _ in files] == ["a.jsonl", "b.jsonl.gz"]
    chosen = listing.Listing().files(str(tmp_path), "test", ["b"])
    assert chosen == [listing.SourceFile("b.jsonl.gz", str(tmp_path / "b.jsonl.gz"), "b", "train")]
    with pytest.raises(KeyError, match="test has no subset c; subsets: a, b"):
        listing.Listing().files(str(tmp_path), "test", ["c"])
    (tmp_path / "a.jsonl.gz").write_text("{}\n")
    with pytest.raises(SourceError, match="same subset 'a'"):
        listing.Listing().files(str(tmp_path), "test")
    with pytest.raises(FileNotFoundError, match=r"no Test \*\.jsonl or \*\.jsonl\.gz file.*neither a folder"):
        listing.find_files(str(tmp_path / "notes.txt") + "-none", "Test")
    assert listing.JSON_LINES.stem("https://host/data/format_example.jsonl.gz") == "format_example"


def test_local_files_are_found_once_in_path_order(tmp_path):
    for name in ("b.jsonl", "a/c.jsonl.gz", ".hidden.jsonl", ".hidden/d.jsonl", "notes.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}\n")
    (tmp_path / "loop").symlink_to(tmp_path)
    (tmp_path / "same.jsonl").symlink_to(tmp_path / "b.jsonl")
    found = listing.find_files(str(tmp_path), "Test", recursive=True)
    assert found == [("a/c.jsonl.gz", str(tmp_path / "a/c.jsonl.gz")), ("b.jsonl", str(tmp_path / "b.jsonl"))]


def test_each_kind_finds_its_own_files_and_names_their_subsets(tmp_path):
    """LoCoMo reads ``*.json``; LongMemEval ``*.json`` or files without an extension (the Hub's ``longmemeval_s``),
    where a dot is part of the name; hidden files and folders are read by none."""
    for name in ("a.json", "longmemeval_s", "b.jsonl", "notes.txt", ".hidden.json", "folder/c.json"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("[]")
    json_files = listing.find_files(str(tmp_path), "LoCoMo", kind=listing.JSON)
    assert json_files == [("a.json", str(tmp_path / "a.json"))]
    both = listing.find_files(str(tmp_path), "LongMemEval", kind=listing.JSON_OR_EXTENSIONLESS)
    assert [name for name, _ in both] == ["a.json", "longmemeval_s"]
    assert [listing.JSON.stem(name) for name in ("x/a.json", "a.b.txt")] == ["a", "a.b"]
    assert [listing.JSON_OR_EXTENSIONLESS.stem(name) for name in ("s.json", "s", "s.v2")] == [
        "s",
        "s",
        "s.v2",
    ]
    assert listing.JSON_LINES.stem("x.jsonl.gz") == "x" and listing.JSON_LINES.stem("x.gz") == "x"
    (tmp_path / "longmemeval_s.json").write_text("[]")
    again = listing.find_files(str(tmp_path), "LongMemEval", kind=listing.JSON_OR_EXTENSIONLESS)
    assert [name for name, _ in again] == ["a.json", "longmemeval_s", "longmemeval_s.json"]
    with pytest.raises(SourceError, match="same subset 'longmemeval_s'"):
        listing.Listing(listing.JSON_OR_EXTENSIONLESS).files(str(tmp_path), "longmemeval")
    with pytest.raises(FileNotFoundError, match=r"no LoCoMo \*\.json file in"):
        listing.find_files(str(tmp_path / "folder" / "none"), "LoCoMo", kind=listing.JSON)
