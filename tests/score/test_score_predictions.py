"""Hostile predictions files: each is one line naming the file, the line and the field, exit 1 (no traceback),
and nothing written; a BOM and CRLF line ends are read as the text they stand for."""

from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path

import pytest

from convhub import registry
from convhub.cli.main import main
from convhub.engine.build import build_source
from convhub.score.inputs import MAX_LINE_BYTES, ScoreError, read_predictions
from tests.score.score_helpers import qa_rows, run_score, score_argv, write_predictions

pytest_plugins = ["tests.score.score_fixtures"]


def score_file(data: Path, predictions: Path, tmp_path: Path, capsys, benchmark: str = "locomo"):
    report = tmp_path / "report.json"
    status, out, err = run_score(score_argv(benchmark, str(data), str(predictions), str(report)), capsys)
    return status, out, err, report


def assert_one_line(status: int, err: str, report: Path, *words: str) -> None:
    assert status == 1, err
    assert err.startswith("convhub score: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for word in words:
        assert word in err, err
    assert not report.exists()
    assert [name for name in os.listdir(report.parent) if name.startswith(".report")] == []


@pytest.fixture
def first_id(locomo_sample) -> str:
    return qa_rows(locomo_sample)[0]["question_id"]


CASES = {
    "malformed": (b'{"question_id": "ID", "prediction": x}\n', ["line 1", "not JSON"]),
    "truncated": (
        b'{"question_id": "ID", "prediction": "a"}\n{"question_id": "ID2", "predic',
        ["line 2", "not JSON"],
    ),
    "duplicate": (
        b'{"question_id": "ID", "prediction": "a"}\n\n{"question_id": "ID", "prediction": "b"}\n',
        ["line 3", "'question_id'", "twice (first on line 1)"],
    ),
    "unknown id": (
        b'{"question_id": "ID", "prediction": "a"}\n{"question_id": "nope", "prediction": "b"}\n',
        ["line 2", "'question_id'", "'nope' is not a question of the data"],
    ),
    "number": (b'{"question_id": "ID", "prediction": 3}\n', ["line 1", "field 'prediction'", "got int"]),
    "null": (
        b'{"question_id": "ID", "prediction": null}\n',
        ["line 1", "field 'prediction'", "got NoneType"],
    ),
    "no id": (b'{"prediction": "a"}\n', ["line 1", "field 'question_id'", "missing"]),
    "NaN": (b'{"question_id": "ID", "prediction": NaN}\n', ["line 1", "not JSON"]),
    "retrieved": (
        b'{"question_id": "ID", "prediction": "a", "retrieved": [1]}\n',
        ["line 1", "field 'retrieved'"],
    ),
    "not an object": (b'["ID", "a"]\n', ["line 1", "expected a JSON object, got list"]),
    "deep": (
        b'{"question_id": "ID", "prediction": "a", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n",
        ["line 1", "not JSON"],
    ),
    "invalid utf-8": (b'{"question_id": "ID", "prediction": "caf\xe9"}\n', ["line 1", "not UTF-8", "byte "]),
    # a BOM starting a line (two files joined) is read as the file's: the id is the same, so a duplicate
    "duplicate behind a bom": (
        b'{"question_id": "ID", "prediction": "a"}\n\xef\xbb\xbf{"question_id": "ID", "prediction": "b"}\n',
        ["line 2", "'question_id'", "twice (first on line 1)"],
    ),
    "duplicate across crlf and bom": (
        b'\xef\xbb\xbf{"question_id": "ID", "prediction": "a"}\r\n{"question_id": "ID", "prediction": "b"}\n',
        ["line 2", "'question_id'", "twice (first on line 1)"],
    ),
    "bom inside a line": (b'{"question_id": "ID", "prediction": "a"}\xef\xbb\xbf\n', ["line 1", "not JSON"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_hostile_line_is_one_error(locomo_sample, first_id, tmp_path, capsys, case):
    content, words = CASES[case]
    predictions = tmp_path / "p.jsonl"
    predictions.write_bytes(content.replace(b'"ID"', json.dumps(first_id).encode()))
    status, out, err, report = score_file(locomo_sample, predictions, tmp_path, capsys)
    assert_one_line(status, err, report, str(predictions), *words)
    assert out == ""


def test_a_bom_and_crlf_score_as_the_plain_file(locomo_sample, tmp_path, capsys):
    rows = qa_rows(locomo_sample)
    plain = write_predictions(
        tmp_path / "plain.jsonl",
        [{"question_id": r["question_id"], "prediction": r["answer"] or ""} for r in rows],
    )
    windows = tmp_path / "windows.jsonl"
    windows.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes().replace(b"\n", b"\r\n"))
    figures = []
    for file in (plain, windows):
        status, _, err, report = score_file(locomo_sample, file, tmp_path, capsys)
        assert status == 0, err
        figures.append(json.loads(report.read_text())["by_category"])
    assert figures[0] == figures[1]


def test_a_100_mb_line_is_refused_unread(locomo_sample, tmp_path, capsys):
    predictions = tmp_path / "huge.jsonl"
    with predictions.open("wb") as file:
        file.write(b'{"question_id": "x", "prediction": "')
        file.write(b"a" * (100 * 1024 * 1024))
        file.write(b'"}\n')
    status, _, err, report = score_file(locomo_sample, predictions, tmp_path, capsys)
    assert_one_line(status, err, report, "line 1", f"longer than {MAX_LINE_BYTES // 2**20} MiB")


def test_a_fifo_a_device_and_a_folder_are_refused_without_blocking(locomo_sample, tmp_path, capsys):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for source in (fifo, Path("/dev/zero"), tmp_path):
        status, _, err, report = score_file(locomo_sample, source, tmp_path, capsys)
        assert_one_line(status, err, report, str(source), "not a regular file")
    status, _, err, report = score_file(locomo_sample, tmp_path / "absent.jsonl", tmp_path, capsys)
    assert_one_line(status, err, report, "absent.jsonl", "No such file")


def test_the_command_line_prints_no_traceback(locomo_sample, tmp_path, capsys):
    """Through ``convhub``'s own entry point: the same single line and exit status."""
    report = tmp_path / "report.json"
    status = main(["score", *score_argv("locomo", str(locomo_sample), "/dev/zero", str(report))])
    err = capsys.readouterr().err
    assert_one_line(status, err, report, "/dev/zero")


def test_a_build_of_another_benchmark(gigamemory_sample, locomo_sample, tmp_path, capsys):
    predictions = write_predictions(tmp_path / "p.jsonl", [])
    status, _, err, report = score_file(gigamemory_sample, predictions, tmp_path, capsys)
    assert_one_line(
        status, err, report, "'gigamemory' questions, not 'locomo' ones", "score it as gigamemory"
    )
    mnbvc = tmp_path / "mnbvc"
    build_source("mnbvc", mnbvc, registry.get("mnbvc").sample_dir(), ["turns"], 1)
    capsys.readouterr()  # the build's progress bars
    status, _, err, report = score_file(mnbvc, predictions, tmp_path, capsys)
    assert_one_line(status, err, report, "has no 'qa' config (it has turns)", "holds no questions")
    (tmp_path / "not-a-build").mkdir()
    status, _, err, report = score_file(tmp_path / "not-a-build", predictions, tmp_path, capsys)
    assert_one_line(status, err, report, "not a convhub build folder")


@pytest.mark.slow
def test_a_million_lines_are_read_in_bounded_memory(tmp_path):
    """1,000 predictions, 999,000 blank lines of 60 spaces (60 MB) and a truncated last line: the error names
    line 1,000,001, and reading never held more than a few lines at once."""
    predictions = tmp_path / "million.jsonl"
    known = [f"q{n}" for n in range(1000)]
    with predictions.open("wb") as file:
        for question_id in known:
            file.write(json.dumps({"question_id": question_id, "prediction": "a"}).encode() + b"\n")
        file.write((b" " * 60 + b"\n") * 999_000)
        file.write(b'{"question_id": "q1", "predic')
    assert predictions.stat().st_size > 60_000_000
    tracemalloc.start()
    try:
        with pytest.raises(ScoreError, match=r"line 1000001: not JSON"):
            read_predictions(predictions, known)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000
