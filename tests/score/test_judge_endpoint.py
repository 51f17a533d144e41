"""The judge endpoint under attack (issue #54): slow, silent, trickling, refusing, failing, babbling, huge or
deep replies; each ends in bounded tries and time with one line, and the API key and URL credentials reach no
message, report or cache file."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from convhub.cli.main import main
from convhub.score.judge import mem0 as mem0_judge
from convhub.score.judge.client import Judge, JudgeError, VerdictFailed
from convhub.score.judge.transport import MAX_BODY, clear_text_warning, redact, shown_url
from tests.score.score_helpers import qa_rows, run_score, write_predictions
from tests.support.running_commands import command_env

#: the fixtures gigamemory_sample and judge
pytest_plugins = ["tests.score.score_fixtures"]

PROMPT = "x\n\nQuestion: Q\n\nCorrect Answer: Lisbon\n\nModel Response: Lisbon\n\nIs it?"


def ask(double, prompt: str = PROMPT, **options) -> bool:
    options = {"retries": 0, **options}
    return Judge(double.url, "m", api_key="sk-secret-key-123", **options).label(prompt)


@pytest.mark.slow
def test_a_slow_reply_is_cut_at_the_deadline(judge):
    judge.delay = 5
    with pytest.raises(VerdictFailed, match=r"no whole reply within 0\.3 s \(2 tries\)"):
        ask(judge, timeout=0.3, retries=1)
    assert len(judge.requests) == 2


def test_a_byte_a_second_never_outlasts_the_deadline(judge):
    judge.trickle = 0.05  # each read is quick; the whole reply (about 150 bytes) would take 7 s
    started = time.monotonic()
    with pytest.raises(VerdictFailed, match=r"no whole reply within 0\.5 s \(1 try\)"):
        ask(judge, timeout=0.5)
    assert time.monotonic() - started < 5  # cut long before the reply's end


def test_a_judge_that_never_answers(judge):
    judge.hang = True
    with pytest.raises(VerdictFailed, match=r"no whole reply within 0\.3 s"):
        ask(judge, timeout=0.3)


@pytest.mark.slow
def test_429_honours_retry_after_then_succeeds(judge):
    judge.fail_with, judge.fail_times, judge.retry_after = 429, 1, "1"
    assert ask(judge, retries=2) is True
    assert len(judge.requests) == 2
    assert judge.arrival[1] - judge.arrival[0] >= 0.9  # waited as asked (the backoff alone is 0.5 s)


@pytest.mark.slow
def test_429_without_retry_after_backs_off_then_succeeds(judge):
    judge.fail_with, judge.fail_times = 429, 2
    assert ask(judge, retries=3) is True
    assert len(judge.requests) == 3


@pytest.mark.slow
def test_500_on_every_try_is_one_line_after_bounded_tries(judge):
    judge.fail_with = 500
    with pytest.raises(VerdictFailed) as failure:
        ask(judge, retries=2)
    assert len(judge.requests) == 3
    assert str(failure.value).endswith('HTTP 500: {"error": "the judge double fails on purpose"} (3 tries)')


def test_a_wrong_key_stops_at_once(judge):
    judge.fail_with = 401
    with pytest.raises(JudgeError) as failure:
        ask(judge, retries=3)
    assert not isinstance(failure.value, VerdictFailed) and "HTTP 401" in str(failure.value)
    assert len(judge.requests) == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    ("reply", "says"),
    [
        (b"<html>garbage</html>", "the reply is not JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deep"),
        (b'{"choices": []}', "no choices[0].message.content"),
        (b'{"choices": [{"message": {"content": 7}}]}', "content is not text"),
        (b"x" * (MAX_BODY + 1), f"larger than {MAX_BODY:,} bytes"),
    ],
    ids=["garbage", "deep", "no-choice", "not-text", "huge"],
)
def test_a_reply_that_is_no_verdict(judge, reply, says):
    judge.reply = reply
    with pytest.raises(
        VerdictFailed, match="judge http://127.0.0.1:.*/v1/chat/completions: .*" + re.escape(says)
    ):
        ask(judge, retries=1)
    assert len(judge.requests) == 2


def test_an_endless_body_is_cut(judge):
    judge.endless = True
    with pytest.raises(VerdictFailed, match=f"larger than {MAX_BODY:,} bytes"):
        ask(judge, timeout=30)


def test_a_verdict_in_odd_casing(judge):
    judge.verdict_case = str.upper  # "YES."
    assert ask(judge) is True
    judge.verdict_case = lambda text: "  yEs  "
    assert ask(judge) is True
    judge.verdict_case = str.lower  # mem0's label must be exactly "CORRECT", as its code compares
    body = mem0_judge.request_body("m", "Q", "Lisbon", "Lisbon")
    assert Judge(judge.url, "m", retries=0).verdicts([body], mem0_judge.is_correct) == [False]


def test_requests_at_once_stay_within_workers(judge):
    judge.delay = 0.2
    prompts = [PROMPT.replace("Q", f"Q{n}") for n in range(8)]
    assert Judge(judge.url, "m", retries=0, workers=2).labels(prompts) == [True] * 8
    assert judge.most_in_flight == 2


def test_redact_first_then_cut():
    key = "sk-" + "k" * 40
    text = "x" * 190 + key + " tail"
    shown = redact(text, [key])
    assert "sk-kkk" not in shown and "k" * 5 not in shown and shown.startswith("x" * 190 + "***")
    assert shown_url("http://user:pa%40ss@127.0.0.1:8/v1") == "http://127.0.0.1:8/v1"


def test_no_secret_in_any_output(gigamemory_sample, tmp_path, capsys, judge, monkeypatch):
    """The server echoes the request's headers in its error body and in its verdicts."""
    key = "sk-proj-" + "s3cr3t" * 8
    monkeypatch.setenv("OPENAI_API_KEY", key)
    rows = qa_rows(gigamemory_sample)
    predictions = [{"question_id": row["question_id"], "prediction": row["answer"]} for row in rows]
    file = write_predictions(tmp_path / "p.jsonl", predictions)
    cache = tmp_path / "cache"
    argv = ["gigamemory", "--data", str(gigamemory_sample), "--predictions", str(file)]
    argv += ["--output", str(tmp_path / "r.json"), "--judge-url", judge.url, "--judge-model", "m"]
    argv += ["--judge-cache", str(cache), "--judge-retries", "0"]
    judge.fail_with, judge.echo_headers = 503, True
    status, out, err = run_score(argv, capsys)
    assert status == 1 and err.count("\n") == 1 and "HTTP 503" in err and "s3cr3t" not in err
    judge.fail_with = None
    judge.verdict_case = lambda text: f"{text} (you sent {judge.headers[-1]['Authorization']})"
    status, out, err = run_score(argv, capsys)
    assert status == 0, err
    assert {h["Authorization"] for h in judge.headers} == {f"Bearer {key}"}  # the key was sent...
    stored = [path.read_text() for path in cache.rglob("*.json")]
    assert len(stored) == len(rows) and all("Bearer ***" in text for text in stored)
    report = (tmp_path / "r.json").read_text()
    for text in (out, err, report, *stored):  # ...and shows nowhere
        assert "s3cr3t" not in text


