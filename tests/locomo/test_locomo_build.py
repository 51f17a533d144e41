"""LoCoMo built from the packaged sample (``builders/locomo/sample/locomo_sample.json``): the configs, the card, the
command line, ``--data-dir`` and bad input that leaves no output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path

import datasets
import pytest
import yaml
from huggingface_hub import DatasetCard

from convhub.builders.locomo.builder import LocomoBuilder
from convhub.cli import main as cli
from convhub.engine.build import build_source, check_source
from convhub.errors import SourceError
from convhub.storage.staging import MARKER
from tests.locomo.locomo_samples import ALL_CONFIGS, ROOT, SAMPLE, extra, load, split_sample, tiny_sample

# -- the packaged sample -----------------------------------------------------------------------------------


def test_sample_exercises_every_quirk():
    notes, statistics = check_source("locomo", str(SAMPLE))
    total = statistics.total()
    assert (total.conversations, total.sessions, total.turns, total.questions) == (2, 3, 13, 13)
    assert notes == {
        "turn key 're-download' (undocumented) kept in the turn's extra": 3,
        "QA evidence id rewritten (leading zero, stray colon or spaces)": 2,
        "QA evidence string holding several ids, split": 2,
        "adversarial question without answer (answer null)": 2,
        "image caption or query without img_url (url null)": 2,
        "int answer → string (raw kept in extra.answer)": 2,
        "QA evidence empty": 1,
        "QA evidence id that names no turn (moved to unresolved_evidence)": 1,
        "QA evidence string with no turn id (kept in unresolved_evidence)": 1,
        "adversarial question with both answer and adversarial_answer (both kept)": 1,
        "observation evidence string holding several ids, split": 1,
        "session date with no session body (kept in the conversation's extra)": 1,
    }
    raw = json.loads(SAMPLE.read_text(encoding="utf-8"))
    questions = [qa["question"] for qa in raw[0]["qa"]]
    assert len(questions) > len(set(questions))  # a repeated question
    observation_evidence = [
        pair[1]
        for sample in raw
        for entry in sample["observation"].values()
        for pairs in entry.values()
        for pair in pairs
    ]
    assert {type(evidence) for evidence in observation_evidence} == {str, list}
    assert any(isinstance(evidence, str) and "," in evidence for evidence in observation_evidence)
    assert SAMPLE.stat().st_size < 8_000


@pytest.fixture(scope="module")
def sample_build(tmp_path_factory):
    output = tmp_path_factory.mktemp("locomo-sample") / "locomo-unified"
    return build_source("locomo", output, data_dir=str(SAMPLE))


def test_sample_build_qa_rows(sample_build):
    qa = {row["question_id"]: row for row in load(sample_build, "qa")}
    assert qa["conv-s1:qa0"]["answer"] == "2022"
    assert extra(qa["conv-s1:qa0"]["extra"]) == {"evidence": ["D1:4"], "answer": 2022}
    assert qa["conv-s1:qa1"]["answer"] == "3"
    assert qa["conv-s1:qa1"]["evidence_turn_ids"] == ["D2:2", "D2:3"]
    assert qa["conv-s1:qa2"]["evidence_turn_ids"] == ["D1:3"]
    assert qa["conv-s1:qa4"]["evidence_turn_ids"] == ["D2:4"]
    assert (qa["conv-s1:qa6"]["answer"], qa["conv-s1:qa6"]["adversarial_answer"]) == (None, "Miso")
    assert (qa["conv-s1:qa7"]["answer"], qa["conv-s1:qa7"]["adversarial_answer"]) == ("No", "Yes")
    assert qa["conv-s1:qa8"]["unresolved_evidence"] == ["D"]
    assert qa["conv-s1:qa9"]["unresolved_evidence"] == ["D2:19"]
    assert Counter(row["category"] for row in qa.values()) == {
        "single-hop": 5,
        "adversarial": 3,
        "multi-hop": 2,
        "temporal": 2,
        "open-domain": 1,
    }


def test_sample_build_turn_images(sample_build):
    turns = {(row["conversation_id"], row["turn_id"]): row for row in load(sample_build, "turns")}
    with_all = turns[("conv-s1", "D1:3")]
    assert with_all["images"] == [
        {
            "url": "https://example.com/photos/blue-bowl.jpg",
            "caption": "a photo of a blue ceramic bowl on a wooden table",
            "query": "handmade blue bowl",
        }
    ]
    assert with_all["text"] == "A small blue bowl, here it is."
    assert turns[("conv-s1", "D1:5")]["images"][0]["url"] is None
    assert extra(turns[("conv-s1", "D2:5")]["extra"]) == {"re-download": True}
    assert turns[("conv-s1", "D2:4")]["images"][0]["query"] is None
    roles = Counter(
        (row["speaker"], row["role"]) for row in turns.values() if row["conversation_id"] == "conv-s1"
    )
    assert roles == {("Priya", "user"): 5, ("Tomas", "assistant"): 5}


def test_sample_build_sessions_keep_dates_without_body(sample_build):
    sessions = {row["conversation_id"]: row for row in load(sample_build, "sessions")}
    first = sessions["conv-s1"]
    assert [session["session_id"] for session in first["sessions"]] == ["session_1", "session_2"]
    assert extra(first["extra"]) == {"conversation": {"session_3_date_time": "2:15 pm on 9 June, 2023"}}
    assert first["sessions"][1]["summary"].startswith("On 21 April 2023 Tomas tells Priya")
    assert first["sessions"][1]["timestamp"] == datetime(2023, 4, 21, 19, 30)


def test_sample_build_observations_config(sample_build):
    rows = load(sample_build, "observations")
    assert rows.num_rows == 5
    tomas = [row for row in rows if row["speaker"] == "Tomas" and row["session_id"] == "session_2"]
    assert [(row["evidence_turn_ids"], extra(row["evidence"])) for row in tomas] == [
        (["D2:1", "D2:3"], "D2:1, D2:3")
    ]
    as_list = [row for row in rows if row["conversation_id"] == "conv-s2"]
    assert [(row["evidence_turn_ids"], extra(row["evidence"])) for row in as_list] == [
        (["D1:1", "D1:3"], ["D1:1", "D1:3"])
    ]


def test_sample_build_events_config(sample_build):
    rows = load(sample_build, "events")
    assert [
        (row["conversation_id"], row["session_id"], row["speaker"], row["event"], row["date"]) for row in rows
    ] == [
        (
            "conv-s1",
            "session_1",
            "Priya",
            "Priya finishes a pottery class and makes a blue bowl.",
            "3 March, 2023",
        ),
        ("conv-s1", "session_2", "Priya", "Priya adopts an orange cat named Miso.", "21 April, 2023"),
        ("conv-s1", "session_2", "Tomas", "Tomas plays his first gig at a cafe.", "21 April, 2023"),
        ("conv-s1", "session_2", "Tomas", "Tomas buys a cat toy for Miso.", "21 April, 2023"),
        ("conv-s2", "session_1", "Ada", "Ada accepts a job at a research lab in Lisbon.", "2 May, 2023"),
    ]


# -- the card ----------------------------------------------------------------------------------------------


def test_card_round_trips_and_lists_every_config(sample_build):
    path = sample_build.output / "README.md"
    card = DatasetCard.load(path)
    text = path.read_text(encoding="utf-8")
    assert yaml.safe_load(text.split("---\n")[1]) == card.data.to_dict()
    assert str(card) == DatasetCard(str(card)).content  # load → save → load is stable
    data = card.data.to_dict()
    assert data["license"] == "cc-by-nc-4.0"
    assert data["pretty_name"] == "LoCoMo (convhub unified)"
    assert data["language"] == ["en"]
    assert data["size_categories"] == ["n<1K"]
    assert {"question-answering", "text-generation"} <= set(data["task_categories"])
    assert "locomo" in data["tags"]
    configs = {config["config_name"]: config for config in data["configs"]}
    assert set(configs) == set(ALL_CONFIGS)
    assert [name for name, config in configs.items() if config.get("default")] == ["sessions"]
    for name, config in configs.items():
        assert config["data_files"] == [{"split": "test", "path": f"{name}/test-*"}]
    infos = {info["config_name"]: info for info in data["dataset_info"]}
    assert infos["qa"]["splits"] == [
        {"name": "test", "num_bytes": infos["qa"]["splits"][0]["num_bytes"], "num_examples": 13}
    ]


def test_card_body_has_categories_normalizations_roles_citation(sample_build):
    body = DatasetCard.load(sample_build.output / "README.md").text
    for line in [
        "| 1 | multi-hop | 2 |",
        "| 2 | temporal | 2 |",
        "| 3 | open-domain | 1 |",
        "| 4 | single-hop | 5 |",
        "| 5 | adversarial | 3 |",
        "| int answer → string (raw kept in extra.answer) | 2 |",
        "| QA evidence id that names no turn (moved to unresolved_evidence) | 1 |",
        "| observation evidence string holding several ids, split | 1 |",
        "| speaker_a | `user` |",
        "| test | locomo_sample | 2 | 3 | 13 | 13 |",
    ]:
        assert line in body, line
    for name, count in sample_build.notes.items():
        assert f"| {name} | {count:,} |" in body
    assert "1 single-hop" in body and "3 multi-hop" in body  # the format document's other naming
    assert "@inproceedings{maharana2024locomo," in body
    assert 'load_dataset("ORG/locomo-unified", "observations")' in body
    assert "## License" in body and "`cc-by-nc-4.0`" in body


# -- the command line --------------------------------------------------------------------------------------


def test_convhub_check_prints_statistics_and_normalizations(capsys):
    assert cli.main(["check", "locomo", "--data-dir", str(SAMPLE)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("locomo: OK\n")
    assert "| test | locomo_sample | 2 | 3 | 13 | 13 |" in out
    assert "       2  int answer → string (raw kept in extra.answer)" in out
    assert "       1  session date with no session body (kept in the conversation's extra)" in out


def test_convhub_check_reports_bad_input(tmp_path, capsys):
    (tmp_path / "broken.json").write_text('[{"sample_id": "conv-x"', encoding="utf-8")
    assert cli.main(["check", "locomo", "--data-dir", str(tmp_path)]) == 1
    assert (
        "broken.json, record 0: not valid JSON: Expecting ',' delimiter at byte 23" in capsys.readouterr().err
    )


def test_convhub_check_names_both_files_of_a_sample_id_they_share(tmp_path):
    data_dir = split_sample(tmp_path / "data")
    first = json.loads((data_dir / "part_a.json").read_text(encoding="utf-8"))
    (data_dir / "part_c.json").write_text(json.dumps(first), encoding="utf-8")
    with pytest.raises(SourceError) as caught:
        check_source("locomo", str(data_dir))
    assert str(caught.value) == (
        f"{data_dir / 'part_c.json'}, record conv-s1, field 'sample_id': "
        f"duplicate sample_id 'conv-s1', also in {data_dir / 'part_a.json'}"
    )


@pytest.mark.slow
def test_convhub_build_all_sample(tmp_path, capsys):
    from convhub import registry

    assert cli.main(["build", "--all", "--sample", "--output", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for name in registry.names():
        hub_name = registry.get(name).HUB_NAME
        assert (tmp_path / hub_name / "README.md").is_file()
        assert f"{name}: {tmp_path / hub_name}" in out
    locomo = tmp_path / LocomoBuilder.HUB_NAME
    assert sorted(path.name for path in locomo.iterdir()) == sorted([*ALL_CONFIGS, "README.md", MARKER])
    assert load_folder(locomo, "qa").num_rows == 13


def load_folder(folder: Path, config: str) -> datasets.Dataset:
    return datasets.load_dataset(str(folder), config, split="test")


def test_convhub_build_config_subset(tmp_path):
    output = tmp_path / "locomo-unified"
    argv = ["build", "locomo", "--data-dir", str(SAMPLE), "--output", str(output), "--config", "qa"]
    assert cli.main([*argv, "--config", "events"]) == 0
    assert sorted(path.name for path in output.iterdir()) == [MARKER, "README.md", "events", "qa"]
    card = DatasetCard.load(output / "README.md").data.to_dict()
    assert sorted(config["config_name"] for config in card["configs"]) == ["events", "qa"]
    assert load_folder(output, "events").num_rows == 5
    assert load_folder(output, "qa").num_rows == 13


def rows_of(folder: Path, config: str) -> list[dict]:
    return load_folder(folder, config).to_list()


@pytest.mark.slow
def test_num_proc_two_gives_the_same_rows(tmp_path):
    data_dir = split_sample(tmp_path / "data")
    serial, parallel = tmp_path / "serial", tmp_path / "parallel"
    assert cli.main(["build", "locomo", "--data-dir", str(data_dir), "--output", str(serial)]) == 0
    argv = ["build", "locomo", "--data-dir", str(data_dir), "--output", str(parallel), "--num-proc", "2"]
    assert cli.main(argv) == 0
    for config in ALL_CONFIGS:
        assert rows_of(parallel, config) == rows_of(serial, config), config
    sessions = rows_of(parallel, "sessions")
    assert [(row["conversation_id"], row["subset"]) for row in sessions] == [
        ("conv-s1", "part_a"),
        ("conv-s2", "part_b"),
    ]


def test_subset_option_keeps_one_file(tmp_path, capsys):
    data_dir = split_sample(tmp_path / "data")
    assert cli.main(["check", "locomo", "--data-dir", str(data_dir), "--subset", "part_b"]) == 0
    assert "| test | part_b | 1 | 1 | 3 | 2 |" in capsys.readouterr().out
    assert cli.main(["check", "locomo", "--data-dir", str(data_dir), "--subset", "part_c"]) == 1
    assert "part_c" in capsys.readouterr().err


def test_sessions_rows_are_written_50_a_batch(tmp_path):
    """A sessions row is a whole conversation: the writer holds 50 at a time (the benchmark's peak-memory
    target), the other configs datasets' default batch, and an explicit ``writer_batch_size`` wins."""

    def batch_rows(config: str, **options) -> int | None:
        builder = LocomoBuilder(config_name=config, data_dir=str(SAMPLE), cache_dir=str(tmp_path), **options)
        return builder._writer_batch_size

    assert batch_rows("sessions") == 50
    assert batch_rows("turns") == batch_rows("observations") == LocomoBuilder.DEFAULT_WRITER_BATCH_SIZE
    assert batch_rows("sessions", writer_batch_size=7) == 7


