"""ConvLab input built to break the builder (issue #13): a reserved split name, duplicate zip members, a
broken list under ``--on-bad-record skip``, a zip bomb, and source keys named like convhub's bookkeeping."""

from __future__ import annotations

import io
import json
import struct
import time
import tracemalloc
import unicodedata
import warnings
import zipfile
from pathlib import Path

import datasets
import pytest

from convhub.build import build_source
from convhub.cli import main as cli
from convhub.engine.inputs import file_sets
from convhub.engine.readers import json_list
from convhub.export.exporter import export_source
from tests.convlab.convlab_samples import index_dialogues


def dialogue(i: int, split: str = "train", subset: str = "toy") -> dict:
    return {
        "dataset": subset,
        "data_split": split,
        "dialogue_id": f"{subset}-{split}-{i}",
        "turns": [
            {"speaker": "user", "utterance": f"hello {i}", "utt_idx": 0},
            {"speaker": "system", "utterance": "ok", "utt_idx": 1},
        ],
    }


def one_error_line(capsys, command: str) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if line.startswith("convhub ")]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"convhub {command}: error: "), err
    assert "Traceback" not in err
    return lines[0]


def run(command: str, data_dir: Path, tmp_path: Path, *options: str) -> int:
    extra = ["--output", str(tmp_path / "out")] if command == "build" else []
    return cli.main([command, "convlab", "--data-dir", str(data_dir), *options, *extra])


# -- 1. a split named `all` ---------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["build", "check"])
@pytest.mark.parametrize("split", ["all", "ALL"])
def test_a_split_named_all_names_file_dialogue_and_field(command, split, tmp_path, capsys):
    data = tmp_path / "in" / "toy" / "data"
    data.mkdir(parents=True)
    (data / "dialogues.json").write_text(json.dumps([dialogue(0), dialogue(1, split)]), encoding="utf-8")
    assert run(command, tmp_path / "in", tmp_path) != 0
    line = one_error_line(capsys, command)
    assert str(data / "dialogues.json") in line
    assert f"dialogue 'toy-{split}-1'" in line and "field 'data_split'" in line and f"'{split}'" in line
    assert not (tmp_path / "out").exists()


# -- 2. zip members that name one file -----------------------------------------------------------------


def write_zip(path: Path, members: list[tuple[str, bytes]]) -> Path:
    """A zip holding ``members`` in order, duplicate names included (zipfile only warns)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "Duplicate name: ..."
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, data in members:
                archive.writestr(name, data)
    return path


def dialogues_bytes(*numbers: int) -> bytes:
    return json.dumps([dialogue(i) for i in numbers]).encode()


CAFE = "café_db.json"


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("data/dialogues.json", "data/dialogues.json"),
        ("data/dialogues.json", "./data/dialogues.json"),
        ("data/dialogues.json", "data//dialogues.json"),
        ("data/hotel_db.json", "data/Hotel_db.json"),
        (f"data/{unicodedata.normalize('NFC', CAFE)}", f"data/{unicodedata.normalize('NFD', CAFE)}"),
    ],
)
@pytest.mark.parametrize("command", ["build", "check"])
def test_two_zip_members_naming_one_file_are_refused_naming_both(command, first, second, tmp_path, capsys):
    """Before, zipfile's name table kept the last of two equal names and the other was silently lost."""
    members = [("data/dialogues.json", dialogues_bytes(0, 1))] if "dialogues" not in first else []
    members += [(first, dialogues_bytes(0, 1)), (second, dialogues_bytes(2, 3))]
    archive = write_zip(tmp_path / "in" / "toy" / "data.zip", members)
    assert run(command, tmp_path / "in", tmp_path) != 0
    line = one_error_line(capsys, command)
    number = len(members) - 1
    assert str(archive) in line
    assert f"{first!r} (entry {number})" in line and f"{second!r} (entry {number + 1})" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["build", "check"])
def test_two_files_of_an_extracted_data_folder_naming_one_file_are_refused(command, tmp_path, capsys):
    """An extracted data/ folder may hold café_db.json twice (NFC and NFD): an export or a macOS disk keeps one."""
    data = tmp_path / "in" / "toy" / "data"
    data.mkdir(parents=True)
    (data / "dialogues.json").write_bytes(dialogues_bytes(0, 1))
    for form in ("NFC", "NFD"):
        (data / unicodedata.normalize(form, CAFE)).write_text('{"x": [1]}', encoding="utf-8")
    assert run(command, tmp_path / "in", tmp_path) != 0
    line = one_error_line(capsys, command)
    assert "two files of data/ name one file once Unicode form and case are normalized" in line
    assert not (tmp_path / "out").exists()


