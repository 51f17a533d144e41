"""The layouts a source declares with ``listing.Listing``: a file per subset, a folder per subset, a file per split,
files at any depth; each file's subset and split, ``--subset``'s choice, and the errors naming the files."""

from __future__ import annotations

from pathlib import Path

import pytest

from convhub.builder import ConversationBuilder
from convhub.engine.inputs.listing import (
    FROM_FILE,
    FROM_FOLDER,
    JSON,
    JSON_LINES,
    TEXT,
    Listing,
    SourceFile,
)
from convhub.errors import SourceError


def files(root: Path, *names: str) -> Path:
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("{}\n", encoding="utf-8")
    return root


def listed(layout: Listing, data_dir: Path, subsets=None) -> list[tuple[str, str | None, str]]:
    return [(file.name, file.subset, file.split) for file in layout.files(str(data_dir), "Toy", subsets)]


def test_a_file_per_subset_is_the_default(tmp_path):
    files(tmp_path, "b.json", "a.json", "notes.txt", "deeper/c.json")
    assert listed(Listing(JSON, split="test"), tmp_path) == [("a.json", "a", "test"), ("b.json", "b", "test")]
    assert listed(Listing(JSON), tmp_path, ["b"]) == [("b.json", "b", "train")]
    [file] = Listing(JSON).files(str(tmp_path / "a.json"), "Toy")
    assert file == SourceFile("a.json", str(tmp_path / "a.json"), "a", "train")


def test_a_folder_per_subset_and_a_file_per_split(tmp_path):
    """Multi-Session Chat's layout: ``session_2/train.txt``; ParlAI's ``valid`` renamed."""
    files(
        tmp_path, "session_2/train.txt", "session_2/valid.txt", "session_3/test.txt", "README.md", "top.txt"
    )
    layout = Listing(TEXT, subset=FROM_FOLDER, split=FROM_FILE, split_names=(("valid", "validation"),))
    assert listed(layout, tmp_path) == [
        ("session_2/train.txt", "session_2", "train"),
        ("session_2/valid.txt", "session_2", "validation"),
        ("session_3/test.txt", "session_3", "test"),
        ("top.txt", tmp_path.name, "top"),  # a file directly in DIR: DIR is its subset's folder
    ]
    assert listed(layout, tmp_path / "session_3") == [("test.txt", "session_3", "test")]  # DIR is one subset
    assert [subset for _, subset, _ in listed(layout, tmp_path, ["session_3"])] == ["session_3"]


def test_a_folder_per_subset_reads_its_files_at_any_depth(tmp_path):
    """BEAM's ``chats/<scale>/<n>/``: a scale is a subset, its chats' files lie below it."""
    files(tmp_path, "100K/1/chat.json", "100K/2/chat.json", "1M/1/chat.json", "1M/1/plan/notes.json")
    layout = Listing(JSON, subset=FROM_FOLDER, recursive=True)
    assert [(name, subset) for name, subset, _ in listed(layout, tmp_path)] == [
        ("100K/1/chat.json", "100K"),
        ("100K/2/chat.json", "100K"),
        ("1M/1/chat.json", "1M"),
        ("1M/1/plan/notes.json", "1M"),
    ]


def test_files_at_any_depth_without_subsets(tmp_path):
    files(tmp_path, "multiturn/a.jsonl", "forum/b.jsonl.gz", "forum/.hidden.jsonl", "c.jsonl")
    layout = Listing(JSON_LINES, subset=None, recursive=True)
    assert listed(layout, tmp_path) == [
        ("c.jsonl", None, "train"),
        ("forum/b.jsonl.gz", None, "train"),
        ("multiturn/a.jsonl", None, "train"),
    ]


def test_a_file_per_split_without_subsets(tmp_path):
    files(tmp_path, "train.jsonl", "test.jsonl.gz")
    layout = Listing(JSON_LINES, subset=None, split=FROM_FILE)
    assert listed(layout, tmp_path) == [("test.jsonl.gz", None, "test"), ("train.jsonl", None, "train")]


def test_two_files_of_one_subset_or_split_are_refused_by_name(tmp_path):
    files(tmp_path, "a.jsonl", "a.jsonl.gz")
    with pytest.raises(SourceError, match=r"a\.jsonl\.gz.*same subset 'a' as .*a\.jsonl; rename one"):
        Listing(JSON_LINES).files(str(tmp_path), "Toy")
    files(tmp_path / "msc", "session_2/train.txt", "session_2/deeper/train.txt")
    layout = Listing(TEXT, subset=FROM_FOLDER, split=FROM_FILE, recursive=True)
    with pytest.raises(
        SourceError, match=r"same split 'train' of subset 'session_2' as .*session_2/deeper/train"
    ):
        layout.files(str(tmp_path / "msc"), "Toy")


def test_an_unknown_subset_and_an_empty_folder_name_what_there_is(tmp_path):
    files(tmp_path, "x/train.txt", "y/train.txt")
    layout = Listing(TEXT, subset=FROM_FOLDER, split=FROM_FILE)
    with pytest.raises(KeyError, match="Toy has no subset w, z; subsets: x, y"):
        layout.files(str(tmp_path), "Toy", ["z", "x", "w"])
    with pytest.raises(FileNotFoundError, match=r"no Toy \*\.json file in"):
        Listing(JSON).files(str(tmp_path), "Toy")


def test_a_file_name_says_its_subset_or_its_split_not_both():
    with pytest.raises(ValueError, match="not both"):
        Listing(JSON, subset=FROM_FILE, split=FROM_FILE)


class ToyBuilder(ConversationBuilder):
    """A source that declares its layout and nothing else this test needs."""

    SOURCE = "toy"
    DESCRIPTION = HOMEPAGE = LICENSE = CITATION = ""
    LISTING = Listing(TEXT, subset=FROM_FOLDER, split=FROM_FILE)


class Downloads:
    """What ``listed_files`` asks of ``datasets``' download manager: a local copy of a URL."""

    def __init__(self, folder: Path):
        self.folder = folder

    def download(self, url: str) -> str:
        return str(
            files(self.folder, "copy-of-" + url.rsplit("/", 1)[-1]) / ("copy-of-" + url.rsplit("/", 1)[-1])
        )


def test_a_builder_lists_its_files_by_its_declared_layout(tmp_path, monkeypatch):
    monkeypatch.delenv("CONVHUB_SOURCE_MIRROR", raising=False)
    files(tmp_path / "data", "session_2/train.txt", "session_3/train.txt")
    builder = ToyBuilder(config_name="sessions", data_dir=tmp_path / "data", subsets=("session_3",))
    assert [(file.name, file.subset, file.split) for file in builder.listed_files(Downloads(tmp_path))] == [
        ("session_3/train.txt", "session_3", "train")
    ]
    downloading = ToyBuilder(config_name="sessions", cache_dir=str(tmp_path / "cache"))
    [file] = downloading.listed_files(Downloads(tmp_path / "downloads"), "https://host/msc/valid.txt")
    assert (file.name, file.subset, file.split) == ("valid.txt", "msc", "valid")
    assert Path(file.path).read_text(encoding="utf-8") == "{}\n"