@pytest.mark.parametrize("num_proc", [1, 2])
def test_the_first_duplicate_across_files_names_both_files_whatever_the_workers(tmp_path, num_proc):
    """Three files over two workers: [a, b] and [c]. The error is the first repeat in file order (c's
    second sample repeats b's), not whichever a worker meets first, and the build leaves nothing. One process
    sees both files and names them; across workers the build's own conversation_id check names both subsets
    (a file's stem) and rows."""
    data_dir = split_sample(tmp_path / "data")
    first = json.loads((data_dir / "part_a.json").read_text(encoding="utf-8"))[0]
    second = json.loads((data_dir / "part_b.json").read_text(encoding="utf-8"))[0]
    third = {**first, "sample_id": "conv-s9"}
    (data_dir / "part_c.json").write_text(json.dumps([third, second, first]), encoding="utf-8")
    out = tmp_path / "out"
    with pytest.raises(SourceError) as caught:
        build_source("locomo", out / "locomo-unified", data_dir=str(data_dir), num_proc=num_proc)
    one_process = (
        f"{data_dir / 'part_c.json'}, record conv-s2, field 'sample_id': "
        f"duplicate sample_id 'conv-s2', also in {data_dir / 'part_b.json'}"
    )
    workers = (
        "sessions/test-00001-of-00002.parquet, record row 1 (subset 'part_c'), field 'conversation_id': "
        "duplicate conversation_id 'conv-s2', also in sessions/test-00000-of-00002.parquet row 1 (subset 'part_b')"
    )
    assert str(caught.value) == (one_process if num_proc == 1 else workers)
    assert list(out.iterdir()) == []