def test_two_dataset_folders_naming_one_subset_are_refused(tmp_path, capsys):
    for form in ("NFC", "NFD"):
        data = tmp_path / "in" / unicodedata.normalize(form, "café") / "data"
        data.mkdir(parents=True)
        (data / "dialogues.json").write_bytes(dialogues_bytes(0, 1))
    assert run("build", tmp_path / "in", tmp_path) != 0
    assert "two dataset folders name one file" in one_error_line(capsys, "build")


# -- 4. a zip bomb ---------------------------------------------------------------------------------------


def write_bomb(path: Path, spaces: int) -> Path:
    """A data.zip whose dialogues.json is two dialogues with ``spaces`` spaces between them."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with (
        zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive,
        archive.open("data/dialogues.json", "w", force_zip64=True) as member,
    ):
        member.write(b"[" + json.dumps(dialogue(0)).encode() + b",")
        block = b" " * (1 << 22)
        for _ in range(spaces // len(block)):
            member.write(block)
        member.write(json.dumps(dialogue(1)).encode() + b"]")
    return path


@pytest.mark.parametrize("command", ["build", "check"])
def test_a_zip_bomb_is_refused_before_it_is_inflated(command, tmp_path, capsys):
    """200 MB of spaces in a ~1 MB zip: before, the build inflated all of it (a 1 GB one took minutes and
    2.2 GB of memory) and built two dialogues; now the declared size is refused, in bounded memory."""
    archive = write_bomb(tmp_path / "in" / "toy" / "data.zip", 200 << 20)
    assert archive.stat().st_size < (200 << 20) // file_sets.ZIP_MAX_RATIO
    tracemalloc.start()
    try:
        started = time.perf_counter()
        assert run(command, tmp_path / "in", tmp_path) != 0
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    line = one_error_line(capsys, command)
    assert f"{archive}:data/dialogues.json" in line and "zip bomb" in line
    assert peak < 32 << 20, peak  # inflating 200 MB would hold at least a 4 MB chunk and its text
    assert elapsed < 20, elapsed
    assert not (tmp_path / "out").exists()


def test_a_member_that_compresses_less_than_the_limit_still_builds(tmp_path):
    """The limit is on the ratio: ConvLab's own members (5-17x) and small members of any ratio build."""
    raw = json.dumps([dialogue(i) for i in range(50)], indent=2).encode()
    padded = raw[:-1] + b" " * (1 << 20) + b"]"  # 1 MB of spaces: a ratio far past the limit, but small
    write_zip(tmp_path / "in" / "toy" / "data.zip", [("data/dialogues.json", padded)])
    with zipfile.ZipFile(tmp_path / "in" / "toy" / "data.zip") as archive:
        info = archive.getinfo("data/dialogues.json")
        assert info.file_size > file_sets.ZIP_MAX_RATIO * info.compress_size
    assert run("build", tmp_path / "in", tmp_path) == 0


# -- 5. source keys named like convhub's bookkeeping -------------------------------------------------------

SECTIONS = {
    "domains": {"hotel": {"description": "hotels", "slots": {}}},
    "intents": {"inform": {"description": "tell"}},
    "dialogue_acts": {"categorical": [], "non-categorical": [], "binary": []},
    "state": {"hotel": {"area": ""}},
}
ONTOLOGIES = {
    # before: the source list took convhub's own absent-section names and export then dropped "intents"
    "absent_sections_names_a_present_section": {
        "domains": SECTIONS["domains"],
        "intents": SECTIONS["intents"],
        "absent_sections": ["intents"],
    },
    # before: export popped the key as bookkeeping and lost it
    "every_section_and_an_empty_list": {**SECTIONS, "absent_sections": []},
    # before: the build failed with an AttributeError (convhub appended to the source's value)
    "a_number_and_no_section": {"absent_sections": 5},
    "bookkeeping_like_keys": {
        **SECTIONS,
        "absent_sections": {"x": None},
        "extra": [1],
        "subset": "other",
        "dialogue_acts_absent": True,
        "state_empty_domains": ["hotel"],
    },
}


