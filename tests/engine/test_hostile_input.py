"""Hostile and broken input, for every source: the build fails well, or with ``skip`` goes on and says so.

Each source writes its own fixtures into ``tmp_path`` (its file layout, its notion of one record: a LoCoMo
sample, a GigaMemory line, a ConvLab dialogue, an MNBVC row). For every case the default build must raise a
SourceError naming the file, the line or record and the field, and leave neither an output nor a staging
folder; with ``on_bad_record="skip"`` the good records are built, every rejected one is in the quarantine
file beside the output with its reason, and the card counts them.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from convhub.build import build_source, check_source
from convhub.cli import main as cli
from convhub.engine.checks import duplicate_ids, quarantine
from convhub.errors import SourceError
from tests.support.hostile_sources import (
    NAMES,
    ROOT,
    SOURCES,
    Source,
    assert_fails_cleanly,
    bad_record,
    convlab_record,
    hostile_mix,
    load,
    locomo_record,
    read_quarantine,
    record_marker,
)

# -- one test per hostile input, for every source -------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("kind", ["wrong_type", "missing"])
def test_a_bad_field_names_file_record_and_field(tmp_path, name, kind):
    source = SOURCES[name]
    data_dir = tmp_path / "data"
    source.write(data_dir, [source.record(0), bad_record(source, kind, 1), source.record(2)])
    _, field = getattr(source, kind)
    marker = "toy-train-1" if name == "convlab" else record_marker(source, 1)
    error = assert_fails_cleanly(name, data_dir, tmp_path, Path(source.file_name).name, marker)
    assert error.field is not None and field in error.field
    assert ("missing" if kind == "missing" else "expected") in error.problem


@pytest.mark.parametrize("name", NAMES)
def test_invalid_json_names_file_and_record(tmp_path, name):
    source = SOURCES[name]
    data_dir = tmp_path / "data"
    good = source.encode([source.record(0), source.record(1)])
    if source.jsonl:
        broken = good + b'{"id": 2, "oops\n' + source.encode([source.record(3)])
        expected = ("line 3", "not valid JSON")
    else:
        broken = good[:-1] + b', {"oops": }]'
        expected = ("not valid",)
    source.path(data_dir).write_bytes(broken)
    assert_fails_cleanly(name, data_dir, tmp_path, Path(source.file_name).name, *expected)


@pytest.mark.parametrize("name", NAMES)
def test_truncated_file_is_named(tmp_path, name):
    source = SOURCES[name]
    data_dir = tmp_path / "data"
    whole = source.encode([source.record(0), source.record(1), source.record(2)])
    source.path(data_dir).write_bytes(whole[: len(whole) - 20])  # cut inside the last record
    expected = ("line 3", "not valid JSON") if source.jsonl else ("not valid",)
    assert_fails_cleanly(name, data_dir, tmp_path, Path(source.file_name).name, *expected)


@pytest.mark.parametrize("name", NAMES)
def test_invalid_utf8_is_named_as_such(tmp_path, name):
    source = SOURCES[name]
    data_dir = tmp_path / "data"
    raw = source.encode([source.record(0), source.record(1, text="caf\u00e9")])
    source.path(data_dir).write_bytes(raw.replace("é".encode(), b"\xe9"))  # Latin-1 é
    expected = ["UTF-8", Path(source.file_name).name]
    if source.jsonl:
        expected.append("line 2")
    assert_fails_cleanly(name, data_dir, tmp_path, *expected)


@pytest.mark.parametrize("name", NAMES)
def test_an_empty_file_is_a_clear_error(tmp_path, name):
    source = SOURCES[name]
    data_dir = tmp_path / "data"
    source.path(data_dir).write_bytes(b"")
    assert_fails_cleanly(name, data_dir, tmp_path, Path(source.file_name).name, "empty")


@pytest.mark.parametrize("name", NAMES)
def test_duplicate_ids_in_one_file(tmp_path, name):
    """Two records with one id: an error for the sources whose id is the conversation's key.

    MNBVC's conversation id is file and line (its ``id`` is the producer's, which may repeat): both rows
    are kept, as two conversations.
    """
    source = SOURCES[name]
    data_dir = tmp_path / "data"
    source.write(data_dir, [source.record(0), source.record(1), source.record(1, text="other text")])
    if name == "mnbvc":
        build_source(name, tmp_path / "out", data_dir=str(data_dir), configs=["sessions"])
        ids = load(tmp_path / "out", "sessions")["conversation_id"]
        assert ids == [source.conversation_id(i) for i in range(3)]
        return
    field = {
        "locomo": "sample_id",
        "gigamemory": "id",
        "convlab": "dialogue_id",
        "longmemeval": "question_id",
    }[name]
    error = assert_fails_cleanly(name, data_dir, tmp_path, Path(source.file_name).name, "duplicate")
    assert error.field == field


def test_duplicate_conversation_ids_across_shards_name_both(tmp_path):
    """ConvLab ids are unique per dataset only: the build's own check over all sessions shards finds it."""
    data_dir = tmp_path / "data"
    source = SOURCES["convlab"]
    first = convlab_record(0, subset="toy")
    source.write(data_dir, [first], "toy/data/dialogues.json")
    source.write(data_dir, [first | {"dataset": "other"}], "other/data/dialogues.json")
    error = assert_fails_cleanly("convlab", data_dir, tmp_path, "duplicate conversation_id 'toy-train-0'")
    assert error.field == "conversation_id"
    assert "subset 'toy'" in str(error) and "subset 'other'" in str(error)
    assert str(error).count("sessions/train-0000") == 2  # both shards named


