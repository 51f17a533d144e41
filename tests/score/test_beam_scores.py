"""``convhub score beam`` end to end: a small BEAM build, a scripted judge on 127.0.0.1, and every figure
checked against values computed by hand from BEAM's rules (``docs/scoring.md``, "BEAM").

The build is the minimum ``convhub score`` reads: a card listing the ``qa`` config and one Parquet file of the
rows h-beam-source's BEAM source writes (``conversation_id`` "<scale>/<n>", ``subset`` the scale,
``category`` the ability, ``extra`` the JSON text holding ``probing_question``). The judge double answers a
rubric prompt by its rubric item and an equivalence prompt by its (reference item, line) pair, from the
tables below; every other pair is "NO".
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.score.score_helpers import run_score, score_argv, write_predictions
from tests.support.data_files import shared_data

pytest_plugins = ["tests.support.judge_double"]

ITEM = re.compile(
    r"- RUBRIC CRITERION \(what to check\): (?P<item>.*?)\n- RESPONSE TO EVALUATE: (?P<response>.*?)\n\n## EVALUATION",
    re.S,
)
SNIPPETS = re.compile(r"^First snippet: (?P<first>.*) \n\n {23}Second snippet: (?P<second>.*)\n {20}$", re.S)

#: rubric item → the judge's reply (each a rule of BEAM's reading of it)
RUBRIC_REPLIES = {
    "A1": '{"score": 1.0, "reason": "ok"}',
    "A2": '```json\n{"score": 0.5, "reason": "partial"}\n```',  # fenced; int(0.5) counts 0
    "A3": 'Here it is: {"score": 1, "reason": "fine"} and more',  # the first {...}
    "B1": '{"score": 0.5, "reason": "half"}',  # counts 0
    "B2": '{"score": 1, "reason": "no closing brace"',  # json_repair
    "B3": '  {"score": 1.0}  ',
    "C1": '{"score": 0.9}',  # int(0.9) is 0
    "C2": '{"score": true}',  # int(True) is 1
    "E1": '{"score": 0.5}',  # event ordering adds the float
    "E2": '{"score": "1.0", "reason": "a string"}',  # float("1.0")
    "E3": '{"score": 0}',
    "F1": '{"score": 1.0}',
    "F2": '{"score": 1.0}',
}
#: (reference item, response line) → the judge's reply; any other pair is answered "NO"
SAME_EVENT = {
    ("E2", "L1"): "YES",
    ("E1", "L2"): "Yes.",
    ("E2", "L3"): "YES",  # never asked: E2 is taken by then (the first unused match wins)
    ("E3", "L3"): "yes",
    ("F1", "M2"): "YES",
    ("F2", "M3"): "NO, though the eyes differ",  # "yes" anywhere in the reply: a match, as in BEAM
}


def beam_verdict(body: dict[str, Any]) -> str:
    """The judge's reply to one of BEAM's requests, from the tables above."""
    messages = body["messages"]
    if messages[0]["role"] == "system":
        found = SNIPPETS.match(messages[1]["content"])
        assert found, messages[1]["content"]
        same = found["first"] == found["second"]  # the real data's test: a line that is the item
        return SAME_EVENT.get((found["first"], found["second"]), "YES" if same else "NO")
    found = ITEM.search(messages[0]["content"])
    held = found["item"] in found["response"]
    return RUBRIC_REPLIES.get(found["item"], '{"score": 1.0, "reason": "held"}' if held else '{"score": 0}')


@pytest.fixture
def beam_judge(judge, monkeypatch):
    """The judge double of the other score tests, answering BEAM's requests."""
    monkeypatch.setattr(judge, "verdict", beam_verdict)
    return judge


