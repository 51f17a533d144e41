"""ConvLab-3 unified datasets: every quirk of SOURCES.md on the project's sample, real files, exact rebuild."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import zipfile
from pathlib import Path

import datasets
import pytest

from convhub.builders.convlab import export
from convhub.builders.convlab.builder import ConvLabBuilder, DataInput, find_inputs
from convhub.cli import main as cli
from convhub.engine.build import build_source, check_source
from convhub.errors import Notes, SourceError
from tests.convlab.convlab_samples import SAMPLE, index_dialogues, sample_dialogues, turn_extra
from tests.support.data_files import shared_data

REAL_DATASETS = ConvLabBuilder.DEFAULT_SUBSETS


def records_by_id(data_dir, subsets=None) -> tuple[dict[str, dict], dict[str, str], Notes]:
    builder = ConvLabBuilder(data_dir=str(data_dir), subsets=subsets)
    notes = Notes()
    records, splits = {}, {}
    for split, record in builder.iter_records(notes):
        records[record["conversation_id"]] = record
        splits[record["conversation_id"]] = split
    return records, splits, notes


@pytest.fixture(scope="module")
def sample_records():
    return records_by_id(SAMPLE)


@pytest.fixture(scope="module")
def sample_build(tmp_path_factory):
    return build_source("convlab", tmp_path_factory.mktemp("convlab") / "out", data_dir=str(SAMPLE))


# -- the sample: every quirk of SOURCES.md -----------------------------------------------------


def test_sample_covers_both_layouts():
    kinds = {source.name: source.kind for source in find_inputs(str(SAMPLE), None)}
    assert kinds == {"toychat": "folder", "toyhotel": "zip"}


def test_goal_missing_or_present(sample_records):
    records, _, notes = sample_records
    with_goal = json.loads(records["toyhotel-train-0"]["extra"])
    assert with_goal["goal"]["inform"] == {"hotel": {"price range": "cheap", "parking": "yes"}}
    assert "goal" not in json.loads(records["toyhotel-train-1"]["extra"])
    assert "goal" not in json.loads(records["toychat-train-0"]["extra"])
    assert notes["dialogue without goal"] == 4


def test_extra_dialogue_and_turn_keys_are_kept(sample_records):
    records, _, _ = sample_records
    multi = json.loads(records["toyhotel-train-1"]["extra"])
    assert multi["type"] == "multi-domain" and multi["original_id"] == 17  # integer id type kept
    assert set(multi) >= {"user_state_init", "user_state_final", "domains"}
    chat = json.loads(records["toychat-train-0"]["extra"])
    assert chat["topic"] == "weekend" and chat["persona"]["user"] == ["I like hiking."]
    assert json.loads(records["toyhotel-train-0"]["extra"])["finished"] is True
    keys = set()
    for record in records.values():
        for turn in record["sessions"][0]["turns"]:
            keys |= set(turn_extra(turn))
    expected = {"emotion", "booked", "active_intent", "requested_slots", "service_call", "db_results"}
    expected |= {
        "user_state",
        "db_query",
        "candidates",
        "checked_sentence",
        "checked_passage",
        "concepts",
        "tripleset",
    }
    assert expected <= keys


def test_dialogue_acts_missing_on_a_turn_and_on_every_turn_of_a_dataset(sample_records):
    records, _, notes = sample_records
    silent = records["toyhotel-train-1"]["sessions"][0]["turns"][1]
    assert silent["dialogue_acts"] == [] and turn_extra(silent)["dialogue_acts_absent"] is True
    chat_turns = [t for r in records.values() if r["subset"] == "toychat" for t in r["sessions"][0]["turns"]]
    assert chat_turns and all(turn_extra(t)["dialogue_acts_absent"] for t in chat_turns)
    assert notes["turn without dialogue_acts (extra.dialogue_acts_absent)"] == 1 + len(chat_turns)
    two_kinds = records["toyhotel-train-1"]["sessions"][0]["turns"][2]
    assert turn_extra(two_kinds)["dialogue_acts_kinds"] == ["categorical", "non-categorical"]


def test_three_act_kinds_spans_and_empty_binary(sample_records):
    records, _, _ = sample_records
    turns = records["toyhotel-train-0"]["sessions"][0]["turns"]
    first = turns[0]
    assert [(a["type"], a["slot"], a["value"]) for a in first["dialogue_acts"]] == [
        ("categorical", "price range", "cheap"),
        ("categorical", "parking", "yes"),
        ("non-categorical", "area", "north"),
    ]
    span = first["dialogue_acts"][2]
    assert first["text"][span["start"] : span["end"]] == "north"
    assert first["dialogue_acts"][0]["start"] is None  # categorical: no span
    binary = [a for a in turns[1]["dialogue_acts"] if a["type"] == "binary"]
    reqmore = {key: binary[1][key] for key in ("intent", "domain", "slot", "value")}
    assert reqmore == {"intent": "reqmore", "domain": "", "slot": "", "value": None}
    no_span = turns[3]["dialogue_acts"][0]
    assert no_span["type"] == "non-categorical" and no_span["value"] == "01223 000001"
    assert no_span["start"] is None and no_span["end"] is None


def test_state_keeps_empty_dontcare_and_absent_slots_apart(sample_records):
    records, _, notes = sample_records
    full = {
        (s["domain"], s["slot"]): s["value"]
        for s in records["toyhotel-test-0"]["sessions"][0]["turns"][0]["state"]
    }
    assert full[("hotel", "price range")] == "dontcare"
    assert full[("hotel", "name")] == "" and full[("attraction", "area")] == ""
    filled_turn = records["toyhotel-train-1"]["sessions"][0]["turns"][1]
    assert filled_turn["state"] == [
        {"domain": "attraction", "slot": "area", "value": "centre"}
    ]  # absent slots unlisted
    assert turn_extra(filled_turn)["state_empty_domains"] == ["weather"]
    empty_state = records["toyhotel-validation-0"]["sessions"][0]["turns"][0]
    assert empty_state["state"] == [] and turn_extra(empty_state)["state_empty_domains"] == []
    system_turn = records["toyhotel-train-0"]["sessions"][0]["turns"][1]
    assert system_turn["state"] == [] and "state_empty_domains" not in turn_extra(system_turn)
    assert notes["empty domain dict in a state (kept in extra.state_empty_domains)"] == 2


def test_speaker_order_single_turn_and_empty_utterance(sample_records):
    records, _, notes = sample_records
    turns = records["toyhotel-train-1"]["sessions"][0]["turns"]
    assert (turns[0]["speaker"], turns[0]["role"]) == ("system", "assistant")
    assert (turns[-1]["speaker"], turns[-1]["role"]) == ("user", "user")
    assert turns[1]["text"] == ""
    assert len(records["toyhotel-validation-0"]["sessions"][0]["turns"]) == 1
    assert notes["empty utterance"] == 1 and notes["dialogue with a single turn"] == 2
    assert records["toyhotel-train-1"]["speakers"] == ["system", "user"]
    assert records["toychat-train-0"]["language"] == "en"


def test_every_sample_dialogue_rebuilds_exactly(sample_records):
    records, splits, _ = sample_records
    for name in ("toyhotel", "toychat"):
        for dialogue in sample_dialogues(name):
            record = records[dialogue["dialogue_id"]]
            assert splits[dialogue["dialogue_id"]] == dialogue["data_split"]
            assert export.dialogue_from_record(record, dialogue["data_split"]) == dialogue


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (b'{"a": 1}', "expected a JSON list"),
        (b'[{"dialogue_id": "a", "data_split": "train"} {"x": 1}]', "expected ','"),
        (
            b'[{"dialogue_id": "a", "data_split": "train"}, {"dialogue_id": "a", "data_split": "test"}]',
            "duplicate",
        ),
        (b'[{"dialogue_id": "a", "data_split": "train"', "not valid JSON"),
        (b'[{"dialogue_id": "a", "data_split": "tr ain"}]', "not a usable split name"),
        (b'[{"dialogue_id": "a", "data_split": "train\\n"}]', "not a usable split name"),
        (b"[1]", "expected a dialogue object"),
    ],
)
def test_bad_dialogues_file_names_file_and_record(text, problem):
    with pytest.raises(SourceError, match=problem) as error:
        index_dialogues(io.BytesIO(text), "bad/dialogues.json")
    assert "bad/dialogues.json" in str(error.value)


def test_unknown_speaker_names_the_turn(tmp_path):
    data = tmp_path / "broken" / "data"
    data.mkdir(parents=True)
    dialogue = {"dataset": "broken", "data_split": "train", "dialogue_id": "broken-train-0", "domains": []}
    dialogue["turns"] = [{"speaker": "wizard", "utterance": "hi", "utt_idx": 0}]
    (data / "dialogues.json").write_text(json.dumps([dialogue]))
    with pytest.raises(SourceError, match=r"broken-train-0 turn 0.*'speaker'.*neither"):
        check_source("convlab", str(tmp_path))


def test_missing_subset_is_an_error_not_a_download(tmp_path):
    (tmp_path / "woz").mkdir()
    with pytest.raises(FileNotFoundError, match="no ConvLab dataset camrest"):
        find_inputs(str(tmp_path), ("camrest",))
    with pytest.raises(FileNotFoundError, match="no ConvLab dataset in"):
        find_inputs(str(tmp_path), None)


# -- the build ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_per_subset_configs_load_one_dataset_alone(sample_build):
    output = str(sample_build.output)
    everything = datasets.load_dataset(output, "sessions")
    alone = datasets.load_dataset(output, "sessions-toychat")
    assert set(alone) == {"train", "test"}  # toychat has no validation split
    assert set(alone["train"]["subset"]) == {"toychat"}
    assert set(everything["train"]["subset"]) == {"toychat", "toyhotel"}
    for view in ("turns", "messages", "dialogues"):
        for subset in ("toychat", "toyhotel"):
            part = datasets.load_dataset(output, f"{view}-{subset}")
            whole = datasets.load_dataset(output, view)
            for split in part:
                assert part[split].features == whole[split].features
                assert part[split].num_rows == sum(s == subset for s in whole[split]["subset"])
    card = (sample_build.output / "README.md").read_text()
    assert "config_name: turns-toyhotel" in card and "`database-toyhotel`" in card
    assert "qa" not in sample_build.configs  # ConvLab has no questions


def test_built_sessions_rebuild_the_source_dialogues(sample_build):
    loaded = datasets.load_dataset(str(sample_build.output), "sessions")
    rebuilt = {}
    for split, rows in loaded.items():
        for row in rows:
            rebuilt[row["conversation_id"]] = export.dialogue_from_record(row, split)
    for name in ("toyhotel", "toychat"):
        for dialogue in sample_dialogues(name):
            assert rebuilt[dialogue["dialogue_id"]] == dialogue


def test_dialogues_view_types_goal_domains_and_db_results(sample_build):
    rows = {
        r["conversation_id"]: r for r in datasets.load_dataset(str(sample_build.output), "dialogues")["train"]
    }
    first = rows["toyhotel-train-0"]
    assert first["original_id"] == "PMUL0001.json" and first["domains"] == ["hotel", "general"]
    assert first["goal"]["request"] == [{"domain": "hotel", "slot": "phone", "value": ""}]
    assert [
        (r["turn_id"], r["domain"], r["rank"], json.loads(r["entity"])["name"]) for r in first["db_results"]
    ] == [
        ("1", "hotel", 0, "Lark House"),
        ("1", "hotel", 1, "Acorn Lodge"),
    ]
    assert rows["toyhotel-train-1"]["goal"] is None and rows["toyhotel-train-1"]["original_id"] == "17"


def test_ontology_config_is_typed_and_rebuilds_exactly(sample_build):
    rows = {r["subset"]: r for r in datasets.load_dataset(str(sample_build.output), "ontology")["train"]}
    hotel = rows["toyhotel"]
    area = next(
        s for d in hotel["domains"] if d["name"] == "hotel" for s in d["slots"] if s["name"] == "area"
    )
    assert area["is_categorical"] is True and area["possible_values"] == ["north", "east", "centre"]
    reqmore = next(a for a in hotel["dialogue_acts"] if a["intent"] == "reqmore")
    assert (reqmore["type"], reqmore["domain"], reqmore["user"], reqmore["system"]) == (
        "binary",
        "",
        False,
        True,
    )
    with zipfile.ZipFile(SAMPLE / "toyhotel" / "data.zip") as archive:
        source = json.loads(archive.read("data/ontology.json"))
    assert export.ontology_from_row(hotel) == source  # the empty "weather" domain of the state included


def test_database_config(sample_build):
    rows = datasets.load_dataset(str(sample_build.output), "database")["train"]
    by_file = {}
    for row in rows:
        by_file.setdefault(row["file"], []).append(row)
    assert {row["domain"] for row in by_file["hotel_db.json"]} == {"hotel"}
    assert json.loads(by_file["hotel_db.json"][0]["entity"])["stars"] == 4
    pair = by_file["attraction_db.json"][1]
    assert (
        pair["domain"] == "attraction"
        and pair["entity_index"] == 1
        and json.loads(pair["entity"])[0] == "Kettle's Yard"
    )
    assert set(rows["subset"]) == {"toyhotel"}


def test_check_cli_on_the_sample(capsys):
    assert cli.main(["check", "convlab", "--sample"]) == 0
    out = capsys.readouterr().out
    assert "convlab: OK" in out and "toyhotel" in out and "empty utterance" in out


def test_num_proc_build_gives_the_same_rows(tmp_path, sample_build):
    other = build_source("convlab", tmp_path / "np", data_dir=str(SAMPLE), configs=["sessions"], num_proc=2)
    for split, info in other.configs["sessions"].splits.items():
        assert info.num_examples == sample_build.configs["sessions"].splits[split].num_examples


# -- real files --------------------------------------------------------------------------------


def dummy_folder(tmp_path) -> Path:
    """The 16 real dummy_data.json, each as <name>/dummy_data.json (symlinks: nothing copied)."""
    root = tmp_path / "dummies"
    for name in REAL_DATASETS:
        (root / name).mkdir(parents=True)
        os.symlink(shared_data("convlab", name, "dummy_data.json"), root / name / "dummy_data.json")
    return root


def test_the_16_real_dummy_files_parse_and_rebuild(tmp_path):
    root = dummy_folder(tmp_path)
    records, splits, notes = records_by_id(root)
    assert len(records) == 10 * len(REAL_DATASETS)
    assert notes["subset read from dummy_data.json (its first dialogues only, no ontology or database)"] == 16
    for name in REAL_DATASETS:
        for dialogue in json.loads((root / name / "dummy_data.json").read_text(encoding="utf-8")):
            record = records[dialogue["dialogue_id"]]
            assert export.dialogue_from_record(record, splits[dialogue["dialogue_id"]]) == dialogue
    assert {r["language"] for r in records.values() if r["subset"] == "crosswoz"} == {"zh"}
    assert all(
        turn_extra(t)["dialogue_acts_absent"]
        for r in records.values()
        if r["subset"] == "metalwoz"
        for t in r["sessions"][0]["turns"]
    )


def readme_table(name: str) -> dict[str, tuple[int, int, float]]:
    """split → (dialogues, utterances, avg_utt) from the dataset README's "Data Splits" table."""
    rows = {}
    for line in shared_data("convlab", name, "README.md").read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) > 4 and cells[0] in ("train", "validation", "test", "all"):
            rows[cells[0]] = (int(cells[1]), int(cells[2]), float(cells[3]))
    return rows