# -- bad input: an error naming file, record and field, and no output ----------------------------------------


def bad_files(kind: str) -> dict[str, str]:
    sample = json.loads(SAMPLE.read_text(encoding="utf-8"))
    if kind == "invalid json":
        return {"bad.json": json.dumps(sample)[:-5]}
    if kind == "missing field":
        del sample[1]["conversation"]["session_1"][2]["dia_id"]
    elif kind == "wrong type":
        sample[0]["qa"][3]["category"] = "1"
    elif kind == "duplicate sample_id":
        sample[1]["sample_id"] = "conv-s1"
    elif kind == "duplicate across files":
        return {"a.json": json.dumps(sample[:1]), "bad.json": json.dumps(sample)}
    return {"bad.json": json.dumps(sample)}


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("invalid json", "bad.json, record 1: not valid JSON: Unterminated string starting at byte"),
        ("missing field", "bad.json, record conv-s2, field 'conversation.session_1[2].dia_id': missing"),
        ("wrong type", "bad.json, record conv-s1, field 'qa[3].category': expected int, got str"),
        ("duplicate sample_id", "bad.json, record conv-s1, field 'sample_id': duplicate sample_id 'conv-s1'"),
        (
            "duplicate across files",
            "bad.json, record conv-s1, field 'sample_id': duplicate sample_id 'conv-s1'",
        ),
    ],
)
def test_bad_input_raises_source_error_and_leaves_no_output(tmp_path, kind, message):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    for name, text in bad_files(kind).items():
        (data_dir / name).write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    with pytest.raises(SourceError) as caught:
        build_source("locomo", out / "locomo-unified", data_dir=str(data_dir))
    assert message in str(caught.value)
    assert str(data_dir / "bad.json") in str(caught.value)
    assert list(out.iterdir()) == []  # neither the output folder nor a staging folder


