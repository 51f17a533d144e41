"""LongMemEval files under attack (issue #54): each bad input is one line naming file, record and field (or the
file, when it is not LongMemEval's at all), with no output; each input that builds exports back exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from convhub.build import build_source
from convhub.cli import main as cli
from convhub.errors import SourceError
from convhub.export.exporter import export_source
from tests.support.data_files import shared_data
from tests.support.hostile_sources import SOURCES, load, read_quarantine


def instance(i: int, sessions: int = 2, turns: int = 2, text: str = "") -> dict:
    session_ids = [f"answer_{i}_{n}" for n in range(1, sessions + 1)]
    return {
        "question_id": f"q{i}",
        "question_type": "multi-session",
        "question": "What did I say?",
        "answer": "hello",
        "question_date": "2023/05/30 (Tue) 23:40",
        "haystack_session_ids": session_ids,
        "haystack_dates": [f"2023/05/{n % 28 + 1:02d} (Sat) 02:21" for n in range(sessions)],
        "haystack_sessions": [
            [
                {
                    "role": ("user", "assistant")[t % 2],
                    "content": text or f"turn {t} of {sid}",
                    "has_answer": t == 0,
                }
                for t in range(turns)
            ]
            for sid in session_ids
        ],
        "answer_session_ids": session_ids[:1],
    }


def write(folder: Path, instances: list, name: str = "lme.json") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(instances), encoding="utf-8")
    return path


def build_error(tmp_path: Path, instances: list) -> str:
    """The default build's error for a file of ``instances``: one line, no output left behind."""
    data = tmp_path / "data"
    write(data, instances)
    with pytest.raises(SourceError) as raised:
        build_source("longmemeval", tmp_path / "out", str(data), ["sessions"], 1)
    assert not (tmp_path / "out").exists()
    message = str(raised.value)
    assert "\n" not in message
    return message


def assert_exports_exactly(tmp_path: Path, instances: list, name: str = "lme.json") -> None:
    data = tmp_path / "data"
    write(data, instances, name)
    built = build_source("longmemeval", tmp_path / "out", str(data), ["sessions"], 1)
    exported = export_source("longmemeval", built.output, tmp_path / "export")
    assert exported.files == [name]
    text = (exported.output / name).read_text(encoding="utf-8")
    assert json.dumps(json.loads(text)) == json.dumps(instances)  # key order and number types included


@pytest.mark.parametrize(
    ("key", "shorter", "counts"),
    [
        ("haystack_session_ids", 1, "2 ids, 3 dates, 3 sessions"),
        ("haystack_dates", 1, "3 ids, 2 dates, 3 sessions"),
        ("haystack_sessions", 1, "3 ids, 3 dates, 2 sessions"),
        ("haystack_sessions", 3, "3 ids, 3 dates, 0 sessions"),
    ],
)
def test_list_lengths_that_disagree(tmp_path, key, shorter, counts):
    instances = [instance(0, sessions=3), instance(1, sessions=3)]
    del instances[1][key][:shorter]
    message = build_error(tmp_path, instances)
    assert (
        message
        == f"{tmp_path / 'data' / 'lme.json'}, record 1, field 'haystack_dates': {counts}: not one of each per session"
    )


@pytest.mark.parametrize(
    "key",
    [
        "question_id",
        "question_type",
        "question",
        "answer",
        "question_date",
        "haystack_session_ids",
        "haystack_dates",
        "haystack_sessions",
        "answer_session_ids",
    ],
)
def test_a_missing_key_is_named(tmp_path, key):
    instances = [instance(0), instance(1)]
    del instances[1][key]
    message = build_error(tmp_path, instances)
    assert message == f"{tmp_path / 'data' / 'lme.json'}, record 1, field {key!r}: missing"


def test_extra_keys_and_keys_out_of_order_build_and_export_exactly(tmp_path):
    first, second = instance(0), instance(1)
    first["retrieval_note"] = {"k": [1, 2.0, None]}
    second = {key: second[key] for key in reversed(list(second))}
    second["haystack_sessions"][0][0] = {"content": "hi", "weight": 0.5, "role": "user"}
    assert_exports_exactly(tmp_path, [first, second])


def test_a_repeated_question_id_names_the_input_file_and_both_records(tmp_path):
    instances = [instance(0), instance(1), instance(0)]
    message = build_error(tmp_path, instances)
    assert (
        message
        == f"{tmp_path / 'data' / 'lme.json'}, record 2, field 'question_id': duplicate question_id 'q0', "
        f"also in {tmp_path / 'data' / 'lme.json'}, record 0"
    )


