"""Judge calls that cost once (issue #51, item 5): the persistent cache, runs with a majority and their
agreement, tokens and cost, and GigaMemory's failure policy."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from convhub.score.judge.cache import JudgeCache, default_folder, request_key
from convhub.score.judge.client import Judge
from convhub.score.judge.transport import Reply
from tests.score.score_helpers import qa_rows, run_score, write_predictions

#: the fixtures gigamemory_sample and judge
pytest_plugins = ["tests.score.score_fixtures"]


def score_gigamemory(sample: Path, tmp_path: Path, capsys, judge, *options: str, answers=None):
    rows = qa_rows(sample)
    answers = answers or {row["question_id"]: row["answer"] for row in rows}
    file = write_predictions(
        tmp_path / "p.jsonl", [{"question_id": key, "prediction": value} for key, value in answers.items()]
    )
    argv = [
        "gigamemory",
        "--data",
        str(sample),
        "--predictions",
        str(file),
        "--output",
        str(tmp_path / "r.json"),
    ]
    status, out, err = run_score([*argv, "--judge-url", judge.url, "--judge-model", "m", *options], capsys)
    report = json.loads((tmp_path / "r.json").read_text()) if status == 0 else None
    return status, out, err, report


def test_scoring_again_makes_no_request(gigamemory_sample, tmp_path, capsys, judge):
    questions = len(qa_rows(gigamemory_sample))
    status, _, err, first = score_gigamemory(gigamemory_sample, tmp_path, capsys, judge)
    assert status == 0, err
    assert first["judge"]["calls"] == questions == len(judge.requests) and first["judge"]["cached"] == 0
    entries = list(default_folder().rglob("*.json"))  # the default folder, under $XDG_CACHE_HOME
    assert len(entries) == questions and str(default_folder()).endswith("convhub/judge")
    status, out, _, again = score_gigamemory(gigamemory_sample, tmp_path, capsys, judge)
    assert status == 0 and len(judge.requests) == questions  # not one more
    assert again["judge"]["calls"] == 0 and again["judge"]["cached"] == questions
    assert again["overall"] == first["overall"] and again["by_category"] == first["by_category"]
    assert f"0 judge requests, {questions} cached replies" in out
    score_gigamemory(gigamemory_sample, tmp_path, capsys, judge, "--no-judge-cache")
    assert len(judge.requests) == 2 * questions


def test_an_interrupted_run_resumes(gigamemory_sample, tmp_path, capsys, judge):
    questions = len(qa_rows(gigamemory_sample))
    cache = str(tmp_path / "cache")
    judge.fail_with, judge.fail_from = 401, 3  # a key revoked after three replies: the run stops
    status, _, err, _ = score_gigamemory(
        gigamemory_sample, tmp_path, capsys, judge, "--judge-cache", cache, "--judge-workers", "1"
    )
    assert status == 1 and "HTTP 401" in err
    assert len(list(Path(cache).rglob("*.json"))) == 3  # each reply kept as it arrived
    judge.fail_with = None
    asked = len(judge.requests)
    status, _, err, report = score_gigamemory(
        gigamemory_sample, tmp_path, capsys, judge, "--judge-cache", cache
    )
    assert status == 0, err
    assert report["judge"]["cached"] == 3 and report["judge"]["calls"] == questions - 3
    assert len(judge.requests) - asked == questions - 3


def test_runs_are_distinct_requests_with_a_majority(judge, tmp_path):
    replies = iter(["Yes.", "No.", "Yes.", "No.", "No.", "Yes."])
    judge.verdict_case = lambda text: next(replies)
    scorer = Judge(judge.url, "m", retries=0, workers=1, runs=3, cache=JudgeCache(tmp_path))
    prompts = ["Question: 1\n\nCorrect Answer: a", "Question: 2\n\nCorrect Answer: b"]
    assert scorer.labels(prompts) == [True, False]  # 2 of 3 yes; 1 of 3 yes
    assert len(judge.requests) == 6 and scorer.tally.unanimous == 0 and scorer.tally.questions == 2
    assert len(list(tmp_path.rglob("*.json"))) == 6  # one entry per run
    again = Judge(judge.url, "m", retries=0, runs=3, cache=JudgeCache(tmp_path))
    assert again.labels(prompts) == [True, False] and again.calls == 0 and again.tally.cached == 6


def test_runs_agreement_tokens_and_cost_in_the_report(gigamemory_sample, tmp_path, capsys, judge):
    questions = len(qa_rows(gigamemory_sample))
    judge.usage = {"prompt_tokens": 1000, "completion_tokens": 2, "total_tokens": 1002}
    status, out, err, report = score_gigamemory(
        gigamemory_sample,
        tmp_path,
        capsys,
        judge,
        "--judge-runs",
        "3",
        "--judge-price-in",
        "2.5",
        "--judge-price-out",
        "10",
    )
    assert status == 0, err
    info = report["judge"]
    assert info["runs"] == 3 and info["agreement"] == 1.0 and info["calls"] == 3 * questions
    assert info["tokens"] == {"prompt": 3000 * questions, "completion": 6 * questions}
    assert info["cost"] == pytest.approx(questions * (3000 * 2.5 + 6 * 10) / 1e6)
    assert info["failed_verdicts"] == 0 and report["overall"]["accuracy"] == 1.0
    assert "3 runs, agreement 1.000" in out and "cost " in out


def test_gigamemory_counts_a_failed_verdict_as_negative(gigamemory_sample, tmp_path, capsys, judge):
    questions = len(qa_rows(gigamemory_sample))
    judge.fail_with, judge.fail_times = 500, 1  # the first request fails, and its one retry is refused
    options = ("--judge-retries", "0", "--judge-workers", "1", "--no-judge-cache")
    status, out, err, report = score_gigamemory(gigamemory_sample, tmp_path, capsys, judge, *options)
    assert status == 0, err
    assert report["judge"]["failed_verdicts"] == 1 and report["judge"]["calls"] == questions - 1
    assert report["overall"]["accuracy"] == pytest.approx((questions - 1) / questions)
    assert "1 failed verdicts counted as negative" in out


def test_cache_writers_at_once_leave_whole_entries(tmp_path):
    cache = JudgeCache(tmp_path)
    body = {"model": "m", "messages": [{"role": "user", "content": "q"}]}
    key = request_key("http://127.0.0.1/v1/chat/completions", body, 0)
    assert key != request_key("http://127.0.0.1/v1/chat/completions", body, 1)

    def write(number: int) -> None:
        for _ in range(20):
            cache.put(key, "u", body, 0, Reply("Yes" * 1000 + str(number), number, 1))
            assert cache.get(key, "u", body, 0) is not None  # never half a file

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert cache.get(key, "u", body, 0).content.startswith("Yes") and not list(tmp_path.rglob("*.tmp"))
    (tmp_path / key[:2] / f"{key}.json").write_text("{half")
    assert cache.get(key, "u", body, 0) is None  # asked again