def test_bad_input_through_the_command(tmp_path, capsys):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "bad.json").write_text(bad_files("wrong type")["bad.json"], encoding="utf-8")
    assert (
        cli.main(["build", "locomo", "--data-dir", str(data_dir), "--output", str(tmp_path / "out" / "x")])
        == 1
    )
    assert "field 'qa[3].category': expected int, got str" in capsys.readouterr().err
    assert list((tmp_path / "out").iterdir()) == []


# -- scripts/build.py --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_build_script_runs_from_a_checkout(tmp_path):
    output = tmp_path / "locomo-unified"
    command = [sys.executable, str(ROOT / "scripts" / "build.py"), "locomo", "--data-dir", str(SAMPLE)]
    env = {**os.environ, "PYTHONPATH": ""}
    done = subprocess.run(
        [*command, "--output", str(output), "--config", "qa"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert f"locomo: {output}" in done.stdout
    assert load_folder(output, "qa").num_rows == 13


def _samples_text(count: int) -> str:
    return json.dumps([tiny_sample(f"conv-{i}") for i in range(count)], indent=2)


@pytest.mark.parametrize(
    ("edit", "lost"),
    [
        (lambda text: text.replace("},\n  {", "}\n  {", 1), []),  # a missing comma costs no sample
        (lambda text: text.replace('"sample_id": "conv-2"', '"sample_id": "conv-2" ~~~'), [2]),
    ],
    ids=["missing comma", "broken sample"],
)
def test_with_skip_a_break_in_the_list_loses_only_the_samples_it_holds(tmp_path, edit, lost):
    """As ConvLab's scan does: reading goes on at the next sample, and the quarantine keeps the bytes skipped
    (before, every sample after the break was lost with the rest of the file)."""
    text = edit(_samples_text(5))
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "f.json").write_text(text, encoding="utf-8")
    result = build_source(
        "locomo", tmp_path / "out", str(tmp_path / "in"), ["sessions"], on_bad_record="skip"
    )
    [sessions] = datasets.load_dataset(str(tmp_path / "out"), "sessions").values()
    assert sessions["conversation_id"] == [f"conv-{i}" for i in range(5) if i not in lost]
    [entry] = [json.loads(line) for line in result.quarantine.read_text(encoding="utf-8").splitlines()]
    assert entry["scope"] == "span" and entry["records"] == len(lost)
    assert entry["raw"] in text and ("~~~" in entry["raw"]) == bool(lost)
    if lost:
        assert entry["record"] == 2 and '"conv-2"' in entry["raw"] and '"conv-3"' not in entry["raw"]
    with pytest.raises(SourceError, match=r"f\.json, record"):  # without skip, the break is the error
        build_source("locomo", tmp_path / "raised", str(tmp_path / "in"), ["sessions"])