def test_a_repeated_question_id_under_skip_keeps_the_first(tmp_path):
    data = tmp_path / "data"
    write(data, [instance(0), instance(1), instance(0, text="again")])
    result = build_source("longmemeval", tmp_path / "out", str(data), ["sessions"], 1, on_bad_record="skip")
    assert load(result.output, "sessions")["conversation_id"] == ["lme:q0", "lme:q1"]
    [entry] = read_quarantine(result)
    assert (entry["record"], entry["field"]) == (2, "question_id") and '"again"' in entry["raw"]


@pytest.mark.parametrize(
    ("edit", "field", "problem"),
    [
        (
            lambda i: i["haystack_sessions"].__setitem__(1, {"role": "user"}),
            "haystack_sessions[1]",
            "expected a list of turns, got dict",
        ),
        (
            lambda i: i["haystack_sessions"].__setitem__(1, "text"),
            "haystack_sessions[1]",
            "expected a list of turns, got str",
        ),
        (
            lambda i: i["haystack_sessions"][1].__setitem__(0, ["user", "hi"]),
            "haystack_sessions[1][0]",
            "expected an object, got list",
        ),
        (
            lambda i: i["haystack_sessions"][0][1].update(role="system"),
            "haystack_sessions[0][1].role",
            "got 'system'",
        ),
        (
            lambda i: i["haystack_sessions"][0][1].update(role="User"),
            "haystack_sessions[0][1].role",
            "got 'User'",
        ),
        (
            lambda i: i["haystack_sessions"][0][1].update(role=None),
            "haystack_sessions[0][1].role",
            "got None",
        ),
        (lambda i: i["haystack_sessions"][0][0].pop("role"), "haystack_sessions[0][0].role", "got None"),
        (
            lambda i: i["haystack_sessions"][0][0].update(content=None),
            "haystack_sessions[0][0].content",
            "expected a string, got NoneType",
        ),
        (
            lambda i: i["haystack_session_ids"].__setitem__(1, 7),
            "haystack_session_ids[1]",
            "expected a string, got int",
        ),
        (
            lambda i: i.update(haystack_sessions={}),
            "haystack_sessions",
            "expected a list of sessions, got dict",
        ),
    ],
)
def test_sessions_and_turns_of_the_wrong_shape_or_role(tmp_path, edit, field, problem):
    instances = [instance(0), instance(1)]
    edit(instances[1])
    message = build_error(tmp_path, instances)
    assert message.startswith(f"{tmp_path / 'data' / 'lme.json'}, record 1, field {field!r}: ")
    assert message.endswith(problem)


def test_a_session_id_that_is_also_a_turn_id_is_refused(tmp_path):
    """``x_2`` names turn 2 of session ``x``: a session of that id beside it would make the id ambiguous."""
    clash = instance(1, sessions=2, turns=3)
    clash["haystack_session_ids"] = ["x", "x_2"]
    message = build_error(tmp_path, [instance(0), clash])
    assert message.endswith(
        "record 1, field 'haystack_session_ids[1]': 'x_2' is also the id of turn 2 of session 'x' "
        "(haystack_session_ids[0]): a turn is named '<session id>_<n>', and one id cannot name both"
    )


@pytest.mark.parametrize("ids", [["x", "x_3"], ["x", "x_0"], ["x", "x_02"], ["x_1", "y"]])
def test_session_ids_that_only_look_like_turn_ids_build(tmp_path, ids):
    """No turn 3 or 0 or 02 of a session of two turns, and no session ``x``: these build and export exactly."""
    fine = instance(1, sessions=2, turns=2)
    fine["haystack_session_ids"] = fine["answer_session_ids"] = ids
    assert_exports_exactly(tmp_path, [instance(0), fine])


@pytest.mark.slow
def test_one_huge_haystack_builds_and_exports_exactly(tmp_path):
    """One question whose haystack is 1,500 sessions and 8 MB of text, beside a small one."""
    huge = instance(1, sessions=1500, turns=4, text="memory " * 200)
    assert_exports_exactly(tmp_path, [instance(0), huge, instance(2)], name="longmemeval_m_cleaned.json")


