"""``convhub score`` end to end on builds made by ``convhub build``: the report it writes, and its one-line
errors (exit 2 for options, 1 for data)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.score.score_helpers import build, qa_rows, run_score, write_predictions
from tests.support.data_files import shared_data

#: the fixtures locomo_sample, gigamemory_sample and judge
pytest_plugins = ["tests.score.score_fixtures"]


def gold_predictions(rows: list[dict], retrieved: str | None = None) -> list[dict]:
    """Each question answered with its gold as LoCoMo compares it: category 3's cut at its first ';' (the
    whole of "Likely yes; she enjoys pottery" scores below 1 against "Likely yes"), category 5 LoCoMo's
    refusal phrase."""
    predictions = []
    for row in rows:
        answer = row["answer"]
        if row["category_id"] == 3:
            answer = answer.split(";")[0].strip()
        if row["category_id"] == 5:
            answer = "Not mentioned in the conversation"
        prediction = {"question_id": row["question_id"], "prediction": answer}
        if retrieved:
            prediction["retrieved"] = row[retrieved]
        predictions.append(prediction)
    return predictions


def score_locomo(data: Path, predictions: list[dict], tmp_path: Path, capsys, *options: str) -> dict:
    file = write_predictions(tmp_path / "predictions.jsonl", predictions)
    report = tmp_path / "report.json"
    status, out, err = run_score(
        ["locomo", "--data", str(data), "--predictions", str(file), "--output", str(report), *options], capsys
    )
    assert (status, err) == (0, "")
    assert "overall without adversarial" in out
    return json.loads(report.read_text())


def test_locomo_sample_gold_answers_score_one(locomo_sample, tmp_path, capsys):
    rows = qa_rows(locomo_sample)
    report = score_locomo(locomo_sample, gold_predictions(rows, "evidence_turn_ids"), tmp_path, capsys)
    assert report["questions"] == len(rows) == 13 and report["missing"] == 0
    for name in ("Multi-hop", "Temporal", "Open-domain", "Single-hop"):
        assert report["by_category"][name]["f1"] == 1.0, name
    assert report["by_category"]["Adversarial"]["f1"] == 1.0
    assert report["overall_without_adversarial"]["count"] == 10
    assert sum(figures["count"] for figures in report["by_category"].values()) == 13
    # raw evidence: of single-hop's 5, only qa10 and conv-s2:qa0 hold plain ids ('D:1:3', 'D2:04', 'D' never
    # match) → 2/5; normalized: qa8's only evidence 'D' has no id, so it adds nothing → 4/5
    assert report["evidence"] == "raw"
    assert report["by_category"]["Single-hop"]["evidence_recall"] == pytest.approx(0.4)
    normalized = score_locomo(
        locomo_sample,
        gold_predictions(rows, "evidence_turn_ids"),
        tmp_path,
        capsys,
        "--evidence",
        "normalized",
    )
    assert normalized["evidence"] == "normalized"
    assert normalized["by_category"]["Single-hop"]["evidence_recall"] == pytest.approx(0.8)
    # multi-hop: 'D2:2; D2:3' and 'D1:1 D1:4 D2:1' are whole strings (raw 0), their ids all retrieved (1)
    assert report["by_category"]["Multi-hop"]["evidence_recall"] == 0
    assert normalized["by_category"]["Multi-hop"]["evidence_recall"] == 1.0
    assert report["data_hash"] == normalized["data_hash"] and report["data_hash"].startswith("sha256:")


def test_locomo_sample_wrong_and_missing_answers(locomo_sample, tmp_path, capsys):
    rows = qa_rows(locomo_sample)
    predictions = gold_predictions(rows)
    by_id = {item["question_id"]: item for item in predictions}
    by_id["conv-s1:qa2"]["prediction"] = "a large red bowl"  # gold 'a small blue bowl': bowl shared, P=R=1/3
    by_id["conv-s1:qa6"]["prediction"] = "Miso"  # adversarial, no refusal → 0
    del by_id["conv-s1:qa4"]  # single-hop, missing → 0
    report = score_locomo(locomo_sample, list(by_id.values()), tmp_path, capsys)
    single = report["by_category"]["Single-hop"]
    assert (single["count"], single["missing"]) == (5, 1)
    assert single["f1"] == pytest.approx((0.333 + 0 + 1 + 1 + 1) / 5)
    assert report["by_category"]["Adversarial"]["f1"] == pytest.approx(2 / 3)
    assert report["missing"] == 1 and report["predicted"] == 12
    assert "evidence_recall" not in report["overall"]  # no prediction ranked anything


@pytest.mark.slow
def test_locomo_real_file(tmp_path_factory, tmp_path, capsys):
    data = build("locomo", tmp_path_factory.mktemp("real") / "locomo", shared_data("locomo"))
    capsys.readouterr()  # the build's progress bars
    rows = qa_rows(data)
    predictions = gold_predictions(rows, "evidence_turn_ids")
    wrong = [item for item in predictions if item["question_id"].endswith(":qa0")]
    for item in wrong:
        item["prediction"] = "zzz"
    report = score_locomo(data, predictions, tmp_path, capsys)
    assert report["questions"] == len(rows)
    wrong_by_category: dict[int, int] = {}
    for row in rows:
        if row["question_id"].endswith(":qa0"):
            wrong_by_category[row["category_id"]] = wrong_by_category.get(row["category_id"], 0) + 1
    for figures in report["by_category"].values():
        count, wrong_here = figures["count"], wrong_by_category.get(figures["category_id"], 0)
        # gold answers score 1 in every category (5: the refusal phrase), "zzz" 0
        assert figures["f1"] == pytest.approx((count - wrong_here) / count), figures["category"]
    # normalized evidence, every evidence id retrieved: the recall a category reaches is its share of
    # questions that have resolvable evidence
    normalized = score_locomo(data, predictions, tmp_path, capsys, "--evidence", "normalized")
    for figures in normalized["by_category"].values():
        with_evidence = sum(
            1 for row in rows if row["category_id"] == figures["category_id"] and row["evidence_turn_ids"]
        )
        assert figures["evidence_recall"] == pytest.approx(with_evidence / figures["count"])
    assert (
        report["by_category"]["Multi-hop"]["evidence_recall"]
        < normalized["by_category"]["Multi-hop"]["evidence_recall"]
    )


def test_gigamemory_through_the_judge(gigamemory_sample, tmp_path, capsys, judge, monkeypatch):
    rows = qa_rows(gigamemory_sample)
    predictions = [
        {"question_id": row["question_id"], "prediction": f"Ответ: {row['answer']}"} for row in rows
    ]
    predictions[0]["prediction"] = "Не знаю"  # fact_equal_session, wrong
    del predictions[-1]  # missing: never sent to the judge
    file = write_predictions(tmp_path / "p.jsonl", predictions)
    monkeypatch.setenv("JUDGE_KEY", "sk-secret-judge-key")
    status, _, err = run_score(
        [
            "gigamemory",
            "--data",
            str(gigamemory_sample),
            "--predictions",
            str(file),
            "--output",
            str(tmp_path / "r.json"),
            "--judge-url",
            judge.url,
            "--judge-model",
            "m1",
            "--judge-key-env",
            "JUDGE_KEY",
        ],
        capsys,
    )
    assert (status, err) == (0, "")
    report = json.loads((tmp_path / "r.json").read_text())
    assert len(judge.requests) == len(rows) - 1 == report["judge"]["calls"]
    assert {h["Authorization"] for h in judge.headers} == {"Bearer sk-secret-judge-key"}
    assert report["judge"]["model"] == "m1" and "evaluate_qa.py" in report["judge"]["prompt_version"]
    assert report["judge"]["prompts"]["no_info"] == "abstention"
    categories = [row["category"] for row in rows]
    assert report["by_category"]["fact_equal_session"]["count"] == categories.count("fact_equal_session")
    # fact_equal_session: one wrong of its questions; the last row (missing) counts 0 in its own type
    expected = (len(rows) - 2) / len(rows)
    assert report["overall"]["accuracy"] == pytest.approx(expected)
    assert report["overall"]["missing"] == 1


def test_errors_are_one_line(locomo_sample, gigamemory_sample, tmp_path, capsys, judge):
    def run(benchmark: str, data: Path, lines: str, *options: str) -> tuple[int, str]:
        file = tmp_path / "p.jsonl"
        file.write_text(lines, encoding="utf-8")
        status, _, err = run_score(
            [
                benchmark,
                "--data",
                str(data),
                "--predictions",
                str(file),
                "--output",
                str(tmp_path / "r.json"),
                *options,
            ],
            capsys,
        )
        assert err.count("\n") == 1 and err.startswith("convhub score: error: "), err
        return status, err

    good = '{"question_id": "conv-s1:qa0", "prediction": "2022"}\n'
    status, err = run("locomo", locomo_sample, good + '{"question_id": "nope", "prediction": "x"}\n')
    assert status == 1 and "p.jsonl line 2, field 'question_id': 'nope' is not a question" in err
    status, err = run("locomo", locomo_sample, good + "{not json\n")
    assert status == 1 and "p.jsonl line 2: not JSON Lines" in err
    status, err = run("locomo", locomo_sample, good + good)
    assert (
        status == 1
        and "line 2, field 'question_id': 'conv-s1:qa0' is predicted twice (first on line 1)" in err
    )
    status, err = run("locomo", locomo_sample, '{"question_id": "conv-s1:qa0", "prediction": 2022}\n')
    assert status == 1 and "line 1, field 'prediction': expected a string, got int" in err
    status, err = run("longmemeval", locomo_sample, good)
    assert status == 1 and "holds 'locomo' questions, not 'longmemeval' ones" in err
    status, err = run("gigamemory", gigamemory_sample, good)
    assert status == 2 and "give --judge-url and --judge-model" in err
    status, err = run("locomo", tmp_path / "absent", good)
    assert status == 1 and "absent" in err
    assert not (tmp_path / "r.json").exists()
    judge.fail_with = 500
    status, err = run(
        "gigamemory",
        gigamemory_sample,
        '{"question_id": "1", "prediction": "Ольга"}\n',
        "--judge-url",
        judge.url,
        "--judge-model",
        "m",
        "--judge-retries",
        "0",
    )
    assert status == 1 and "HTTP 500" in err