def test_url_credentials_show_nowhere(gigamemory_sample, tmp_path, capsys, judge, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    rows = qa_rows(gigamemory_sample)
    file = write_predictions(
        tmp_path / "p.jsonl",
        [{"question_id": row["question_id"], "prediction": row["answer"]} for row in rows],
    )
    url = judge.url.replace("http://", "http://alice:hunter2%40pw@")
    argv = ["gigamemory", "--data", str(gigamemory_sample), "--predictions", str(file)]
    argv += ["--output", str(tmp_path / "r.json"), "--judge-url", url, "--judge-model", "m"]
    argv += ["--judge-cache", str(tmp_path / "cache"), "--judge-retries", "0"]
    basic = "Basic " + base64.b64encode(b"alice:hunter2@pw").decode()
    judge.fail_with, judge.echo_headers = 503, True
    status, out, err = run_score(argv, capsys)
    judge.fail_with = None
    judge.verdict_case = lambda text: f"{text} ({judge.headers[-1]['Authorization']})"
    status2, out2, err2 = run_score(argv, capsys)
    assert (status, status2) == (1, 0), err2
    assert {h["Authorization"] for h in judge.headers} == {basic}  # sent as Basic auth...
    report = (tmp_path / "r.json").read_text()
    stored = [path.read_text() for path in (tmp_path / "cache").rglob("*.json")]
    for text in (out, err, out2, err2, report, *stored):  # ...shown nowhere
        for secret in ("hunter2", "alice", basic.split()[1]):
            assert secret not in text, (secret, text)
    assert json.loads(report)["judge"]["url"] == judge.url


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (["--judge-timeout", "inf"], "argument --judge-timeout: must be a finite number, not inf"),
        (["--judge-timeout", "nan"], "argument --judge-timeout: must be a finite number, not nan"),
        (["--judge-timeout", "0"], "argument --judge-timeout: must be more than 0"),
        (["--judge-runs", "0"], "argument --judge-runs: must be more than 0"),
        (["--judge-url", "http://[::1"], "--judge-url is not a URL"),
        (["--judge-url", "ftp://host/v1"], "must be an http:// or https:// URL"),
        (["--judge-price-in", "2"], "--judge-price-in and --judge-price-out go together"),
    ],
)
def test_bad_judge_options_are_one_line(gigamemory_sample, tmp_path, capsys, options, says, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-ok")
    argv = ["score", "gigamemory", "--data", str(gigamemory_sample), "--predictions", str(tmp_path / "p")]
    argv += ["--output", str(tmp_path / "r.json"), "--judge-model", "m"]
    if "--judge-url" not in options:
        argv += ["--judge-url", "http://127.0.0.1:9/v1"]
    try:
        status = main([*argv, *options])
    except SystemExit as exit:
        status = exit.code
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and err.startswith("convhub score: error: "), err
    assert says in err


def test_a_key_no_header_can_carry(gigamemory_sample, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-clé")
    argv = ["gigamemory", "--data", str(gigamemory_sample), "--predictions", str(tmp_path / "p")]
    argv += [
        "--output",
        str(tmp_path / "r.json"),
        "--judge-url",
        "http://127.0.0.1:9/v1",
        "--judge-model",
        "m",
    ]
    status, _, err = run_score(argv, capsys)
    assert status == 2 and "the judge key in $OPENAI_API_KEY holds characters" in err and "clé" not in err


@pytest.mark.slow
def test_ctrl_c_during_a_stall_stops_at_once(gigamemory_sample, tmp_path, judge):
    judge.hang = True
    rows = qa_rows(gigamemory_sample)
    file = write_predictions(
        tmp_path / "p.jsonl", [{"question_id": row["question_id"], "prediction": "x"} for row in rows]
    )
    command = [sys.executable, "-m", "convhub.cli", "score"]  # the command's own entry point
    command += ["gigamemory", "--data", str(gigamemory_sample), "--predictions", str(file)]
    command += ["--output", str(tmp_path / "r.json"), "--judge-url", judge.url, "--judge-model", "m"]
    command += ["--judge-timeout", "600", "--judge-cache", str(tmp_path / "cache")]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 120
        while not judge.requests and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
        assert judge.requests, "the judge was never asked"
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)  # a stalled read held it for minutes before
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130 and err == "convhub score: interrupted\n", err
    assert not (tmp_path / "r.json").exists()


def test_a_refused_request_is_not_retried(judge):
    judge.fail_with = 400
    with pytest.raises(VerdictFailed, match=r"HTTP 400: .* \(1 try\)$"):
        ask(judge, retries=3)
    assert len(judge.requests) == 1


# -- a key over plain http ----------------------------------------------------------------------------------


def _score_through(judge, gigamemory_sample, tmp_path, url: str, **env: str) -> tuple[int, str]:
    """``convhub score gigamemory`` as a real process asking the judge at ``url`` with a key set: its exit
    status and stderr."""
    rows = qa_rows(gigamemory_sample)
    file = write_predictions(
        tmp_path / "p.jsonl", [{"question_id": rows[0]["question_id"], "prediction": "x"}]
    )
    argv = [sys.executable, "-m", "convhub.cli", "score", "gigamemory", "--data", str(gigamemory_sample)]
    argv += ["--predictions", str(file), "--output", str(tmp_path / "r.json"), "--judge-url", url]
    argv += ["--judge-model", "m", "--judge-retries", "0", "--no-judge-cache"]
    environment = command_env(OPENAI_API_KEY="sk-plain-" + "k" * 20, NO_PROXY="", no_proxy="", **env)
    done = subprocess.run(argv, capture_output=True, text=True, env=environment, timeout=120)
    return done.returncode, done.stderr


@pytest.mark.slow
def test_a_key_over_plain_http_to_another_machine_is_warned_of_before_the_first_request(
    gigamemory_sample, tmp_path, judge
):
    """``http://judge.example`` reached through an HTTP proxy that is the double on 127.0.0.1 (the request
    never leaves this machine): the warning is the first line, and the request went out after it."""
    proxy = judge.url.removesuffix("/v1")
    status, err = _score_through(
        judge, gigamemory_sample, tmp_path, "http://judge.example/v1", HTTP_PROXY=proxy, http_proxy=proxy
    )
    lines = err.strip().splitlines()
    assert lines[0] == (
        "warning: --judge-url http://judge.example/v1 is plain http to another machine: the API key crosses the "
        "network unencrypted (give an https:// URL)"
    ), err
    assert lines.count(lines[0]) == 1
    assert judge.paths == ["http://judge.example/v1/chat/completions"]  # asked once, through the proxy
    assert judge.headers[0]["Authorization"] == "Bearer sk-plain-" + "k" * 20
    assert "kkkk" not in err and status == 1  # (the double routes no proxied path: 404)


@pytest.mark.slow
def test_no_warning_for_a_judge_on_this_machine(gigamemory_sample, tmp_path, judge):
    status, err = _score_through(judge, gigamemory_sample, tmp_path, judge.url)
    assert status == 0 and "warning" not in err, err
    assert judge.requests


@pytest.mark.parametrize(
    "url, key, warned",
    [
        ("http://judge.example/v1", "sk", True),
        ("http://10.0.0.7:8000/v1", "sk", True),
        ("http://user:pw@judge.example/v1", None, True),
        ("http://judge.example/v1", None, False),
        ("https://judge.example/v1", "sk", False),
        ("http://127.0.0.1:8000/v1", "sk", False),
        ("http://127.8.9.10/v1", "sk", False),
        ("http://localhost:8000/v1", "sk", False),
        ("http://[::1]:8000/v1", "sk", False),
    ],
)
def test_which_urls_are_warned_of(url, key, warned):
    line = clear_text_warning(url, key)
    assert (line is not None) == warned
    assert line is None or ("pw" not in line and line.startswith("warning: --judge-url http://"))
