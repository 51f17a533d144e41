"""Zip members read within bounds: a bomb, a forged size, two names for one file and a damaged member are refused
by name, before anything is inflated."""

from __future__ import annotations

import struct
import unicodedata
import warnings
import zipfile
from pathlib import Path

import pytest

from convhub.engine.inputs import file_sets
from convhub.engine.inputs.file_sets import DataInput
from convhub.errors import SourceError


def write_zip(path: Path, members: list[tuple[str, bytes]], level: int = 6) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "Duplicate name: ..."
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=level) as archive:
            for name, data in members:
                archive.writestr(name, data)
    return path


def test_members_under_a_folder_are_listed_sized_and_read(tmp_path):
    archive = write_zip(
        tmp_path / "a.zip", [("data/b.json", b"[1]"), ("data/a/c.json", b"{}"), ("top.txt", b"x")]
    )
    source = DataInput("a", "zip", str(archive), "data/")
    assert source.members() == ["a/c.json", "b.json"]
    assert source.member_size("b.json") == 3
    assert source.member_size("absent.json") == 0
    with source.open("b.json") as stream:
        assert stream.read() == b"[1]"


def test_an_absent_member_and_an_unreadable_archive_are_named(tmp_path):
    archive = write_zip(tmp_path / "a.zip", [("data/b.json", b"[1]")])
    with (
        pytest.raises(SourceError, match=r"data/x\.json is not in the archive") as raised,
        DataInput("a", "zip", str(archive), "data/", origin="s3://bucket/a.zip").open("x.json"),
    ):
        pass
    assert raised.value.path == "s3://bucket/a.zip"
    (tmp_path / "bad.zip").write_bytes(b"not a zip")
    with pytest.raises(SourceError, match="not a readable zip archive") as raised:
        DataInput("bad", "zip", str(tmp_path / "bad.zip")).members()
    assert raised.value.path == str(tmp_path / "bad.zip")


@pytest.mark.parametrize(
    "second",
    [
        "data/a.json",
        "./data/a.json",
        "data//a.json",
        "data/A.json",
        unicodedata.normalize("NFD", "data/é.json"),
    ],
)
def test_two_members_naming_one_file_are_refused_naming_both(tmp_path, second):
    first = "data/a.json" if "a.json" in second.lower() else unicodedata.normalize("NFC", second)
    archive = write_zip(tmp_path / "a.zip", [(first, b"1"), (second, b"2")])
    with pytest.raises(SourceError) as raised:
        DataInput("a", "zip", str(archive)).members()
    assert f"{first!r} (entry 1) and {second!r} (entry 2) name one file" in str(raised.value)


def test_a_bomb_is_refused_and_a_small_member_of_any_ratio_is_not(tmp_path):
    size = file_sets.ZIP_RATIO_FREE_BYTES + 1
    bomb = write_zip(tmp_path / "bomb.zip", [("data/x.json", b" " * size)], level=9)
    with pytest.raises(SourceError, match="zip bomb") as raised:
        DataInput("bomb", "zip", str(bomb)).members()
    assert raised.value.path == f"{bomb}:data/x.json"
    small = write_zip(tmp_path / "small.zip", [("data/x.json", b" " * (1 << 20))], level=9)
    info = zipfile.ZipFile(small).getinfo("data/x.json")
    assert info.file_size > file_sets.ZIP_MAX_RATIO * info.compress_size
    assert DataInput("small", "zip", str(small)).members() == ["data/x.json"]


def test_a_compressed_size_past_the_archives_end_is_refused(tmp_path):
    archive = write_zip(tmp_path / "a.zip", [("data/x.json", b"[1, 2, 3]")])
    raw = bytearray(archive.read_bytes())
    at = raw.rindex(b"PK\x01\x02")
    raw[at + 20 : at + 24] = struct.pack("<I", 1 << 30)
    archive.write_bytes(bytes(raw))
    with pytest.raises(SourceError, match="more than the archive's"):
        DataInput("a", "zip", str(archive)).members()


def test_a_damaged_member_is_named_while_it_is_read(tmp_path):
    data = bytes(range(256)) * 4000
    archive = write_zip(tmp_path / "a.zip", [("data/x.bin", data)])
    raw = bytearray(archive.read_bytes())
    middle = len(raw) // 2
    raw[middle : middle + 8] = bytes(8)
    archive.write_bytes(bytes(raw))
    with (
        pytest.raises(SourceError, match="corrupt or truncated zip member") as raised,
        DataInput("a", "zip", str(archive), "data/").open("x.bin") as stream,
    ):
        stream.read()
    assert raised.value.path == f"{archive}:data/x.bin"


def test_refuse_same_names_names_both():
    file_sets.refuse_same_names("dir", ["a", "b"], "dataset folders")
    with pytest.raises(SourceError, match=r"two dataset folders name one file .*'Caf' and 'caf'"):
        file_sets.refuse_same_names("dir", ["Caf", "caf"], "dataset folders")
