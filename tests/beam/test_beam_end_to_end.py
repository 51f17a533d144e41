"""BEAM from its real files to its scores, as a user runs it: the two real chats (``../shared/data/beam/chats/100K``)
built, checked, loaded, mixed with another source and scored with ``convhub score beam`` against the judge double;
the Hub Parquet fixture (``beam_hub_files``: no real Hub file is on this machine) built and exported back.

The scores of the build must be the scorer's own on the same questions read straight from the files: the ``qa``
rows carry every field ``convhub score beam`` reads, unchanged."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from convhub import mix, schema
from convhub.build import build_source, check_source
from convhub.cli.main import main
from convhub.export.exporter import export_source
from tests.beam.beam_hub_files import hub_row, write_hub_file
from tests.support.data_files import shared_data

pytest_plugins = ["tests.support.judge_double"]

RUBRIC_ITEM = re.compile(
    r"- RUBRIC CRITERION \(what to check\): (?P<item>.*?)\n- RESPONSE TO EVALUATE: (?P<response>.*?)\n\n## EVALUATION",
    re.S,
)
SNIPPETS = re.compile(r"First snippet: (?P<first>.*) \n\n {23}Second snippet: (?P<second>.*)\n {20}$", re.S)


def verdict(body: dict[str, Any]) -> str:
    """A deterministic judge: a rubric item scores 1 where the response holds it, 0.5 where it holds its first
    word only, else 0; a response line is the same event as a reference item where they are equal."""
    messages = body["messages"]
    if messages[0]["role"] == "system":
        found = SNIPPETS.search(messages[1]["content"])
        assert found, messages[1]["content"]
        return "YES" if found["first"] == found["second"] else "NO"
    found = RUBRIC_ITEM.search(messages[0]["content"])
    assert found, messages[0]["content"]
    item, response = found["item"], found["response"]
    score = 1.0 if item in response else 0.5 if item.split()[0] in response else 0.0
    return json.dumps({"score": score, "reason": "double"})


@pytest.fixture
def beam_judge(judge, monkeypatch):
    monkeypatch.setattr(judge, "verdict", verdict)
    return judge


@pytest.fixture(scope="module")
def real_chats() -> Path:
    return shared_data("beam", "chats", "100K")


@pytest.fixture(scope="module")
def built(real_chats, tmp_path_factory):
    return build_source("beam", tmp_path_factory.mktemp("e2e") / "beam-unified", str(real_chats), num_proc=1)


def questions_from_files(chats: Path) -> list[dict[str, Any]]:
    """The ``qa`` rows ``convhub score beam`` reads, made straight from each chat's probing_questions.json."""
    rows = []
    for folder in sorted(path for path in chats.iterdir() if path.is_dir()):
        probing = json.loads(
            (folder / "probing_questions" / "probing_questions.json").read_text(encoding="utf-8")
        )
        for ability, listed in probing.items():
            for position, question in enumerate(listed):
                extra = {"probing_question": question, "ability": ability, "position": position}
                rows.append(
                    {
                        "conversation_id": f"100K/{folder.name}",
                        "source": "beam",
                        "subset": "100K",
                        "question_id": f"100K/{folder.name}:{ability}:{position}",
                        "question": question["question"],
                        "category": ability,
                        "extra": json.dumps(extra, ensure_ascii=False),
                    }
                )
    return rows


