"""A ``--data-dir`` that would block or exhaust a build (issue #54): a FIFO or a link to ``/dev/zero`` among its
files, a link to nothing, the data folder being the output. Each is refused in one line naming the path, before
any work, with nothing written; a link to a regular file outside the folder is read, as a user who links data
in means it (``source_files.regular_file``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from convhub import registry
from convhub.cli.main import main

pytestmark = pytest.mark.timeout(120)  # a FIFO opened for reading would block for ever

MNBVC_SAMPLE = Path(registry.get("mnbvc").sample_dir()) / "multiturn"
CONVLAB_SAMPLE = Path(registry.get("convlab").sample_dir())


@pytest.fixture
def data(tmp_path) -> Path:
    """A copy of MNBVC's multi-turn sample files, in a folder of their own."""
    folder = tmp_path / "data"
    shutil.copytree(MNBVC_SAMPLE, folder)
    return folder


def refused(capsys, *args: str, status_expected: int = 1) -> str:
    """Run ``convhub build mnbvc ARGS``; assert it failed with ``status_expected`` (1, a data error) in one line;
    that line."""
    capsys.readouterr()
    status = main(["build", "mnbvc", *args])
    [line] = capsys.readouterr().err.strip().splitlines()
    assert status == status_expected, line
    assert line.startswith("convhub build: error: ")
    return line


def only(tmp_path: Path, *names: str) -> None:
    """The test's folder holds these entries and nothing more (no output, no staging)."""
    assert sorted(os.listdir(tmp_path)) == sorted(names)


def test_a_fifo_among_the_files_is_refused_in_one_line(data, tmp_path, capsys):
    os.mkfifo(data / "pipe.jsonl")
    line = refused(capsys, "--data-dir", str(data), "--output", str(tmp_path / "out"))
    assert line.endswith(f"{data / 'pipe.jsonl'}: not a regular file (a FIFO): convhub reads regular files only; "
                         "remove it from the data folder")  # fmt: skip
    only(tmp_path, "data")


def test_a_fifo_given_as_the_data_dir_is_refused(tmp_path, capsys):
    os.mkfifo(tmp_path / "pipe.jsonl")
    line = refused(capsys, "--data-dir", str(tmp_path / "pipe.jsonl"), "--output", str(tmp_path / "out"))
    assert f"{tmp_path / 'pipe.jsonl'}: not a regular file (a FIFO)" in line
    only(tmp_path, "pipe.jsonl")


def test_a_link_to_a_device_is_refused_naming_both(data, tmp_path, capsys):
    os.symlink("/dev/zero", data / "zero.jsonl")
    line = refused(capsys, "--data-dir", str(data), "--output", str(tmp_path / "out"))
    assert (
        f"{data / 'zero.jsonl'}: not a regular file (a device, through a symbolic link to /dev/zero)" in line
    )
    only(tmp_path, "data")


def test_a_link_to_nothing_is_refused(data, tmp_path, capsys):
    os.symlink(tmp_path / "moved-away.jsonl", data / "gone.jsonl")
    line = refused(capsys, "--data-dir", str(data), "--output", str(tmp_path / "out"))
    assert line.endswith(
        f"{data / 'gone.jsonl'}: a symbolic link to {tmp_path / 'moved-away.jsonl'}, which does not exist"
    )
    only(tmp_path, "data")


def test_a_convlab_folder_holding_a_fifo_is_refused(tmp_path, capsys):
    data = tmp_path / "data"
    shutil.copytree(CONVLAB_SAMPLE, data)
    os.mkfifo(data / "toychat" / "data" / "pipe.json")  # beside the files of a dataset given as a folder
    capsys.readouterr()
    status = main(["build", "convlab", "--data-dir", str(data), "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert status == 1, err
    assert "pipe.json: not a regular file (a FIFO)" in err and "Traceback" not in err
    only(tmp_path, "data")


def test_a_link_to_a_regular_file_outside_the_folder_is_read(data, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    moved = sorted(data.glob("*.jsonl"))[0]
    shutil.move(moved, outside / moved.name)
    os.symlink(outside / moved.name, moved)
    linked = main(
        [
            "build",
            "mnbvc",
            "--data-dir",
            str(data),
            "--output",
            str(tmp_path / "linked"),
            "--config",
            "sessions",
        ]
    )
    shutil.move(outside / moved.name, moved)  # the same files without the link
    copied = main(
        [
            "build",
            "mnbvc",
            "--data-dir",
            str(data),
            "--output",
            str(tmp_path / "copied"),
            "--config",
            "sessions",
        ]
    )
    assert linked == copied == 0

    def rows(output: Path) -> list:
        return [
            row
            for path in sorted((output / "sessions").rglob("*.parquet"))
            for row in pq.read_table(path).to_pylist()
        ]

    assert rows(tmp_path / "linked") == rows(tmp_path / "copied") != []


@pytest.mark.parametrize("output", [".", "sub"])
def test_the_data_folder_as_the_output_or_holding_it_is_refused_before_work(data, capsys, output):
    before = sorted(os.listdir(data))
    # an output refused: the command line cannot run as given (exit 2, as every command refuses an output)
    line = refused(capsys, "--data-dir", str(data), "--output", str(data / output), status_expected=2)
    assert "refusing to write" in line and str(data) in line
    assert sorted(os.listdir(data)) == before