def question(conversation: str, number: int, ability: str, rubric: list[str]) -> dict[str, Any]:
    probing = {"question": f"Q{number}?", "difficulty": "easy", "rubric": rubric, "answer": "gold"}
    return {
        "conversation_id": conversation,
        "source": "beam",
        "subset": conversation.split("/")[0],
        "question_id": f"{conversation}:{ability}:{number}",
        "question": probing["question"],
        "category": ability,
        "extra": json.dumps({"probing_question": probing, "ability": ability, "position": number}),
    }


QUESTIONS = [
    question("100K/1", 0, "abstention", ["A1", "A2"]),
    question("100K/1", 1, "abstention", ["A3"]),
    question("100K/1", 0, "event_ordering", ["E1", "E2", "E3"]),
    question("100K/2", 0, "event_ordering", ["F1", "F2"]),
    question("100K/2", 0, "abstention", ["B1", "B2", "B3"]),
    question("500K/1", 0, "abstention", ["X1"]),  # not predicted
    question("500K/1", 0, "information_extraction", ["C1", "C2"]),
    question("500K/1", 0, "event_ordering", ["X2"]),  # not predicted
]
PREDICTIONS = {
    "100K/1:abstention:0": "first answer",
    "100K/1:abstention:1": "second answer",
    "100K/1:event_ordering:0": "L1\n\nL2\nL3",  # a blank line is a line
    "100K/2:event_ordering:0": "M1\nM2\nM3\nM4",
    "100K/2:abstention:0": "third answer",
    "500K/1:information_extraction:0": "fourth answer",
}


def write_build(folder: Path, rows: list[dict[str, Any]]) -> Path:
    """The minimum of a build ``convhub score`` reads: the card's config list and the ``qa`` Parquet file."""
    (folder / "qa").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), folder / "qa" / "test-00000-of-00001.parquet")
    (folder / "README.md").write_text(
        "---\nconfigs:\n- config_name: qa\n  data_files:\n  - split: test\n    path: qa/test-*\n---\n# BEAM\n",
        encoding="utf-8",
    )
    return folder


def score(tmp_path, judge, capsys, rows=QUESTIONS, predictions=PREDICTIONS, *options):
    data = write_build(tmp_path / "build", rows) if not (tmp_path / "build").exists() else tmp_path / "build"
    answers = write_predictions(
        tmp_path / "p.jsonl",
        [{"question_id": key, "prediction": value} for key, value in predictions.items()],
    )
    output = tmp_path / "report.json"
    argv = score_argv("beam", data, answers, output, "--judge-url", judge.url, "--judge-model", "m", *options)
    status, out, err = run_score(argv, capsys)
    report = json.loads(output.read_text(encoding="utf-8")) if status == 0 else None
    return status, out, err, report


