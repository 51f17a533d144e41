"""``convhub score --data ORG/NAME``: a build on the Hub (the double on 127.0.0.1) is scored as the folder is; a
missing repo, a refused token and a Hub that never answers are each one line naming the repo, exit 1."""

from __future__ import annotations

import json
import shutil
import socket
import threading

import pytest

from convhub.build import build_source
from convhub.builders.longmemeval.builder import LongMemEvalBuilder
from convhub.cli.main import main
from convhub.publish.hub_client import TIMEOUT_ENV
from tests.score.score_helpers import qa_rows, score_argv, write_predictions

pytest_plugins = ["tests.score.score_fixtures"]

pytestmark = pytest.mark.hub


def push(folder, repo_id: str, tmp_path) -> None:
    from convhub.publish.push import push_folder

    copy = tmp_path / repo_id.replace("/", "-")
    shutil.copytree(folder, copy)
    push_folder(copy, repo_id)


def score(data: str, tmp_path, capsys, predictions: list[dict], *options: str) -> tuple[int, str, str]:
    file = write_predictions(tmp_path / "p.jsonl", predictions)
    argv = ["score", *score_argv("locomo", data, str(file), str(tmp_path / "r.json"))]
    status = main([*argv, *options])
    out, err = capsys.readouterr()
    return status, out, err


def assert_one_line(status: int, err: str, tmp_path, *words: str) -> None:
    assert status == 1, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("convhub score: error: ") and "Traceback" not in err, err
    for word in words:
        assert word in last, last
    assert not (tmp_path / "r.json").exists()


@pytest.mark.slow
def test_a_hub_build_scores_as_its_folder(hub, locomo_sample, tmp_path, capsys):
    push(locomo_sample, "org/locomo-s", tmp_path)
    rows = qa_rows(locomo_sample)
    predictions = [{"question_id": row["question_id"], "prediction": row["answer"] or ""} for row in rows]
    status, _, err = score("org/locomo-s", tmp_path, capsys, predictions)
    assert status == 0, err
    report = json.loads((tmp_path / "r.json").read_text())
    local = tmp_path / "local.json"
    file = write_predictions(tmp_path / "p.jsonl", predictions)
    argv = ["score", *score_argv("locomo", str(locomo_sample), str(file), str(local))]
    assert main(argv) == 0
    from_folder = json.loads(local.read_text())
    assert report["data"] == "org/locomo-s"
    assert report["data_hash"] == from_folder["data_hash"]
    assert report["source_files"] == from_folder["source_files"]
    assert report["by_category"] == from_folder["by_category"]


def test_a_missing_repo_is_one_line(hub, tmp_path, capsys):
    status, _, err = score("org/nothing-here", tmp_path, capsys, [])
    assert_one_line(status, err, tmp_path, "org/nothing-here")


def test_a_refused_token_is_one_line_without_the_token(hub, locomo_sample, tmp_path, capsys):
    push(locomo_sample, "org/locomo-s", tmp_path)
    hub.expire_token()  # the token in HF_TOKEN, which the fixture set, is refused from now on
    status, _, err = score("org/locomo-s", tmp_path, capsys, [])
    assert_one_line(status, err, tmp_path, "org/locomo-s")
    assert hub.token not in err


@pytest.fixture
def never_answering_hub(monkeypatch):
    """``HF_ENDPOINT`` (and the copies the clients read at import) at a socket that takes connections and never
    answers them (the kernel's backlog accepts them; nothing reads)."""
    import datasets.config
    from huggingface_hub import constants

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    url = f"http://127.0.0.1:{server.getsockname()[1]}"
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setattr(constants, "ENDPOINT", url)
    monkeypatch.setattr(datasets.config, "HF_ENDPOINT", url)
    yield url
    server.close()


@pytest.mark.slow
def test_a_hub_that_never_answers_is_one_line(never_answering_hub, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(TIMEOUT_ENV, "1")
    result = {}
    worker = threading.Thread(
        target=lambda: result.setdefault("status", score("org/locomo-s", tmp_path, capsys, [])), daemon=True
    )
    worker.start()
    worker.join(120)
    assert not worker.is_alive(), "convhub score waited on a silent Hub"
    status, _, err = result["status"]
    assert_one_line(status, err, tmp_path, f"the Hub at {never_answering_hub}", "did not answer within 1 s")


@pytest.mark.slow
def test_a_duplicate_id_on_the_hub_names_the_repo(hub, tmp_path, capsys):
    """A LongMemEval build of two subsets that share ids: the error names the repo and --subset, never a file of
    the local cache."""
    folder = tmp_path / "lme"
    sample = LongMemEvalBuilder.sample_dir()
    build_source(
        "longmemeval", folder, sample, ["qa", "turns"], 1, subsets=["longmemeval_s", "longmemeval_oracle"]
    )
    push(folder, "org/lme", tmp_path)
    file = write_predictions(tmp_path / "p.jsonl", [])
    argv = ["score", *score_argv("longmemeval", "org/lme", str(file), str(tmp_path / "r.json"))]
    status = main(argv)
    err = capsys.readouterr().err
    assert_one_line(status, err, tmp_path, "org/lme holds the subsets", "--subset")
    assert ".parquet" not in err and "cache" not in err
