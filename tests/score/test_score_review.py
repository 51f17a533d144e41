"""``convhub score`` attacked as a skeptical user (issue #54, review round): a judge URL carrying a query and a
key in it, a key the endpoint echoes JSON-escaped, a judge cache mixed with the report or the build, and
Ctrl-C during a rerun that reads the cache. Each holds a defect found by trying it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from convhub.score.judge.transport import Endpoint, redact
from tests.score.score_helpers import qa_rows, run_score, score_argv, write_predictions

#: the fixtures gigamemory_sample, locomo_sample and judge
pytest_plugins = ["tests.score.score_fixtures"]


def gigamemory_argv(sample: Path, tmp_path: Path, url: str, rows=None, *options: str) -> list[str]:
    rows = qa_rows(sample) if rows is None else rows
    file = write_predictions(
        tmp_path / "p.jsonl",
        [{"question_id": row["question_id"], "prediction": row["answer"]} for row in rows],
    )
    argv = score_argv("gigamemory", sample, file, tmp_path / "r.json")
    return [*argv, "--judge-url", url, "--judge-model", "m", "--judge-retries", "0", *options]


def test_a_judge_url_with_a_query_keeps_it_and_hides_its_key(gigamemory_sample, tmp_path, capsys, judge):
    """Azure-style ``?api-version=...&api-key=...``: the request goes to ``/chat/completions`` with the query
    (it went to ``...&api-key=KEY/chat/completions``), and the key in the query shows nowhere."""
    url = judge.url + "?api-version=2024-06-01&api-key=q-s3cr3t-42"
    cache = tmp_path / "cache"
    argv = gigamemory_argv(gigamemory_sample, tmp_path, url, None, "--judge-cache", str(cache))
    status, out, err = run_score(argv, capsys)
    assert status == 0, err
    assert set(judge.paths) == {"/v1/chat/completions?api-version=2024-06-01&api-key=q-s3cr3t-42"}
    report = (tmp_path / "r.json").read_text()
    assert json.loads(report)["judge"]["url"] == judge.url + "?api-version=2024-06-01&api-key=***"
    judge.fail_with, judge.echo_headers = 503, True
    status, out2, err2 = run_score([*argv[:-2], "--no-judge-cache"], capsys)
    assert status == 1 and "HTTP 503" in err2 and "api-key=***" in err2, err2
    stored = [path.read_text() for path in cache.rglob("*.json")]
    assert stored
    for text in (out, err, out2, err2, report, *stored):
        assert "s3cr3t" not in text, text


def test_a_key_echoed_json_escaped_is_hidden(gigamemory_sample, tmp_path, capsys, judge, monkeypatch):
    """A key holding ``/``, ``"`` or ``\\`` comes back escaped in a JSON error body (``\\"``, ``\\\\``, ``\\/``):
    the escaped form is the key too."""
    key = 'sk-a/b"c\\d-s3cr3t'
    assert "s3cr3t" not in redact(json.dumps({"auth": f"Bearer {key}"}).replace("/", "\\/"), [key])
    assert "s3cr3t" not in redact(json.dumps({"error": f"bad key {key}"}), [key])
    monkeypatch.setenv("OPENAI_API_KEY", key)
    judge.fail_with, judge.echo_headers = 503, True
    status, out, err = run_score(gigamemory_argv(gigamemory_sample, tmp_path, judge.url), capsys)
    assert judge.headers[0]["Authorization"] == f"Bearer {key}"
    assert status == 1 and err.count("\n") == 1 and "HTTP 503" in err, err
    assert "s3cr3t" not in err + out


def test_the_endpoint_url_joins_the_path_before_the_query():
    endpoint = Endpoint("http://u:pw@host:8/base/?v=1&sig=zz#part", None, 5.0, 0)
    assert endpoint.url == "http://host:8/base/chat/completions?v=1&sig=zz"
    assert endpoint.shown == "http://host:8/base/chat/completions?v=1&sig=***"
    assert endpoint.shown_base == "http://host:8/base/?v=1&sig=***"
    assert {"pw", "zz"} <= set(endpoint.secrets)


def cache_cases(tmp_path: Path, sample: Path) -> dict[str, tuple[list[str], str]]:
    cache = tmp_path / "cache"
    (cache / "ab").mkdir(parents=True)
    (tmp_path / "notes.txt").write_text("mine\n")
    return {
        "report inside the cache": (
            ["--judge-cache", str(cache), "--output", str(cache / "ab" / "r.json")],
            "is inside the judge cache",
        ),
        "report at the cache": (["--judge-cache", str(tmp_path / "r.json")], "is inside the judge cache"),
        "cache inside the report": (
            ["--judge-cache", str(tmp_path / "r.json" / "cache")],
            "is inside --output",
        ),
        "cache inside the build": (["--judge-cache", str(sample / "judge")], "inside the build folder"),
        "cache a file": (["--judge-cache", str(tmp_path / "notes.txt")], "is not a folder"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "report inside the cache",
        "report at the cache",
        "cache inside the report",
        "cache inside the build",
        "cache a file",
    ],
)
def test_a_judge_cache_mixed_with_the_report_or_the_build_is_refused(
    gigamemory_sample, tmp_path, capsys, judge, case
):
    options, says = cache_cases(tmp_path, gigamemory_sample)[case]
    before = sorted(p.relative_to(gigamemory_sample) for p in gigamemory_sample.rglob("*"))
    argv = gigamemory_argv(gigamemory_sample, tmp_path, judge.url)
    if "--output" in options:
        at = argv.index("--output")
        argv[at + 1] = options[options.index("--output") + 1]
        options = options[:2]
    status, _, err = run_score([*argv, *options], capsys)
    assert status == 2 and err.count("\n") == 1 and says in err, err
    assert judge.requests == []  # refused before any judge call is paid for
    assert (tmp_path / "notes.txt").read_text() == "mine\n"
    assert sorted(p.relative_to(gigamemory_sample) for p in gigamemory_sample.rglob("*")) == before
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "cache" / "ab" / "r.json").exists()


@pytest.mark.slow
def test_ctrl_c_during_a_cached_rerun(gigamemory_sample, tmp_path, capsys, judge):
    """Half the answers judged and cached; a rerun of all reads those from the cache and stalls on the
    rest; Ctrl-C: exit 130, one line, no report, the cache whole (no temporary file); the next run asks only
    the rest."""
    rows = qa_rows(gigamemory_sample)
    cache = tmp_path / "cache"
    half = rows[: len(rows) // 2]
    status, _, err = run_score(
        gigamemory_argv(gigamemory_sample, tmp_path, judge.url, half, "--judge-cache", str(cache)), capsys
    )
    assert status == 0, err
    (tmp_path / "r.json").unlink()
    asked = len(judge.requests)
    judge.hang = True
    argv = gigamemory_argv(
        gigamemory_sample, tmp_path, judge.url, rows, "--judge-cache", str(cache), "--judge-timeout", "600"
    )
    command = [sys.executable, "-m", "convhub.cli", "score", *argv]  # the command's own entry point
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 120
        while len(judge.requests) == asked and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
        assert len(judge.requests) > asked, "the rerun never asked the uncached answers"
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130 and err == "convhub score: interrupted\n", err
    assert not (tmp_path / "r.json").exists()
    entries = list(cache.rglob("*"))
    assert [p for p in entries if p.name.startswith(".")] == []
    assert len([p for p in entries if p.suffix == ".json"]) == len(half)
    judge.hang = False
    status, _, err = run_score(
        gigamemory_argv(gigamemory_sample, tmp_path, judge.url, rows, "--judge-cache", str(cache)), capsys
    )
    assert status == 0, err
    report = json.loads((tmp_path / "r.json").read_text())
    assert (report["judge"]["cached"], report["judge"]["calls"]) == (len(half), len(rows) - len(half))


def test_a_short_ranking_leaves_the_rest_unretrieved_at_every_k():
    """docs/scoring.md: what a ranking leaves out is not retrieved, even at a k past the corpus (the authors'
    whole rankings would reach it there)."""
    from convhub.score.longmemeval_retrieval import evaluate_retrieval

    ids = ["filler_1", "answer_a", "filler_2"]
    assert evaluate_retrieval([0], {"answer_a"}, ids, 50) == (0.0, 0.0, 0.0)
    assert evaluate_retrieval([0, 2, 1], {"answer_a"}, ids, 50)[:2] == (1.0, 1.0)


def test_a_cache_entry_to_distrust_is_asked_again(tmp_path):
    """A shared cache folder may hold a FIFO, a device link, a huge file or another entry's copy at an entry's
    name: none blocks, fills the memory or is taken as this request's reply."""
    from convhub.score.judge.cache import LARGEST_ENTRY, JudgeCache, request_key
    from convhub.score.judge.transport import Reply

    cache = JudgeCache(tmp_path)
    url = "http://127.0.0.1/v1/chat/completions"
    asked, other = ({"model": "m", "messages": [{"role": "user", "content": q}]} for q in ("asked", "other"))
    key, other_key = request_key(url, asked, 0), request_key(url, other, 0)
    cache.put(other_key, url, other, 0, Reply("Yes", 1, 1))
    entry = tmp_path / key[:2] / f"{key}.json"
    entry.parent.mkdir(exist_ok=True)
    entry.write_bytes((tmp_path / other_key[:2] / f"{other_key}.json").read_bytes())
    assert cache.get(other_key, url, other, 0) == Reply("Yes", 1, 1)
    assert cache.get(key, url, asked, 0) is None  # another request's reply, copied under this name
    entry.unlink()
    os.mkfifo(entry)
    assert cache.get(key, url, asked, 0) is None  # read, it would block for ever
    entry.unlink()
    entry.symlink_to("/dev/zero")
    assert cache.get(key, url, asked, 0) is None
    entry.unlink()
    with entry.open("wb") as file:
        file.truncate(LARGEST_ENTRY + 1)
    assert cache.get(key, url, asked, 0) is None
    cache.put(key, url, asked, 0, Reply("No", 2, 1))
    assert cache.get(key, url, asked, 0) == Reply("No", 2, 1)