def test_a_folder_mixing_longmemeval_and_other_files(tmp_path, capsys):
    """LoCoMo's file beside LongMemEval's is named as not LongMemEval's; under skip it is left out whole."""
    data = tmp_path / "data"
    write(data, [instance(0)], "longmemeval_oracle.json")
    SOURCES["locomo"].write(data, [SOURCES["locomo"].record(0)], "locomo10.json")
    (data / "notes.txt").write_text("not read: not a .json file")
    (data / "README.md").write_text("# not read either")
    with pytest.raises(SourceError) as raised:
        build_source("longmemeval", tmp_path / "out", str(data), ["sessions"], 1)
    assert str(raised.value) == (
        f"{data / 'locomo10.json'}: does not look like LongMemEval's format: expected a list of instances with keys "
        "question_id, question_type, question, haystack_sessions, ..., its first element is an object with keys "
        "'sample_id', 'conversation', 'qa', 'event_summary', 'observation', ..."
    )
    output = tmp_path / "out"
    args = ["build", "longmemeval", "--data-dir", str(data), "--output", str(output), "--config", "sessions"]
    assert cli.main([*args, "--on-bad-record", "skip"]) == 0
    assert "the rest of 1 file(s) could not be read (locomo10.json;" in capsys.readouterr().err
    assert load(output, "sessions")["conversation_id"] == ["longmemeval_oracle:q0"]
    quarantined = [json.loads(line) for line in Path(f"{output}.quarantine.jsonl").read_text().splitlines()]
    [entry] = quarantined
    assert (entry["file"], entry["scope"]) == (str(data / "locomo10.json"), "file")
    assert entry["raw"] == (data / "locomo10.json").read_text() and entry["raw_size"] == len(entry["raw"])


@pytest.mark.parametrize("text", ['{"question_id": "q0"}', "[1, 2]", '["q0"]'])
def test_a_file_that_is_no_list_of_instances(tmp_path, text):
    data = tmp_path / "data"
    data.mkdir()
    (data / "lme.json").write_text(text)
    with pytest.raises(
        SourceError,
        match=r"lme\.json: (expected a JSON list of LongMemEval instances|does not look like LongMemEval's format)",
    ):
        build_source("longmemeval", tmp_path / "out", str(data), ["sessions"], 1)


def test_locomos_folder_is_not_longmemevals_format(tmp_path, capsys):
    folder = shared_data("locomo")
    args = ["build", "longmemeval", "--data-dir", str(folder), "--output", str(tmp_path / "out")]
    assert cli.main(args) == 1
    [error] = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert error.startswith("convhub build: error: ")
    assert "locomo10.json: does not look like LongMemEval's format: expected a list of instances" in error
    assert "'conversation'" in error and "question_id': expected" not in error


def test_a_session_repeated_within_a_haystack_builds_with_unique_ids_and_exports_exactly(tmp_path):
    """The cleaned release repeats 13 filler sessions within their haystacks: the repeat is kept, as ``<id>#2``."""
    repeated = instance(1, sessions=3)
    repeated["haystack_session_ids"][2] = repeated["haystack_session_ids"][1]
    repeated["haystack_sessions"][2] = repeated["haystack_sessions"][1]
    assert_exports_exactly(tmp_path, [instance(0), repeated])
    built = build_source("longmemeval", tmp_path / "again", str(tmp_path / "data"), ["sessions"], 1)
    rows = load(built.output, "sessions")
    sessions = rows["sessions"][rows["conversation_id"].index("lme:q1")]
    assert [s["session_id"] for s in sessions] == ["answer_1_1", "answer_1_2", "answer_1_2#2"]
    assert json.loads(sessions[2]["extra"]) == {"session_id": "answer_1_2"} and sessions[1]["extra"] is None
    assert [t["turn_id"] for t in sessions[2]["turns"]] == ["answer_1_2#2_1", "answer_1_2#2_2"]
    assert (
        built.notes[
            "session id repeated in one haystack (the repeat stored as <id>#<k>, its id in extra.session_id)"
        ]
        == 1
    )


def test_a_repeat_whose_stored_id_is_taken_is_refused(tmp_path):
    taken = instance(1, sessions=3)
    taken["haystack_session_ids"] = ["x", "x", "x#2"]
    message = build_error(tmp_path, [instance(0), taken])
    assert message.endswith(
        "record 1, field 'haystack_session_ids': 'x#2' is both a session id and a repeat's stored id"
    )
