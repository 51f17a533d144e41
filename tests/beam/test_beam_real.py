"""The two real BEAM chats (``../shared/data/beam``): counts, the strict chat template, the export equal to the
input (JSON files as JSON values, key order and number types included; text files byte for byte)."""

from __future__ import annotations

import json
from collections import Counter

import datasets
import pytest

from convhub.engine.build import build_source
from convhub.export.exporter import export_source
from tests.support.data_files import shared_data


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    data = shared_data("beam")
    return data, build_source("beam", tmp_path_factory.mktemp("beam-real") / "out", str(data), num_proc=1)


def test_two_chats_their_batches_messages_and_forty_questions(real):
    _, built = real
    sessions = datasets.Dataset.from_parquet(str(built.output / "sessions" / "*.parquet"))
    assert sessions["conversation_id"] == ["100K/1", "100K/2"]
    assert [len(row["sessions"]) for row in sessions] == [3, 3]
    turns = [t for row in sessions for s in row["sessions"] for t in s["turns"]]
    assert len(turns) == built.statistics.total().turns == 388
    qa = datasets.Dataset.from_parquet(str(built.output / "qa" / "*.parquet"))
    assert (
        Counter(qa["category"]) == {name: 4 for name in set(qa["category"])}
        and len(set(qa["category"])) == 10
    )
    assert all(row["rubric"] for row in qa)
    assert built.notes["probing question without source_chat_ids"] == 4


def test_the_real_export_equals_the_input(real, tmp_path):
    data, built = real
    export_source("beam", built.output, tmp_path / "export")
    given = sorted(p.relative_to(data) for p in data.rglob("*") if p.is_file())
    out = tmp_path / "export"
    assert (
        sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file() and ".convhub" not in p.parts)
        == given
    )
    for path in given:
        before, after = (data / path).read_bytes(), (out / path).read_bytes()
        if path.suffix == ".json":
            assert json.dumps(json.loads(before)) == json.dumps(json.loads(after)), path
        else:
            assert before == after, path


def test_a_10m_layout_made_from_the_real_chats_builds_each_plan_and_exports_equal(tmp_path):
    """No real 10M chat is here (too large for the repository snapshot): ``chats/10M/1/`` is written from the two
    real chats as BEAM's download script lays out the 10M scale, its probing questions, seed and profile at the
    top and each real chat a ``plan-<k>/`` of its own (with ``new_relationships.json``, ``.pickle`` twins)."""
    real = shared_data("beam", "chats", "100K")
    top = tmp_path / "chats" / "10M" / "1"
    (top / "probing_questions").mkdir(parents=True)
    (top / "probing_questions" / "probing_questions.json").write_bytes(
        (real / "1" / "probing_questions" / "probing_questions.json").read_bytes()
    )
    for name in ("topic.json", "main_spec.txt"):
        (top / name).write_bytes((real / "1" / name).read_bytes())
    (top / "core_relationships.txt").write_bytes((real / "1" / "relationships.txt").read_bytes())
    for plan, chat in enumerate(("1", "2")):
        folder = top / f"plan-{plan}"
        folder.mkdir()
        for name in ("chat.json", "labels.txt", "plan_new.txt", "topic.json", "user_messages.json"):
            (folder / name).write_bytes((real / chat / name).read_bytes())
        relationships = (real / chat / "relationships.txt").read_text(encoding="utf-8")
        (folder / "new_relationships.txt").write_text(relationships, encoding="utf-8")
        (folder / "new_relationships.json").write_text(json.dumps(relationships, indent=4), encoding="utf-8")
        (folder / "plan_new.pickle").write_bytes(b"\x80\x04\x95 not unpickled")
    built = build_source("beam", tmp_path / "out", str(tmp_path / "chats"), num_proc=1)
    sessions = datasets.Dataset.from_parquet(str(built.output / "sessions" / "*.parquet"))
    assert sessions["conversation_id"] == ["10M/1", "10M/1/plan-0", "10M/1/plan-1"]
    assert set(sessions["subset"]) == {"10M"}
    assert [sum(len(s["turns"]) for s in row["sessions"]) for row in sessions] == [
        0,
        188,
        200,
    ]  # the two real chats' messages
    qa = datasets.Dataset.from_parquet(str(built.output / "qa" / "*.parquet"))
    assert len(qa) == 20 and {q.split(":")[0] for q in qa["question_id"]} == {"10M/1"}
    export_source("beam", built.output, tmp_path / "export")
    for path in (p for p in top.rglob("*") if p.is_file()):
        made = tmp_path / "export" / "chats" / path.relative_to(tmp_path / "chats")
        if path.suffix == ".json":
            assert json.dumps(json.loads(path.read_bytes())) == json.dumps(json.loads(made.read_bytes()))
        else:
            assert made.read_bytes() == path.read_bytes()