def test_ontology_keys_named_like_convhubs_bookkeeping_round_trip(tmp_path):
    """Every ontology comes back equal through build and export, its ``absent_sections`` key included."""
    for name, ontology in ONTOLOGIES.items():
        data = tmp_path / "in" / name / "data"
        data.mkdir(parents=True)
        (data / "dialogues.json").write_text(json.dumps([dialogue(0, subset=name)]), encoding="utf-8")
        (data / "ontology.json").write_text(json.dumps(ontology), encoding="utf-8")
    build = build_source(
        "convlab", tmp_path / "build", data_dir=str(tmp_path / "in"), configs=["sessions", "ontology"]
    )
    rows = {row["subset"]: row for row in datasets.load_dataset(str(build.output), "ontology")["train"]}
    assert rows["a_number_and_no_section"]["domains"] is None  # absent: a null column, not a key in extra
    assert rows["every_section_and_an_empty_list"]["intents"] == [{"name": "inform", "description": "tell"}]
    exported = export_source("convlab", build.output, tmp_path / "export").output
    for name, ontology in ONTOLOGIES.items():
        rebuilt = json.loads((exported / name / "data" / "ontology.json").read_bytes())
        assert rebuilt == ontology, name
        assert json.dumps(rebuilt, sort_keys=True) == json.dumps(ontology, sort_keys=True)  # types too


# -- 3. a break in the list under --on-bad-record skip -----------------------------------------------------


def starts(text: str) -> list[int]:
    """Where each dialogue of a written list starts (its ``{``)."""
    return [text.rindex("{", 0, text.index(f'"toy-train-{i}"')) for i in range(text.count('"toy-train-'))]


def missing_comma_between(text: str) -> str:
    at = text.rindex(",", 0, starts(text)[41])
    return text[:at] + text[at + 1 :]


def missing_comma_inside_at(text: str, number: int) -> str:
    at = text.index(",", text.rindex("{", 0, text.index(f'"toy-train-{number}"')))  # after "dataset": "toy"
    return text[:at] + text[at + 1 :]


def missing_comma_inside(text: str) -> str:
    return missing_comma_inside_at(text, 40)


def truncated_in_70(text: str) -> str:
    return text[: text.index('"turns"', starts(text)[70])]  # after its dialogue_id


def garbage_and_a_broken_dialogue(text: str) -> str:
    text = missing_comma_inside(text)
    at = starts(text)[11]
    return text[:at] + 'xyz "dialogue_id" ' + text[at:]


#: edit → (the dialogues lost, each break as (a, b): the bytes it skipped are the original file's from dialogue
#: a's start to dialogue b's (or to the end, b None); a == b: only what the edit put between two dialogues)
BREAKS = {
    "missing_comma_between": (missing_comma_between, [], [(41, 41)]),
    "missing_comma_inside": (missing_comma_inside, [40], [(40, 41)]),
    "truncated_in_70": (truncated_in_70, [70], [(70, None)]),
    "garbage_and_a_broken_dialogue": (garbage_and_a_broken_dialogue, [40], [(11, 11), (40, 41)]),
}


@pytest.mark.slow
@pytest.mark.parametrize("indent", [None, 2])
@pytest.mark.parametrize("edit", sorted(BREAKS))
def test_a_break_in_the_list_loses_only_what_it_holds_and_the_quarantine_counts_it(edit, indent, tmp_path):
    """100 dialogues, one break: before, every dialogue after it was lost and 1 bad record reported."""
    change, lost, spans = BREAKS[edit]
    text = json.dumps([dialogue(i) for i in range(100)], indent=indent)
    broken = change(text)
    path = tmp_path / "in" / "toy" / "data" / "dialogues.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(broken.encode())
    result = build_source("convlab", tmp_path / "out", data_dir=str(tmp_path / "in"), on_bad_record="skip")
    [sessions] = datasets.load_dataset(str(tmp_path / "out"), "sessions").values()
    built = sessions["conversation_id"]
    in_file = len(starts(broken))  # 100, or 71 once cut in dialogue 70
    assert built == [f"toy-train-{i}" for i in range(in_file) if i not in lost]
    entries = [json.loads(line) for line in result.quarantine.read_text(encoding="utf-8").splitlines()]
    assert len(built) + sum(entry["records"] for entry in entries) == in_file
    assert result.skipped == len(lost)
    assert len(entries) == len(spans)
    at = [*starts(broken), len(broken)]
    for entry, (first, after) in zip(entries, spans, strict=True):
        assert entry["scope"] == "span" and entry["file"] == str(path)
        if first == after:  # nothing lost: the bytes skipped are those the edit put there (none, or garbage)
            raw = "xyz" + broken[at[first] - 15 : at[first]] if "xyz" in broken else ""
            assert entry["records"] == 0
        else:
            raw = broken[at[first] : at[after if after is not None else -1]]
            assert entry["records"] == 1 and entry["record"] == first
        assert entry["raw"] == raw and entry["raw_size"] == len(raw.encode())