@pytest.fixture(scope="module")
def real_build(tmp_path_factory):
    data_dir = shared_data("convlab")
    shared_data("convlab", "camrest", "data.zip")
    return build_source(
        "convlab", tmp_path_factory.mktemp("real") / "out", data_dir=str(data_dir), subsets=["camrest", "woz"]
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", ["camrest", "woz"])
def test_full_builds_match_the_readme_tables(real_build, name):
    table = readme_table(name)
    assert set(table) == {"train", "validation", "test", "all"}
    stats = {split: s for (split, subset), s in real_build.statistics.sorted() if subset == name}
    for split, (dialogues, utterances, avg_utt) in table.items():
        if split == "all":
            dialogues_built = sum(s.conversations for s in stats.values())
            turns_built = sum(s.turns for s in stats.values())
        else:
            dialogues_built, turns_built = stats[split].conversations, stats[split].turns
        assert (dialogues_built, turns_built) == (dialogues, utterances), split
        assert round(turns_built / dialogues_built, 2) == avg_utt, split
    loaded = datasets.load_dataset(str(real_build.output), f"sessions-{name}")
    assert {split: rows.num_rows for split, rows in loaded.items()} == {
        split: row[0] for split, row in table.items() if split != "all"
    }
    turns = datasets.load_dataset(str(real_build.output), f"turns-{name}")
    assert sum(rows.num_rows for rows in turns.values()) == table["all"][1]


@pytest.mark.slow
def test_real_ontology_and_database(real_build):
    ontology = {r["subset"]: r for r in datasets.load_dataset(str(real_build.output), "ontology")["train"]}
    assert set(ontology) == {"camrest", "woz"}
    with zipfile.ZipFile(shared_data("convlab", "woz", "data.zip")) as archive:
        source = json.loads(archive.read("data/ontology.json"))
    woz = ontology["woz"]
    woz["extra"] = None if woz["extra"] is None else json.dumps(woz["extra"])
    assert export.ontology_from_row(woz) == source
    database = datasets.load_dataset(str(real_build.output), "database-camrest")["train"]
    assert database.num_rows == 110 and set(database["domain"]) == {"restaurant"}
    assert set(database["file"]) == {"CamRestDB.json"}
    assert "database-woz" not in (real_build.output / "README.md").read_text()  # WOZ ships no database


@pytest.mark.slow
def test_real_zip_dialogues_rebuild_exactly():
    records, _, _ = records_by_id(shared_data("convlab"), ("camrest", "woz"))
    for name in ("camrest", "woz"):
        source = DataInput(name, "zip", str(shared_data("convlab", name, "data.zip")), inner="data/")
        for dialogue in source.read_json("dialogues.json"):
            assert (
                export.dialogue_from_record(records[dialogue["dialogue_id"]], dialogue["data_split"])
                == dialogue
            )


@pytest.mark.slow
def test_card_statistics_per_subset_and_split(real_build):
    card = (real_build.output / "README.md").read_text()
    assert re.search(r"\| train \| camrest \| 406 \| 406 \| 3,342 \| 0 \| 8\.23 \|", card)
    assert re.search(r"\| test \| woz \| 400 \| 400 \| 2,892 \| 0 \| 7\.23 \|", card)


@pytest.mark.parametrize("name", ["x[1]", "a*", "what?"])
def test_a_dataset_folder_whose_name_is_a_data_files_pattern_is_refused_by_name(tmp_path, name):
    """``x[1]`` would load ``x1``'s files and ``a*`` every folder's: refused before any work, not merged."""
    sample = Path(ConvLabBuilder.sample_dir()) / "toychat"
    shutil.copytree(sample, tmp_path / "data" / name)
    shutil.copytree(sample, tmp_path / "data" / "x1")
    with pytest.raises(SourceError, match="rename the folder") as caught:
        build_source("convlab", tmp_path / "out", data_dir=str(tmp_path / "data"))
    assert name in str(caught.value)
    assert not (tmp_path / "out").exists()