def test_a_quarantined_duplicate_is_read_from_the_row_group_that_holds_it(tmp_path):
    path = tmp_path / "sessions.parquet"
    pq.write_table(pa.table({"conversation_id": [f"c{n}" for n in range(7)]}), path, row_group_size=3)
    assert [duplicate_ids._row(path, row)["conversation_id"] for row in range(7)] == [
        f"c{n}" for n in range(7)
    ]
    with pytest.raises(IndexError, match="no row 7"):
        duplicate_ids._row(path, 7)


def test_duplicate_sample_ids_across_locomo_files_are_skipped_by_the_build_check(tmp_path):
    data_dir = tmp_path / "data"
    source = SOURCES["locomo"]
    source.write(data_dir, [locomo_record(0), locomo_record(1)], "a.json")
    source.write(data_dir, [locomo_record(1, text="a different conv-1")], "b.json")
    assert_fails_cleanly("locomo", data_dir, tmp_path, "b.json", "duplicate sample_id 'conv-1'", "a.json")
    result = build_source("locomo", tmp_path / "out" / "built", data_dir=str(data_dir), on_bad_record="skip")
    sessions = load(result.output, "sessions")
    assert sessions["conversation_id"] == ["conv-0", "conv-1"]
    assert sessions["subset"] == ["a", "a"]
    assert load(result.output, "qa")["conversation_id"] == ["conv-0", "conv-1"]
    [entry] = read_quarantine(result)
    assert entry["field"] == "conversation_id" and "b" in entry["record"]
    assert json.loads(entry["raw"])["subset"] == "b"
    assert result.statistics.total().conversations == 2


def test_duplicate_across_convlab_subsets_is_dropped_from_every_config_under_skip(tmp_path):
    data_dir = tmp_path / "data"
    source = SOURCES["convlab"]
    source.write(
        data_dir,
        [convlab_record(0, subset="toy"), convlab_record(1, subset="toy")],
        "toy/data/dialogues.json",
    )
    clash = convlab_record(0, text="another dialogue", subset="toy") | {"dataset": "zzz"}
    source.write(data_dir, [clash], "zzz/data/dialogues.json")
    result = build_source("convlab", tmp_path / "out", data_dir=str(data_dir), on_bad_record="skip")
    assert load(result.output, "sessions")["conversation_id"] == ["toy-train-0", "toy-train-1"]
    assert "another dialogue" not in load(result.output, "turns")["text"]
    assert load(result.output, "dialogues")["subset"] == ["toy", "toy"]
    [entry] = read_quarantine(result)
    assert entry["reason"].startswith("duplicate conversation_id 'toy-train-0'")
    assert result.statistics.total().conversations == 2
    assert result.notes[f"{quarantine.NOTE_PREFIX}: conversation_id: duplicate conversation_id …"] == 1