def test_cli_build_and_check_report_the_dialogues_a_break_lost(tmp_path, capsys):
    """The one-line report counts dialogues, not breaks: 99 rows and 1 skipped (before: 40 rows, "1")."""
    path = tmp_path / "in" / "toy" / "data" / "dialogues.json"
    path.parent.mkdir(parents=True)
    path.write_text(missing_comma_inside(json.dumps([dialogue(i) for i in range(100)], indent=2)))
    assert run("build", tmp_path / "in", tmp_path, "--on-bad-record", "skip") == 0
    out, err = capsys.readouterr()
    assert "sessions       train 99 rows" in out
    assert (
        f"warning: 1 bad record(s) skipped, each with its reason in {tmp_path / 'out'}.quarantine.jsonl"
        in err
    )
    quarantined = tmp_path / "check.quarantine.jsonl"
    assert (
        run("check", tmp_path / "in", tmp_path, "--on-bad-record", "skip", "--quarantine", str(quarantined))
        == 0
    )
    out = capsys.readouterr().out
    assert f"convlab: OK after skipping 1 bad record(s), each with its reason in {quarantined}" in out
    [entry] = [json.loads(line) for line in quarantined.read_text(encoding="utf-8").splitlines()]
    assert entry["records"] == 1 and entry["record"] == 40 and '"toy-train-40"' in entry["raw"]


def test_turn_keys_named_like_convhubs_markers_round_trip(tmp_path):
    """Before, a turn key named like a marker failed the build ("reserved"); now every one comes back."""
    turns = [
        {  # no dialogue_acts and no state: convhub writes its dialogue_acts_absent marker beside these keys
            "speaker": "user",
            "utterance": "a",
            "utt_idx": 0,
            "dialogue_acts_absent": False,
            "state_empty_domains": ["x"],
            "\\dialogue_acts_kinds": "k",
        },
        {  # two act kinds and an empty domain: convhub writes dialogue_acts_kinds and state_empty_domains
            "speaker": "system",
            "utterance": "b",
            "utt_idx": 1,
            "dialogue_acts": {"categorical": [], "binary": []},
            "state": {"w": {}},
            "dialogue_acts_kinds": None,
            "\\\\state_empty_domains": {"y": 1},
        },
    ]
    source = [{"dataset": "toy", "data_split": "train", "dialogue_id": "toy-0", "turns": turns}]
    data = tmp_path / "in" / "toy" / "data"
    data.mkdir(parents=True)
    (data / "dialogues.json").write_text(json.dumps(source), encoding="utf-8")
    build = build_source("convlab", tmp_path / "build", data_dir=str(tmp_path / "in"))
    [sessions] = datasets.load_dataset(str(build.output), "sessions").values()
    [user, system] = sessions[0]["sessions"][0]["turns"]
    assert json.loads(user["extra"])["dialogue_acts_absent"] is True  # the marker, beside the escaped key
    assert json.loads(system["extra"])["dialogue_acts_kinds"] == ["categorical", "binary"]
    exported = export_source("convlab", build.output, tmp_path / "export").output
    rebuilt = json.loads((exported / "toy" / "data" / "dialogues.json").read_bytes())
    assert json.dumps(rebuilt, sort_keys=True) == json.dumps(source, sort_keys=True)