# Hand-computed from BEAM's rules:
# 100K/1 event ordering: lines L1, "", L2, L3 align to E2, "", E1, E3 (L3 skips the taken E2): tp 3, fp 1,
#   fn 0, so P 3/4, R 1, F1 6/7; ranks over [E1, E2, E3, ""] are (1, 2, 3, 5) and (3, 1, 4, 2): 3 concordant,
#   3 discordant pairs, tau 0, tau_norm 1/2.
# 100K/2 event ordering: M1, M2, M3, M4 align to M1, F1, F2, M4: P 1/2, R 1, F1 2/3; ranks over
#   [F1, F2, M1, M4] are (1, 2, 5, 5) and (2, 3, 1, 4): 3 concordant, 2 discordant, one pair tied in the
#   reference only: tau-b = 1 / sqrt(6 * 5).
TAU_NORM_2 = (1 + 1 / math.sqrt(30)) / 2
EXPECTED_QUESTIONS = {
    "100K/1:abstention:0": {"rubric_scores": [1.0, 0.0], "llm_judge_score": 0.5},
    "100K/1:abstention:1": {"rubric_scores": [1.0], "llm_judge_score": 1.0},
    "100K/1:event_ordering:0": {
        "rubric_scores": [0.5, 1.0, 0.0],
        "llm_judge_score": 0.5,
        "precision": 0.75,
        "recall": 1.0,
        "f1": 6 / 7,
        "tau_norm": 0.5,
        "final_score": 3 / 7,
        "aligned_lines": ["E2", "", "E1", "E3"],
    },
    "100K/2:event_ordering:0": {
        "rubric_scores": [1.0, 1.0],
        "llm_judge_score": 1.0,
        "precision": 0.5,
        "recall": 1.0,
        "f1": 2 / 3,
        "tau_norm": TAU_NORM_2,
        "final_score": TAU_NORM_2 * 2 / 3,
        "aligned_lines": ["M1", "F1", "F2", "M4"],
    },
    "100K/2:abstention:0": {"rubric_scores": [0.0, 1.0, 1.0], "llm_judge_score": 2 / 3},
    "500K/1:abstention:0": {"rubric_scores": None, "llm_judge_score": 0.0, "missing": True},
    "500K/1:information_extraction:0": {"rubric_scores": [0.0, 1.0], "llm_judge_score": 0.5},
    "500K/1:event_ordering:0": {
        "rubric_scores": None,
        "llm_judge_score": 0.0,
        "missing": True,
        **dict.fromkeys(("precision", "recall", "f1", "tau_norm", "final_score"), 0.0),
    },
}
EXPECTED_BY_SCALE = {
    "100K": {"abstention": (0.75 + 2 / 3) / 2, "event_ordering": (0.5 + TAU_NORM_2) / 2},
    "500K": {"abstention": 0.0, "event_ordering": 0.0, "information_extraction": 0.5},
}


def close(found: Any, expected: Any) -> bool:
    if isinstance(expected, float):
        return isinstance(found, float) and abs(found - expected) <= 1e-9
    if isinstance(expected, list):
        return isinstance(found, list) and len(found) == len(expected) and all(map(close, found, expected))
    return found == expected


def test_figures_per_question_ability_conversation_and_scale(tmp_path, beam_judge, capsys):
    status, out, err, report = score(tmp_path, beam_judge, capsys)
    assert status == 0, err
    by_id = {record["question_id"]: record for record in report["question_scores"]}
    assert set(by_id) == set(EXPECTED_QUESTIONS)
    for question_id, expected in EXPECTED_QUESTIONS.items():
        for key, value in expected.items():
            assert close(by_id[question_id][key], value), (question_id, key, by_id[question_id][key], value)
        assert by_id[question_id]["missing"] is expected.get("missing", False)
    conversations = report["by_conversation"]
    assert close(conversations["100K/1"]["by_ability"]["abstention"], 0.75)
    assert close(
        conversations["100K/1"]["by_ability"]["event_ordering"], 0.5
    )  # tau_norm, not the judge's 0.5
    assert close(conversations["100K/2"]["by_ability"]["event_ordering"], TAU_NORM_2)
    assert conversations["500K/1"]["scale"] == "500K"
    for scale, figures in EXPECTED_BY_SCALE.items():
        assert report["by_scale"][scale]["by_ability"].keys() == figures.keys()
        for ability, value in figures.items():
            assert close(report["by_scale"][scale]["by_ability"][ability], value), (scale, ability)
            assert close(report["by_category"][ability]["by_scale"][scale], value)
    assert report["by_scale"]["100K"]["conversations"] == 2
    assert (report["by_scale"]["500K"]["count"], report["by_scale"]["500K"]["missing"]) == (3, 2)
    ordering = report["by_category"]["event_ordering"]
    assert (
        ordering["metric"] == "tau_norm"
        and report["by_category"]["abstention"]["metric"] == "llm_judge_score"
    )
    assert (ordering["count"], ordering["missing"]) == (3, 1)
    assert close(ordering["also"]["llm_judge_score"]["100K"], 0.75)
    assert close(ordering["also"]["f1"]["100K"], (6 / 7 + 2 / 3) / 2)
    assert close(ordering["also"]["final_score"]["500K"], 0.0)
    assert "abstention" in out and "event_ordering" in out and "BEAM figure by scale" in out