@pytest.mark.parametrize("name", ["locomo", "gigamemory", "mnbvc"])
def test_evidence_naming_no_turn_is_kept_and_counted(tmp_path, name):
    """Evidence (or a reply target) that names no turn is not an error: it is kept raw and counted.

    ConvLab has no evidence or reply reference to check.
    """
    data_dir = tmp_path / "data"
    source = SOURCES[name]
    if name == "mnbvc":
        thread = {
            "主题": "t",
            "来源": "bbs",
            "回复": [{"楼ID": "1", "回复": "r", "扩展字段": '{"引用ID": "99"}'}],
        }
        source.write(data_dir, [thread], "forum.jsonl")
        note = "forum 引用ID naming no reply of the thread (reply_to kept as written)"
    else:
        record = source.record(0)
        if name == "locomo":
            record["qa"][0]["evidence"] = ["D1:1", "D9:99"]
            note = "QA evidence id that names no turn (moved to unresolved_evidence)"
        else:
            record["ans_session_ids"] = [1, 99]
            note = "ans_session_ids entry naming no session of the dialogue (kept in unresolved_evidence)"
        source.write(data_dir, [record])
    result = build_source(name, tmp_path / "out", data_dir=str(data_dir), configs=["sessions"])
    assert result.notes[note] == 1
    sessions = load(result.output, "sessions")
    if name == "mnbvc":
        assert sessions["sessions"][0][0]["turns"][1]["reply_to"] == "99"
    else:
        question = sessions["questions"][0][0]
        assert question["unresolved_evidence"] == (["D9:99"] if name == "locomo" else ["99"])
        assert "evidence_not_found" not in question["extra"]