def test_a_long_run_of_spaces_is_skipped_at_c_speed_by_both_indexes():
    """40 MB of spaces between two dialogues (what a zip under the ratio limit may still hold): both scans
    skip it in one C loop each (before: a Python step per space, about 10 s for the decoding scan)."""
    first, second = (json.dumps(dialogue(i)).encode() for i in (0, 1))
    spaces = 40 << 20
    raw = b"[" + first + b"," + b" " * spaces + second + b"]"
    started = time.perf_counter()
    ranges = [(start, end) for start, end, *_ in json_list.scan_json_array(io.BytesIO(raw), "f.json")]
    index = index_dialogues(io.BytesIO(raw), "f.json")  # (the bytes-level index is gone: the scan's)
    elapsed = time.perf_counter() - started
    assert ranges == [(1, 1 + len(first)), (len(raw) - 1 - len(second), len(raw) - 1)]
    assert [(start, end) for start, end, _ in index["train"]] == ranges
    assert elapsed < 3, elapsed


def forge_sizes(path: Path, compressed: int | None = None, inflated: int | None = None) -> None:
    """Overwrite the sizes the zip's central directory declares for its (last) member."""
    raw = bytearray(path.read_bytes())
    at = raw.rindex(b"PK\x01\x02")
    if compressed is not None:
        raw[at + 20 : at + 24] = struct.pack("<I", compressed)
    if inflated is not None:
        raw[at + 24 : at + 28] = struct.pack("<I", inflated)
    path.write_bytes(bytes(raw))


def test_forged_sizes_cannot_get_a_bomb_past_the_limit(tmp_path, capsys):
    """A bomb declaring a compressed size past the archive's end (ratio 0.7 on paper) is refused by name
    (before: zipfile's bare EOFError, "corrupt or truncated zip member:"); one declaring a small inflated
    size is cut there by zipfile, whose CRC check then fails: no header makes convhub inflate the 200 MB."""
    archive = tmp_path / "in" / "toy" / "data.zip"
    write_bomb(archive, 200 << 20)
    forge_sizes(archive, compressed=300 << 20)
    started = time.perf_counter()
    assert run("check", tmp_path / "in", tmp_path) != 0
    line = one_error_line(capsys, "check")
    assert f"{archive}:data/dialogues.json" in line and "more than the archive's" in line
    write_bomb(archive, 200 << 20)
    forge_sizes(archive, inflated=1 << 20)
    assert run("check", tmp_path / "in", tmp_path) != 0
    line = one_error_line(capsys, "check")
    assert f"{archive}:data/dialogues.json" in line and "CRC" in line
    assert time.perf_counter() - started < 20


@pytest.mark.slow
def test_reading_on_after_a_break_keeps_memory_to_a_chunk_not_the_file(tmp_path):
    """A 40 MB indented file broken in its 6th dialogue: the skip scan holds a few chunks, as on a good
    file (before, it read the whole rest of the file into one string to decide the break was real)."""
    turns = [{"speaker": "user", "utterance": "word " * 40, "utt_idx": j} for j in range(30)]
    text = json.dumps([dialogue(i) | {"turns": turns} for i in range(5000)], indent=2)
    path = tmp_path / "dialogues.json"
    path.write_text(missing_comma_inside_at(text, 5), encoding="utf-8")
    assert path.stat().st_size > 40 << 20
    lost = []
    tracemalloc.start()
    try:
        with path.open("rb") as stream:
            index = index_dialogues(stream, str(path), lambda *a, **k: lost.append(k), recover=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(index["train"]) == 4999 and lost == [{"records": 1}]
    assert peak < 32 << 20, peak


def test_cli_says_no_record_was_lost_at_a_missing_comma_between_dialogues(tmp_path, capsys):
    """Before, the 60 dialogues after the comma were lost; now none is, and the warning says so."""
    path = tmp_path / "in" / "toy" / "data" / "dialogues.json"
    path.parent.mkdir(parents=True)
    path.write_text(missing_comma_between(json.dumps([dialogue(i) for i in range(100)])), encoding="utf-8")
    assert run("build", tmp_path / "in", tmp_path, "--on-bad-record", "skip") == 0
    out, err = capsys.readouterr()
    assert "sessions       train 100 rows" in out
    quarantined = f"{tmp_path / 'out'}.quarantine.jsonl"
    assert f"warning: no record lost, but a file was read around a break: see {quarantined}" in err
    target = tmp_path / "check.quarantine.jsonl"
    assert (
        run("check", tmp_path / "in", tmp_path, "--on-bad-record", "skip", "--quarantine", str(target)) == 0
    )
    assert f"convlab: OK with no record lost, after reading around a break in a file: see {target}" in (
        capsys.readouterr().out
    )