def test_report_fields_and_the_judge_section(tmp_path, beam_judge, capsys):
    status, _, err, report = score(tmp_path, beam_judge, capsys)
    assert status == 0, err
    assert (report["benchmark"], report["questions"], report["predicted"], report["missing"]) == (
        "beam",
        8,
        6,
        2,
    )
    assert report["overall"] == {"count": 8, "missing": 2}
    rubric_requests = 2 + 1 + 3 + 2 + 3 + 2  # the answered questions' rubric items
    equivalence_requests = (
        6 + 2 + 2
    )  # 100K/1: (E1,L1) (E2,L1) (E1,"") (E3,"") (E1,L2) (E3,L3); 100K/2: M1 x2, M2, M3
    assert len(beam_judge.requests) == rubric_requests + equivalence_requests == report["judge"]["calls"]
    sent_items = [
        ITEM.search(b["messages"][0]["content"])["item"]
        for b in beam_judge.requests
        if len(b["messages"]) == 1
    ]
    assert "X1" not in sent_items and "X2" not in sent_items  # a missing answer is never sent
    assert ("E2", "L3") not in {
        tuple(SNIPPETS.match(b["messages"][1]["content"]).group("first", "second"))
        for b in beam_judge.requests
        if len(b["messages"]) == 2
    }
    judge = report["judge"]
    assert judge["model"] == "m" and judge["runs"] == 1 and judge["agreement"] == 1.0
    assert judge["prompt_version"].startswith("BEAM src/prompts.py@3e12035532eb85768f1a7cd779832b650c4b2ef9")
    assert judge["prompts"]["event_ordering"] == "unified_llm_judge_base_prompt, llm_equivalence"
    assert judge["prompts"]["abstention"] == "unified_llm_judge_base_prompt"
    assert all(
        request["temperature"] == 0.0 and "max_tokens" not in request for request in beam_judge.requests
    )


def test_a_second_score_asks_nothing(tmp_path, beam_judge, capsys):
    first = score(tmp_path, beam_judge, capsys)[3]
    asked = len(beam_judge.requests)
    second = score(tmp_path, beam_judge, capsys)[3]
    assert len(beam_judge.requests) == asked
    assert second["judge"]["calls"] == 0 and second["judge"]["cached"] == asked
    assert second["by_scale"] == first["by_scale"] and second["question_scores"] == first["question_scores"]


def test_runs_take_the_lower_median_and_report_agreement(tmp_path, beam_judge, capsys):
    status, _, err, report = score(tmp_path, beam_judge, capsys, QUESTIONS, PREDICTIONS, "--judge-runs", "3")
    assert status == 0, err
    assert report["judge"]["runs"] == 3 and report["judge"]["agreement"] == 1.0  # the double is deterministic
    assert close(report["by_scale"]["100K"]["by_ability"]["event_ordering"], (0.5 + TAU_NORM_2) / 2)


def test_a_reply_without_a_score_ends_the_run_in_one_line(tmp_path, beam_judge, capsys):
    RUBRIC_REPLIES["C1"] = "I cannot judge this."
    try:
        status, _, err, _ = score(tmp_path, beam_judge, capsys)
    finally:
        RUBRIC_REPLIES["C1"] = '{"score": 0.9}'
    assert status == 1
    assert err.count("\n") == 1 and "500K/1:information_extraction:0" in err and "rubric item 1" in err
    assert not (tmp_path / "report.json").exists()


