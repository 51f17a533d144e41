"""``convhub score --output``: a new file, or a report convhub score wrote; never a file of the user's, the
predictions, the build, a FIFO or a folder; no temporary file left behind; the mode the umask gives."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

import pytest

from convhub.score import output as output_module
from tests.score.score_helpers import qa_rows, run_score, score_argv, write_predictions

pytest_plugins = ["tests.score.score_fixtures"]


@pytest.fixture
def predictions(locomo_sample, tmp_path) -> Path:
    rows = qa_rows(locomo_sample)
    return write_predictions(
        tmp_path / "p.jsonl", [{"question_id": row["question_id"], "prediction": "x"} for row in rows[:3]]
    )


def score_to(data: Path, predictions: Path, output: str, capsys) -> tuple[int, str, str]:
    return run_score(score_argv("locomo", str(data), str(predictions), output), capsys)


def leftovers(folder: Path) -> list[str]:
    return sorted(name for name in os.listdir(folder) if name.startswith("."))


def assert_refused(status: int, err: str, *words: str) -> None:
    assert status == 2
    assert err.count("\n") == 1 and err.startswith("convhub score: error: --output "), err
    for word in words:
        assert word in err


def test_a_new_report_then_a_rerun_replaces_it(locomo_sample, predictions, tmp_path, capsys):
    report = tmp_path / "out" / "report.json"
    assert score_to(locomo_sample, predictions, str(report), capsys)[0] == 0
    written = json.loads(report.read_text())
    assert written["written_by"] == "convhub score" and written["predicted"] == 3
    report.write_text(report.read_text().replace('"predicted": 3', '"predicted": 99'))
    assert score_to(locomo_sample, predictions, str(report), capsys)[0] == 0
    assert json.loads(report.read_text())["predicted"] == 3
    assert leftovers(report.parent) == []


def test_a_report_written_before_the_marker_is_still_convhubs(locomo_sample, predictions, tmp_path, capsys):
    report = tmp_path / "old.json"
    assert score_to(locomo_sample, predictions, str(report), capsys)[0] == 0
    old = json.loads(report.read_text())
    del old["written_by"]
    report.write_text(json.dumps(old))
    assert score_to(locomo_sample, predictions, str(report), capsys)[0] == 0
    assert json.loads(report.read_text())["written_by"] == "convhub score"


@pytest.mark.parametrize("content", ["my notes\n", "", '{"benchmark": "locomo"}', "[1, 2]"])
def test_a_users_file_is_refused_and_kept(locomo_sample, predictions, tmp_path, capsys, content):
    notes = tmp_path / "notes.txt"
    notes.write_text(content)
    status, out, err = score_to(locomo_sample, predictions, str(notes), capsys)
    assert_refused(status, err, "not a report convhub score wrote")
    assert notes.read_text() == content and out == ""
    assert leftovers(tmp_path) == []


def test_the_predictions_are_refused(locomo_sample, predictions, capsys):
    before = predictions.read_bytes()
    status, _, err = score_to(locomo_sample, predictions, str(predictions), capsys)
    assert_refused(status, err, "is the predictions file")
    assert predictions.read_bytes() == before


@pytest.mark.parametrize("inside", ["README.md", "new-report.json", "qa/report.json"])
def test_the_build_and_anything_inside_it_are_refused(locomo_sample, predictions, capsys, inside):
    card = (locomo_sample / "README.md").read_bytes()
    status, _, err = score_to(locomo_sample, predictions, str(locomo_sample / inside), capsys)
    assert_refused(status, err, "inside the build folder")
    assert (locomo_sample / "README.md").read_bytes() == card
    assert not (locomo_sample / "new-report.json").exists()


def test_a_folder_a_fifo_a_device_and_a_link_are_refused(locomo_sample, predictions, tmp_path, capsys):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "elsewhere.json")
    for target, words in (
        (tmp_path, "is a folder"),
        (fifo, "not a regular file"),
        (Path("/dev/null"), "not a regular file"),
        (link, "symbolic link"),
    ):
        status, _, err = score_to(locomo_sample, predictions, str(target), capsys)
        assert_refused(status, err, words)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert not (tmp_path / "elsewhere.json").exists()
    assert leftovers(tmp_path) == []


def test_urls(locomo_sample, predictions, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = os.listdir(tmp_path)
    for url in ("s3://bucket/report.json", "s3:/bucket/report.json", "HF:datasets/x/r.json", "gs:r.json"):
        status, _, err = score_to(locomo_sample, predictions, url, capsys)
        assert_refused(status, err, "is a URL")
    assert sorted(os.listdir(tmp_path)) == sorted(before)  # no "s3:" or "HF:" folder made
    assert score_to(locomo_sample, predictions, "notes:v2.json", capsys)[0] == 0  # a file name with a colon
    assert json.loads((tmp_path / "notes:v2.json").read_text())["written_by"] == "convhub score"
    for url in (f"file:{tmp_path}/a.json", f"file://{tmp_path}/b.json", f"file://localhost{tmp_path}/c.json"):
        assert score_to(locomo_sample, predictions, url, capsys)[0] == 0
    assert json.loads((tmp_path / "a.json").read_text())["written_by"] == "convhub score"
    assert (tmp_path / "b.json").is_file() and (tmp_path / "c.json").is_file()
    assert not (tmp_path / "file:").exists()
    status, _, err = score_to(locomo_sample, predictions, "file://otherhost/x.json", capsys)
    assert_refused(status, err, "file: URL")


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_the_report_follows_the_umask(locomo_sample, predictions, tmp_path, capsys, mask):
    previous = os.umask(mask)
    try:
        assert score_to(locomo_sample, predictions, str(tmp_path / "r.json"), capsys)[0] == 0
    finally:
        os.umask(previous)
    assert stat.S_IMODE(os.stat(tmp_path / "r.json").st_mode) == 0o666 & ~mask


@pytest.mark.parametrize("failure", [OSError(errno.ENOSPC, "No space left on device"), KeyboardInterrupt()])
def test_a_full_disk_or_ctrl_c_leaves_no_temporary_file(
    locomo_sample, predictions, tmp_path, capsys, monkeypatch, failure
):
    report = tmp_path / "r.json"
    assert score_to(locomo_sample, predictions, str(report), capsys)[0] == 0
    before = report.read_bytes()

    def fail(*args, **kwargs):
        raise failure

    monkeypatch.setattr(output_module.json, "dump", fail)
    if isinstance(failure, KeyboardInterrupt):
        with pytest.raises(KeyboardInterrupt):
            score_to(locomo_sample, predictions, str(report), capsys)
    else:
        status, _, err = score_to(locomo_sample, predictions, str(report), capsys)
        assert status == 1 and "No space left on device" in err and err.count("\n") == 1
    assert report.read_bytes() == before
    assert leftovers(tmp_path) == []