def test_an_id_both_a_session_and_a_turn_takes_the_rankings_level():
    """Session ``answer_s_1`` beside session ``answer_s``'s first turn ``answer_s_1``: it was read as the
    session whatever the rest of the ranking said (turn rankings scored 0 without a word)."""
    from convhub.score.inputs import ScoreError
    from convhub.score.longmemeval_retrieval import Conversation, Turn, ranking_level

    conversation = Conversation(
        {
            "answer_s": [Turn("answer_s_1", "user", True), Turn("answer_s_2", "assistant", False)],
            "answer_s_1": [Turn("answer_s_1_1", "user", False), Turn("answer_s_1_2", "assistant", False)],
        }
    )
    assert ranking_level(["answer_s_1", "answer_s_2"], conversation, "p line 1") == "turn"
    assert ranking_level(["noans_s_1", "answer_s"], conversation, "p line 1") == "session"
    assert ranking_level([], conversation, "p line 1") == ""
    with pytest.raises(ScoreError, match="every id is both a session and a turn"):
        ranking_level(["answer_s_1"], conversation, "p line 1")
    with pytest.raises(ScoreError, match="mixes session and turn ids"):
        ranking_level(["answer_s_1", "answer_s", "answer_s_2"], conversation, "p line 1")


def test_a_verdict_holding_the_key_json_escaped_is_cached_without_it(tmp_path, judge):
    """mem0's verdicts are JSON inside the content: a key echoed there comes escaped, and was cached so."""
    from convhub.score.judge import mem0 as mem0_judge
    from convhub.score.judge.cache import JudgeCache
    from convhub.score.judge.client import Judge

    key = 'sk-a/b"c\\d-s3cr3t'
    judge.verdict_case = lambda text: json.dumps({"label": text, "seen": f"Bearer {key}"})
    cache = JudgeCache(tmp_path / "cache")
    scorer = Judge(judge.url, "m", api_key=key, retries=0, cache=cache)
    body = mem0_judge.request_body("m", "Q?", "Lisbon", "Lisbon")
    assert scorer.verdicts([body], mem0_judge.is_correct) == [False]  # the label is the JSON, not CORRECT
    stored = [path.read_text() for path in (tmp_path / "cache").rglob("*.json")]
    assert len(stored) == 1 and "s3cr3t" not in stored[0]


