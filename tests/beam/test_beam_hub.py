"""BEAM's Hub layout (Parquet), from fixtures written from the two real chats and the packaged sample's 10M chat
(``beam_hub_files``: no real Hub file is on this machine), and the default download through a mirror."""

from __future__ import annotations

import functools
import json
import pprint
import shutil
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import datasets
import pyarrow.parquet as pq
import pytest

from convhub.builders.beam import builder as beam_builder
from convhub.builders.beam.builder import BeamBuilder
from convhub.engine.build import build_source
from convhub.errors import SourceError
from convhub.export.exporter import export_source
from tests.beam.beam_hub_files import flat_chat, hub_row, read, write_hub_file
from tests.support.data_files import shared_data

SAMPLE_CHATS = Path(BeamBuilder.sample_dir()) / "chats"


def rows_of(folder: Path, config: str) -> dict[str, dict]:
    rows = datasets.Dataset.from_parquet(str(folder / config / "*.parquet"))
    key = "question_id" if config == "qa" else "conversation_id"
    return {row[key]: row for row in rows}


def ten_million_row() -> dict:
    """The sample's ``chats/10M/1`` as a ``BEAM-10M`` row: its plans inside it."""
    top, plan = SAMPLE_CHATS / "10M" / "1", SAMPLE_CHATS / "10M" / "1" / "plan-0"
    return {
        "conversation_id": "1",
        "conversation_seed": read(top, "topic.json"),
        "user_profile": {
            "user_info": read(top, "main_spec.txt"),
            "user_relationships": read(top, "core_relationships.txt"),
        },
        "chat": [],
        "probing_questions": repr(read(top, "probing_questions/probing_questions.json")),
        "plans": [
            {
                "chat": flat_chat(plan),
                "conversation_plan": "BATCH 1 PLAN",
                "conversation_seed": read(plan, "topic.json"),
                "narratives": read(plan, "labels.txt"),
                "user_profile": {"user_relationships": read(plan, "new_relationships.json")},
                "user_questions": [],
            }
        ],
    }


@pytest.fixture(scope="module")
def hub_folder(tmp_path_factory) -> Path:
    """``data/100K-00000-of-00001.parquet`` from the two real chats (the second's questions as pretty-printed
    Python text, which ``repr`` would not give back) and ``data/10M-00000-of-00001.parquet`` from the sample."""
    real = shared_data("beam", "chats", "100K")
    folder = tmp_path_factory.mktemp("hub")
    rows = [hub_row(real / "1"), hub_row(real / "2")]
    rows[1]["probing_questions"] = pprint.pformat(
        eval_free(rows[1]["probing_questions"]), width=100, sort_dicts=False
    )
    write_hub_file(folder / "data" / "100K-00000-of-00001.parquet", rows)
    write_hub_file(folder / "data" / "10M-00000-of-00001.parquet", [ten_million_row()])
    return folder


def eval_free(text: str):
    import ast

    return ast.literal_eval(text)


@pytest.fixture(scope="module")
def hub_build(hub_folder, tmp_path_factory):
    return build_source("beam", tmp_path_factory.mktemp("hub-build") / "out", str(hub_folder), num_proc=1)


@pytest.fixture(scope="module")
def repository_build(tmp_path_factory):
    data = shared_data("beam")
    return build_source("beam", tmp_path_factory.mktemp("repo-build") / "out", str(data), num_proc=1)


def test_the_hub_layout_gives_the_chats_of_the_repository_layout(hub_build, repository_build):
    hub, repo = rows_of(hub_build.output, "sessions"), rows_of(repository_build.output, "sessions")
    assert sorted(hub) == ["100K/1", "100K/2", "10M/1", "10M/1/plan-0"]
    for chat_id in ("100K/1", "100K/2"):
        hub_turns = [t for s in hub[chat_id]["sessions"] for t in s["turns"]]
        repo_turns = [t for s in repo[chat_id]["sessions"] for t in s["turns"]]
        assert [(t["turn_id"], t["role"], t["text"]) for t in hub_turns] == [
            (t["turn_id"], t["role"], t["text"]) for t in repo_turns
        ]
        assert [s["session_id"] for s in hub[chat_id]["sessions"]] == [
            s["session_id"] for s in repo[chat_id]["sessions"]
        ]
    extra = json.loads(hub["100K/1"]["extra"])
    assert (extra["layout"], extra["file"], extra["row"]) == ("hub", "data/100K-00000-of-00001.parquet", 0)
    assert extra["columns"]["conversation_seed"]["title"].startswith("Building a Personal Budget Tracker")
    assert "probing_questions_text" not in extra and "probing_questions_text" in json.loads(
        hub["100K/2"]["extra"]
    )
    assert json.loads(hub["10M/1"]["extra"])["plans"] == 1
    assert [t["text"] for s in hub["10M/1/plan-0"]["sessions"] for t in s["turns"]] == [
        "Roses or tulips? ->-> 1,1",
        "Roses.",
    ]


def test_the_hub_questions_are_the_repository_questions(hub_build, repository_build):
    hub, repo = rows_of(hub_build.output, "qa"), rows_of(repository_build.output, "qa")
    assert len(repo) == 40 and set(repo) <= set(hub)
    for question_id, row in repo.items():
        assert {k: v for k, v in hub[question_id].items() if k != "subset"} == {
            k: v for k, v in row.items() if k != "subset"
        }


def test_a_hub_build_exports_to_the_hub_layout(hub_build, hub_folder, tmp_path):
    export_source("beam", hub_build.output, tmp_path / "export")
    for name in ("data/100K-00000-of-00001.parquet", "data/10M-00000-of-00001.parquet"):
        given, made = pq.read_table(hub_folder / name), pq.read_table(tmp_path / "export" / name)
        assert made.schema == given.schema
        assert made.to_pylist() == given.to_pylist()


def test_questions_that_are_no_python_literal_are_named(tmp_path):
    row = hub_row(SAMPLE_CHATS / "100K" / "1")
    row["probing_questions"] = "{'abstention': [__import__('os')]}"
    data = write_hub_file(tmp_path / "100K-0.parquet", [row])
    with pytest.raises(SourceError, match=r"record 100K/1, field 'probing_questions': not a Python literal"):
        build_source("beam", tmp_path / "out", str(data), configs=["sessions"], num_proc=1)
    assert not (tmp_path / "out").exists()


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    served = tmp_path / "served"
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(served))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("CONVHUB_SOURCE_MIRROR", f"http://127.0.0.1:{server.server_port}/copy")
    yield served / "copy"
    server.shutdown()
    server.server_close()


def test_without_data_dir_the_100k_parquet_file_is_downloaded_from_the_mirror(mirror, tmp_path):
    """The default address, under the mirror as ``CONVHUB_SOURCE_MIRROR`` places it (host, then path)."""
    assert beam_builder.URL.startswith("https://huggingface.co/datasets/Mohammadta/BEAM/resolve/")
    path = beam_builder.URL.removeprefix("https://").replace("%2F", "/")
    write_hub_file(mirror / path, [hub_row(SAMPLE_CHATS / "100K" / "1")])
    result = build_source("beam", tmp_path / "out", None, configs=["sessions", "qa"], num_proc=1)
    sessions = rows_of(result.output, "sessions")
    assert list(sessions) == ["100K/1"] and sessions["100K/1"]["subset"] == "100K"
    assert json.loads(sessions["100K/1"]["extra"])["file"] == "100K/0000.parquet"
    assert len(rows_of(result.output, "qa")) == 9
    shutil.rmtree(tmp_path / "out")