def test_a_single_item_ordering_has_beams_undefined_tau(tmp_path, beam_judge, capsys):
    """One rubric item matched by a one-line response: a union of one item, tau undefined (NaN in BEAM's code,
    null in the report), and the scale's figure too."""
    rows = [question("100K/9", 0, "event_ordering", ["F1"])]
    SAME_EVENT[("F1", "only line")] = "yes"
    try:
        status, _, err, report = score(
            tmp_path, beam_judge, capsys, rows, {"100K/9:event_ordering:0": "only line"}
        )
    finally:
        del SAME_EVENT[("F1", "only line")]
    assert status == 0, err
    record = report["question_scores"][0]
    assert (record["f1"], record["tau_norm"], record["final_score"]) == (1.0, None, None)
    assert report["by_scale"]["100K"]["by_ability"]["event_ordering"] is None


def test_no_judge_is_a_usage_error(tmp_path, capsys):
    data = write_build(tmp_path / "build", QUESTIONS)
    answers = write_predictions(tmp_path / "p.jsonl", [])
    status, _, err = run_score(score_argv("beam", data, answers, tmp_path / "r.json"), capsys)
    assert status == 2 and "beam answers are scored by an LLM judge" in err


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (json.dumps({"ability": "abstention"}), "no 'probing_question' object"),
        (
            json.dumps({"probing_question": {"rubric": []}}),
            "probing_question.rubric: expected a non-empty list",
        ),
        (json.dumps({"probing_question": {"rubric": ["ok", 3]}}), "probing_question.rubric"),
        (None, "field 'category': 'memory' is none of BEAM's abilities"),
    ],
)
def test_a_question_beam_cannot_score_is_one_line(tmp_path, beam_judge, capsys, extra, says):
    rows = [{**QUESTIONS[0], "extra": extra} if extra else {**QUESTIONS[0], "category": "memory"}]
    status, _, err, _ = score(tmp_path, beam_judge, capsys, rows, {})
    assert status == 1 and says in err and "100K/1:abstention:0" in err and err.count("\n") == 1


def test_the_real_conversations_questions(tmp_path, beam_judge, capsys):
    """The two real BEAM conversations' probing questions, as the BEAM source's ``qa`` rows carry them, each
    answered with its rubric items one per line; the judge scores an item 1.0 when the response holds it and
    calls a line the same event as an item when they are equal: every figure is 1.0, every rubric item is
    asked once and each event-ordering line once."""
    rows, predictions = [], {}
    for number in (1, 2):
        path = shared_data(
            "beam", "chats", "100K", str(number), "probing_questions", "probing_questions.json"
        )
        for ability, questions in json.loads(path.read_text(encoding="utf-8")).items():
            for position, probing in enumerate(questions):
                question_id = f"100K/{number}:{ability}:{position}"
                rows.append(
                    {
                        "conversation_id": f"100K/{number}",
                        "source": "beam",
                        "subset": "100K",
                        "question_id": question_id,
                        "question": probing["question"],
                        "category": ability,
                        "extra": json.dumps(
                            {"probing_question": probing, "ability": ability, "position": position},
                            ensure_ascii=False,
                        ),
                    }
                )
                predictions[question_id] = "\n".join(probing["rubric"])
    status, _, err, report = score(tmp_path, beam_judge, capsys, rows, predictions)
    assert status == 0, err
    assert report["questions"] == 40 and report["by_scale"]["100K"]["conversations"] == 2
    assert len(report["by_scale"]["100K"]["by_ability"]) == 10
    assert all(value == 1.0 for value in report["by_scale"]["100K"]["by_ability"].values())
    items = sum(len(json.loads(row["extra"])["probing_question"]["rubric"]) for row in rows)
    lines = sum(
        len(json.loads(row["extra"])["probing_question"]["rubric"])
        for row in rows
        if row["category"] == "event_ordering"
    )
    assert report["judge"]["calls"] == items + lines


def test_one_mean_for_every_benchmark():
    """BEAM's means are the shared one (``score.inputs.mean``, None over no value), not a twin of its own."""
    from convhub.score import beam, inputs

    assert "_mean" not in vars(beam) and beam.mean is inputs.mean
    assert beam._by_scale({"c": {"scale": "100K", "by_ability": {"a": 1.0}}}) == {"100K": {"a": 1.0}}