def test_a_prediction_of_another_subset_says_which(tmp_path, capsys):
    """Tried as a newcomer: predictions of the whole LongMemEval sample scored with --subset longmemeval_s
    said only "is not a question of the data" of an oracle-only id."""
    from convhub.build import build_source
    from convhub.builders.longmemeval.builder import LongMemEvalBuilder

    build = tmp_path / "build"
    build_source("longmemeval", build, str(LongMemEvalBuilder.sample_dir()), ["qa", "turns"], 1)
    capsys.readouterr()  # the build's progress
    rows = qa_rows(build)
    only_oracle = sorted(
        {r["question_id"] for r in rows if r["subset"] == "longmemeval_oracle"}
        - {r["question_id"] for r in rows if r["subset"] == "longmemeval_s"}
    )
    assert only_oracle
    file = write_predictions(tmp_path / "p.jsonl", [{"question_id": only_oracle[0], "prediction": "x"}])
    argv = score_argv("longmemeval", build, file, tmp_path / "r.json", "--subset", "longmemeval_s")
    status, _, err = run_score(argv, capsys)
    assert status == 1 and err.count("\n") == 1, err
    assert (
        f"{only_oracle[0]!r} is not a question of the data (it is one of subset 'longmemeval_oracle'" in err
    )
    assert not (tmp_path / "r.json").exists()