def predictions_for(rows: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Answers that score differently: every rubric item, the first words of each, or only the first item;
    an ordering answered with its items in reverse order (tau below 1), one line left out for some."""
    predictions = []
    for index, row in enumerate(rows):
        rubric = json.loads(row["extra"])["probing_question"]["rubric"]
        if row["category"] == "event_ordering":
            lines = list(reversed(rubric)) if index % 2 else rubric[1:] + rubric[:1]
        else:
            lines = [rubric, [item.split()[0] for item in rubric], rubric[:1]][index % 3]
        predictions.append({"question_id": row["question_id"], "prediction": "\n".join(lines)})
    return predictions


def score(data: Path, predictions: Path, output: Path, judge) -> dict[str, Any]:
    argv = ["score", "beam", "--data", str(data), "--predictions", str(predictions), "--output", str(output)]
    assert main([*argv, "--judge-url", judge.url, "--judge-model", "m"]) == 0
    return json.loads(output.read_text(encoding="utf-8"))


def write_qa_build(folder: Path, rows: list[dict[str, Any]]) -> Path:
    """The minimum of a build ``convhub score`` reads: a card listing ``qa`` and its Parquet file."""
    (folder / "qa").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), folder / "qa" / "test-00000-of-00001.parquet")
    card = (
        "---\nconfigs:\n- config_name: qa\n  data_files:\n  - split: test\n    path: qa/test-*\n---\n# BEAM\n"
    )
    (folder / "README.md").write_text(card, encoding="utf-8")
    return folder


@pytest.mark.slow
def test_the_build_scores_as_the_questions_read_straight_from_the_files(
    built, real_chats, beam_judge, tmp_path
):
    direct = questions_from_files(real_chats)
    answers = tmp_path / "predictions.jsonl"
    answers.write_text("".join(json.dumps(p) + "\n" for p in predictions_for(direct)), encoding="utf-8")
    from_build = score(built.output, answers, tmp_path / "build-report.json", beam_judge)
    from_files = score(
        write_qa_build(tmp_path / "direct", direct), answers, tmp_path / "direct.json", beam_judge
    )
    assert from_build["questions"] == from_files["questions"] == 40 and from_build["missing"] == 0
    for key in ("question_scores", "by_conversation", "by_scale", "by_category"):
        assert from_build[key] == from_files[key], key
    figures = from_build["by_scale"]["100K"]["by_ability"]
    assert (
        len(figures) == 10 and len({round(value, 9) for value in figures.values()}) > 2
    )  # figures that differ
    assert 0 < figures["event_ordering"] < 1  # tau_norm of reversed and rotated orderings


def test_the_build_checks_loads_and_mixes_with_another_source_without_a_cast(built, real_chats, tmp_path):
    notes, statistics = check_source("beam", str(real_chats))
    assert statistics.sorted() == built.statistics.sorted() and notes.items() <= built.notes.items()
    turns = datasets.load_dataset(str(built.output), "turns", split="test")
    chat = json.loads((real_chats / "1" / "chat.json").read_text(encoding="utf-8"))
    messages = [m for batch in chat for exchange in batch["turns"] for m in exchange]
    ours = [row for row in turns if row["conversation_id"] == "100K/1"]
    assert [(row["turn_id"], row["text"]) for row in ours] == [(str(m["id"]), m["content"]) for m in messages]
    locomo = build_source("locomo", tmp_path / "locomo-unified", str(locomo_sample()), num_proc=1)
    for config, features in (("qa", schema.QA_FEATURES), ("messages", schema.MESSAGES_FEATURES)):
        recipe = tmp_path / f"{config}.yaml"
        recipe.write_text(
            f"config: {config}\nsplit: test\nsources:\n  - path: {built.output}\n  - path: {locomo.output}\n",
            encoding="utf-8",
        )
        mixed = mix.mixture(recipe)
        assert mixed.features == features
        assert set(mixed["source"]) == {"beam", "locomo"}


def locomo_sample() -> str:
    from convhub.builders.locomo.builder import LocomoBuilder

    return LocomoBuilder.sample_dir()


def test_a_hub_layout_build_exports_back_to_the_hub_layout(real_chats, tmp_path):
    """The real chats as a ``Mohammadta/BEAM`` Parquet file: built, exported, the same file's rows again."""
    rows = [hub_row(real_chats / "1"), hub_row(real_chats / "2")]
    given = write_hub_file(tmp_path / "hub" / "data" / "100K-00000-of-00001.parquet", rows)
    result = build_source("beam", tmp_path / "out", str(tmp_path / "hub"), num_proc=1)
    export_source("beam", result.output, tmp_path / "export")
    made = pq.read_table(tmp_path / "export" / "data" / "100K-00000-of-00001.parquet")
    assert made.schema == pq.read_table(given).schema and made.to_pylist() == pq.read_table(given).to_pylist()