@pytest.mark.parametrize("name", ["gigamemory", "mnbvc"])
@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
def test_corrupt_or_truncated_gzip_is_named(tmp_path, name, damage):
    source = SOURCES[name]
    data_dir = tmp_path / "data"
    packed = gzip.compress(source.encode([source.record(i, text="x" * 2000 + str(i)) for i in range(40)]))
    if damage == "truncated":
        packed = packed[: len(packed) // 2]
    else:
        packed = packed[:60] + bytes(b ^ 0x5A for b in packed[60:120]) + packed[120:]
    (data_dir / "part.jsonl.gz").parent.mkdir(parents=True)
    (data_dir / "part.jsonl.gz").write_bytes(packed)
    assert_fails_cleanly(name, data_dir, tmp_path, "part.jsonl.gz", "corrupt or truncated gzip", "line ")


@pytest.mark.parametrize("damage", ["truncated", "not a zip"])
def test_corrupt_convlab_zip_is_named(tmp_path, damage):
    data_dir = tmp_path / "data"
    (data_dir / "toy").mkdir(parents=True)
    archive = data_dir / "toy" / "data.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
        zipped.writestr("data/dialogues.json", json.dumps([convlab_record(i, "w" * 5000) for i in range(20)]))
    raw = archive.read_bytes()
    archive.write_bytes(raw[: len(raw) // 2] if damage == "truncated" else b"PK\x03\x04 garbage" + raw[40:])
    assert_fails_cleanly("convlab", data_dir, tmp_path, "data.zip", "zip")


def test_a_gzipped_locomo_file_is_named_not_utf8(tmp_path):
    """LoCoMo reads plain ``*.json`` only: gzip bytes under that name are reported as not UTF-8."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "locomo.json").write_bytes(gzip.compress(json.dumps([locomo_record(0)]).encode()))
    assert_fails_cleanly("locomo", data_dir, tmp_path, "locomo.json", "not valid UTF-8 at byte 1")


# -- a single 100 MB line --------------------------------------------------------------------------------

HUGE_LINE_SCRIPT = textwrap.dedent(
    """
    import json, os, resource, sys, time
    from convhub.build import build_source
    from convhub.errors import SourceError

    def measure(name, data_dir, output, policy):
        started = time.perf_counter()
        try:
            if name:
                build_source(name, output, data_dir=data_dir, configs=["sessions"], on_bad_record=policy)
            outcome = "built"
        except SourceError as error:
            outcome = str(error)[:400]
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return {"outcome": outcome, "peak_rss": peak, "seconds": round(time.perf_counter() - started, 2)}

    results = {}
    for job in json.loads(sys.argv[1]):  # each in a forked child: its own peak, imports paid once
        read, write = os.pipe()
        if os.fork() == 0:
            os.close(read)
            os.write(write, json.dumps(measure(*job)).encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read) as pipe:
            results[f"{job[0]}/{job[3]}"] = json.loads(pipe.read())
        os.wait()
    print(json.dumps(results))
    """
)
HUGE = 100 * 2**20


def write_huge_line(source: Source, data_dir: Path) -> None:
    """A good record, then one whose text is 100 MB, cut in the middle: one broken 100 MB line (or file)."""
    whole = source.encode([source.record(0), source.record(1, text="z" * HUGE)])
    source.path(data_dir).write_bytes(whole[: len(whole) - HUGE // 2])


@pytest.mark.slow
def test_a_single_100mb_broken_line_fails_well_with_bounded_memory(tmp_path):
    """Every source, both policies, one subprocess (peak RSS per build from a forked child of it)."""
    jobs = [["", "", "", "baseline"]]
    for name, source in SOURCES.items():
        write_huge_line(source, tmp_path / name)
        for policy in ("raise", "skip"):
            jobs.append([name, str(tmp_path / name), str(tmp_path / "out" / f"{name}-{policy}"), policy])
    run = subprocess.run(
        [sys.executable, "-c", HUGE_LINE_SCRIPT, json.dumps(jobs)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
    )
    figures = json.loads(run.stdout.strip().splitlines()[-1])
    baseline = figures.pop("/baseline")["peak_rss"]
    print(f"baseline peak RSS {baseline / 2**20:.0f} MiB")
    for job, measured in figures.items():
        print(f"{job}: peak RSS {measured['peak_rss'] / 2**20:.0f} MiB, {measured['seconds']} s")
        assert measured["peak_rss"] - baseline < 6 * HUGE, (job, measured)
    for name, source in SOURCES.items():
        raised = figures[f"{name}/raise"]["outcome"]
        assert Path(source.file_name).name in raised and "not valid" in raised, raised
        if source.jsonl:
            assert "line 2" in raised
        entries = [
            json.loads(line) for line in quarantine.path_beside(tmp_path / "out" / f"{name}-skip").open()
        ]
        assert entries and all(len(entry["raw"] or "") <= quarantine.RAW_LIMIT for entry in entries)
        if source.jsonl:  # the broken line alone is rejected, cut to the limit; the good line is built
            [entry] = entries
            assert entry["raw_truncated"] and entry["raw_size"] > HUGE // 2 and entry["line"] == 2
            assert figures[f"{name}/skip"]["outcome"] == "built"
        else:  # the list breaks: nothing after the broken record, which is the one lost
            [entry] = entries
            assert entry["scope"] == "span" and entry["records"] == 1 and entry["record"] == 1
            assert entry["raw_truncated"] and entry["raw_size"] > HUGE // 2
        assert not (tmp_path / "out" / f"{name}-raise").exists()


# -- strings JSON can hold but UTF-8 cannot ------------------------------------------------------------


def _with_lone_surrogate(source: Source, data_dir: Path) -> Path:
    """Two valid records, the second with ``"\\ud800"`` (JSON's escape of a lone surrogate) in its text."""
    text = "marker-text"
    records = [source.record(0), source.record(1, text)]
    path = source.write(data_dir, records)
    raw = path.read_bytes().replace(text.encode(), b"bad \\ud800 text")
    path.write_bytes(raw)
    return path


@pytest.mark.parametrize("name", NAMES)
def test_a_lone_surrogate_escape_is_named_by_build_and_check_alike(tmp_path, name):
    source = SOURCES[name]
    path = _with_lone_surrogate(source, tmp_path / "data")
    error = assert_fails_cleanly(name, tmp_path / "data", tmp_path, "lone surrogate")
    assert error.field.endswith("text") or error.field.endswith("content") or error.field.endswith("问")
    assert error.path == str(path)  # the file itself (ConvLab's named its dataset's data folder)
    with pytest.raises(SourceError, match="lone surrogate") as checked:
        check_source(name, str(tmp_path / "data"))
    assert checked.value.field == error.field


def test_a_lone_surrogate_in_a_zipped_convlab_dataset_names_the_member_of_its_data_zip(tmp_path):
    source = SOURCES["convlab"]
    path = _with_lone_surrogate(source, tmp_path / "plain")
    archive = tmp_path / "data" / "toy" / "data.zip"
    archive.parent.mkdir(parents=True)
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("data/dialogues.json", path.read_bytes())
    error = assert_fails_cleanly("convlab", tmp_path / "data", tmp_path, "lone surrogate")
    assert error.path == f"{archive}:data/dialogues.json"


@pytest.mark.parametrize("name", NAMES)
def test_a_lone_surrogate_record_is_quarantined_under_skip_with_its_value(tmp_path, name):
    source = SOURCES[name]
    _with_lone_surrogate(source, tmp_path / "data")
    output = tmp_path / "out"
    result = build_source(name, output, data_dir=str(tmp_path / "data"), on_bad_record="skip")
    assert result.skipped == 1
    rejected = [json.loads(line) for line in quarantine.path_beside(output).read_text("utf-8").splitlines()]
    assert [entry["reason"] for entry in rejected] == [rejected[0]["reason"]]
    assert "lone surrogate" in rejected[0]["reason"]
    assert "\ud800" in rejected[0]["raw"]  # kept exactly (escaped in the file, the same value read back)
    sessions = datasets.load_dataset(str(output), "sessions")
    assert sum(split.num_rows for split in sessions.values()) == 1


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(
    "bad_bytes",
    [b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80"],
    ids=["surrogate-as-bytes", "overlong", "past-U+10FFFF"],
)
def test_utf8_the_strict_decoder_refuses_is_named_not_a_traceback(tmp_path, name, bad_bytes):
    source = SOURCES[name]
    path = source.write(tmp_path / "data", [source.record(0), source.record(1, "marker-text")])
    path.write_bytes(path.read_bytes().replace(b"marker-text", b"bad " + bad_bytes + b" text"))
    error = assert_fails_cleanly(name, tmp_path / "data", tmp_path)
    assert "UTF-8" in str(error) or "lone surrogate" in str(error)
    with pytest.raises(SourceError):
        check_source(name, str(tmp_path / "data"))


@pytest.mark.parametrize("name", NAMES)
def test_deep_nesting_is_a_named_error_not_a_recursion_error(tmp_path, name):
    """5,000 levels: past Python's JSON reader (about 1,000). Every source names the line or record."""
    source = SOURCES[name]
    path = source.write(tmp_path / "data", [source.record(0), source.record(1, "marker-text")])
    path.write_bytes(path.read_bytes().replace(b'"marker-text"', b"[" * 5000 + b"]" * 5000))
    expected = "nested too deeply"
    assert_fails_cleanly(
        name, tmp_path / "data", tmp_path, expected, "line 2" if source.jsonl else "record 1"
    )
    with pytest.raises(SourceError, match=expected):
        check_source(name, str(tmp_path / "data"))


@pytest.mark.parametrize("name", NAMES)
def test_an_integer_past_pythons_digit_limit_is_a_named_error_not_a_value_error(tmp_path, name):
    """json refuses an integer of over 4300 digits with a plain ValueError, which escaped every reader but
    MNBVC's as a traceback; each now names the line or record."""
    source = SOURCES[name]
    path = source.write(tmp_path / "data", [source.record(0), source.record(1, "marker-text")])
    path.write_bytes(path.read_bytes().replace(b'"marker-text"', b"1" * 5000))
    expected = "Exceeds the limit (4300 digits) for integer string conversion"
    assert_fails_cleanly(
        name, tmp_path / "data", tmp_path, expected, "line 2" if source.jsonl else "record 1"
    )
    with pytest.raises(SourceError, match=re.escape(expected)):
        check_source(name, str(tmp_path / "data"))
    skipped = build_source(name, tmp_path / "skipped", str(tmp_path / "data"), on_bad_record="skip")
    assert len(load(skipped.output, "sessions")["conversation_id"]) == 1  # record 0, read before it


def test_a_users_file_where_the_quarantine_goes_is_refused_by_build_and_check(tmp_path, capsys, monkeypatch):
    source = SOURCES["mnbvc"]
    data_dir = tmp_path / "data"
    hostile_mix(source, data_dir)
    (tmp_path / "out.quarantine.jsonl").write_text("my notes\n", encoding="utf-8")
    args = ["build", "mnbvc", "--data-dir", str(data_dir), "--output", str(tmp_path / "out")]
    assert cli.main([*args, "--on-bad-record", "skip"]) == 2  # an output refused: exit 2 in every command
    assert "not a quarantine file convhub wrote" in capsys.readouterr().err
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mnbvc.quarantine.jsonl").write_text("more notes\n", encoding="utf-8")
    assert (
        cli.main(["check", "mnbvc", "--data-dir", str(data_dir), "--on-bad-record", "skip"]) == 2
    )  # an output refused: exit 2 in every command
    assert "not a quarantine file convhub wrote" in capsys.readouterr().err
    assert (tmp_path / "out.quarantine.jsonl").read_text("utf-8") == "my notes\n"
    assert (tmp_path / "mnbvc.quarantine.jsonl").read_text("utf-8") == "more notes\n"
    (tmp_path / "mnbvc.quarantine.jsonl").unlink()
    assert cli.main(["check", "mnbvc", "--data-dir", str(data_dir), "--on-bad-record", "skip"]) == 0
    assert cli.main(["check", "mnbvc", "--data-dir", str(data_dir), "--on-bad-record", "skip"]) == 0
    assert (tmp_path / "mnbvc.quarantine.jsonl").read_text("utf-8").count("\n") >= 1
