"""GigaMemory built: the real public sample, the packaged sample and fixtures for every quirk of the format,
bad input, files and subsets, the command line.

The strongest check is ``gigamemory_lines.rebuild_lines``: it rebuilds every source line (raw id types, key
order, file and line number) from the loaded ``sessions`` config alone and compares it with the source.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import datasets
import pytest

from convhub.build import build_source, check_source
from convhub.builders.gigamemory import builder, parse
from convhub.builders.gigamemory.builder import GigamemoryBuilder
from convhub.cli import main as cli
from convhub.engine.inputs.listing import JSON_LINES
from convhub.errors import SourceError
from tests.gigamemory.gigamemory_lines import (
    DIALOGUE_A,
    DIALOGUE_B,
    assert_round_trip,
    line,
    parse_path,
    rebuild_lines,
    session,
    source_lines,
    write_jsonl,
)
from tests.support.data_files import shared_data

REAL_COUNTS = {"conversations": 4, "questions": 4, "sessions": 149, "messages": 1900}

# -- the real public sample -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_build(tmp_path_factory):
    folder = shared_data("gigamemory")
    return build_source(
        "gigamemory", tmp_path_factory.mktemp("real") / "gigamemory-unified", data_dir=str(folder)
    )


@pytest.mark.slow
def test_real_sample_counts(real_build):
    output = str(real_build.output)
    sessions = datasets.load_dataset(output, "sessions", split="test")
    qa = datasets.load_dataset(output, "qa", split="test")
    messages = datasets.load_dataset(output, "messages", split="test")
    turns = datasets.load_dataset(output, "turns", split="test")
    assert sessions.num_rows == REAL_COUNTS["conversations"]
    assert qa.num_rows == REAL_COUNTS["questions"]
    assert sum(len(row) for row in sessions["sessions"]) == REAL_COUNTS["sessions"]
    assert messages.num_rows == REAL_COUNTS["sessions"]
    assert sum(len(row) for row in messages["messages"]) == REAL_COUNTS["messages"]
    assert turns.num_rows == REAL_COUNTS["messages"]
    assert sorted(qa["category"]) == sorted(parse.QUESTION_TYPES)
    assert set(sessions["subset"]) == {"format_example"} and set(sessions["language"]) == {"ru"}
    assert real_build.notes == {"no_info question that still lists answer sessions (kept)": 1}


def test_real_sample_rebuilds_every_line_byte_for_byte(real_build):
    """The public file is json.dumps(ensure_ascii=False) per line: the rebuild must equal each raw line."""
    path = shared_data("gigamemory", "format_example.jsonl")
    records = datasets.load_dataset(str(real_build.output), "sessions", split="test")
    rebuilt = rebuild_lines(records)
    raw = source_lines(path)
    assert len(rebuilt) == len(raw) == 4
    for key, text in raw.items():
        assert json.dumps(rebuilt[key], ensure_ascii=False) == text
    first = json.loads(raw[("format_example.jsonl", 1)])
    row = datasets.load_dataset(str(real_build.output), "qa", split="test")[0]
    assert row["question_id"] == str(first["id"]) and json.loads(row["extra"])["id"] == first["id"]
    assert row["evidence_session_ids"] == [str(value) for value in first["ans_session_ids"]]


def test_real_sample_card(real_build):
    card = (real_build.output / "README.md").read_text(encoding="utf-8")
    assert "language:\n- ru" in card and "license: unknown" in card
    for question_type in parse.QUESTION_TYPES:
        assert f"| `{question_type}` |" in card
    assert "| test | format_example | 4 | 149 | 1,900 | 4 |" in card
    assert "https://github.com/ai-forever/memory_aij2025" in card


# -- the packaged sample ----------------------------------------------------------------------------


def test_packaged_sample_groups_shared_dialogues_and_round_trips(sample_builds):
    result = sample_builds["gigamemory"]
    records = datasets.load_dataset(str(result.output), "sessions", split="test")
    by_subset = {}
    for record in records:
        by_subset.setdefault(record["subset"], []).append(record)
    assert {subset: [len(r["questions"]) for r in rows] for subset, rows in by_subset.items()} == {
        "dialogues": [2, 2],
        "string_ids": [2],
    }
    assert datasets.load_dataset(str(result.output), "qa", split="test").num_rows == 6
    sample = Path(GigamemoryBuilder.sample_dir())
    assert_round_trip(records, sorted(sample.iterdir()))


def test_packaged_sample_keeps_odd_role_orders_in_turns_and_counts_what_messages_leaves_out(sample_builds):
    result = sample_builds["gigamemory"]
    turns = datasets.load_dataset(str(result.output), "turns", split="test")
    openers = {
        (row["conversation_id"], row["session_id"]): row["role"] for row in turns if row["turn_index"] == 0
    }
    opening_with_assistant = list(openers.values()).count("assistant")
    assert opening_with_assistant == 2  # the sample's sessions that open with the assistant
    messages = datasets.load_dataset(str(result.output), "messages", split="test")
    roles = [[message["role"] for message in row["messages"]] for row in messages]
    assert ["user", "assistant", "user"] in roles  # ending on the user is a valid chat
    assert all(row[0] == "user" for row in roles)
    assert messages.num_rows == len(openers) - opening_with_assistant  # one per session, but those
    assert result.notes["messages: session left out: opens with the assistant"] == opening_with_assistant


def test_packaged_sample_string_ids_stay_strings(sample_builds):
    qa = datasets.load_dataset(str(sample_builds["gigamemory"].output), "qa", split="test")
    string_rows = [row for row in qa if row["subset"] == "string_ids"]
    assert [row["question_id"] for row in string_rows] == ["q-1", "q-2"]
    assert string_rows[0]["evidence_session_ids"] == ["session_id2"]
    assert json.loads(string_rows[0]["extra"])["key_order"][2:4] == [
        "question_type",
        "ans",
    ]  # the format document's order
    int_rows = [row for row in qa if row["subset"] == "dialogues"]
    assert [json.loads(row["extra"])["id"] for row in int_rows] == [1, 2, 3, 4]
    assert [json.loads(row["extra"])["ans_session_ids"] for row in int_rows] == [[1], [2, 3], [1, 2], [2]]


# -- messages and roles ---------------------------------------------------------------------------------


def test_messages_kept_exactly_whatever_the_role_order(tmp_path):
    odd = [
        session(1, ("assistant", "Чем помочь?"), ("assistant", "Я здесь."), ("user", "")),
        session(2, ("user", "Запомни: я люблю чай."), ("user", "И кофе.")),
        session(3),
    ]
    path = write_jsonl(tmp_path / "odd.jsonl", [line(1, "fact_equal_session", odd, [2])])
    records, notes = parse_path(path)
    turns = records[0]["sessions"]
    assert [(t["role"], t["text"]) for t in turns[0]["turns"]] == [
        ("assistant", "Чем помочь?"),
        ("assistant", "Я здесь."),
        ("user", ""),
    ]
    assert [t["turn_id"] for t in turns[1]["turns"]] == ["2:0", "2:1"]
    assert notes["session starting with the assistant (kept as is)"] == 1
    assert notes["session ending on a user message (kept as is)"] == 2
    assert notes["session with no messages (no row in the messages config)"] == 1
    assert_round_trip(records, [path])


def test_system_role_is_kept(tmp_path):
    dialogue = [session(1, ("system", "Ты ассистент."), ("user", "Привет"), ("assistant", "Привет!"))]
    records, _ = parse_path(write_jsonl(tmp_path / "s.jsonl", [line(1, "no_info", dialogue, [])]))
    assert [t["role"] for t in records[0]["sessions"][0]["turns"]] == ["system", "user", "assistant"]
    assert records[0]["speakers"] == ["system", "user", "assistant"]


def test_unknown_role_names_file_line_and_field(tmp_path):
    dialogue = [session(1, ("user", "Привет"), ("bot", "Привет!"))]
    path = write_jsonl(
        tmp_path / "bad.jsonl", [line(1, "no_info", DIALOGUE_A, []), line(7, "no_info", dialogue, [])]
    )
    with pytest.raises(SourceError) as error:
        parse_path(path)
    message = str(error.value)
    assert str(path) in message and "record 7 at line 2" in message
    assert "'sessions[0].messages[1].role'" in message and "'bot'" in message


# -- unknown keys, odd values ---------------------------------------------------------------------------


def test_unknown_keys_and_numeric_answers_are_kept(tmp_path):
    dialogue = [
        {
            "messages": [{"content": "Мне 30 лет.", "role": "user", "ts": 5}],
            "id": 1,
            "topic": "возраст",
        }
    ]
    record = {
        "question": "Сколько мне лет?",
        "id": 1,
        "ans": 30,
        "sessions": dialogue,
        "meta": {"split": "val"},
    }
    path = write_jsonl(tmp_path / "k.jsonl", [record])
    records, notes = parse_path(path)
    question = records[0]["questions"][0]
    assert (
        question["answer"] == "30" and question["category"] is None and question["evidence_session_ids"] == []
    )
    info = json.loads(question["extra"])
    assert info["ans"] == 30 and info["fields"] == {"meta": {"split": "val"}}
    assert info["key_order"] == ["question", "id", "ans", "sessions", "meta"]
    assert json.loads(records[0]["sessions"][0]["extra"])["fields"] == {"topic": "возраст"}
    assert json.loads(records[0]["sessions"][0]["turns"][0]["extra"]) == {
        "key_order": ["content", "role", "ts"],
        "fields": {"ts": 5},
    }
    assert notes["int ans → string (raw kept in extra.ans)"] == 1
    assert notes["line without question_type (category null)"] == 1
    assert notes["line without ans_session_ids (no evidence)"] == 1
    assert_round_trip(records, [path])


def test_null_question_type_and_answer(tmp_path):
    path = write_jsonl(tmp_path / "n.jsonl", [{**line(1, None, DIALOGUE_A, [1]), "ans": None}])
    records, notes = parse_path(path)
    question = records[0]["questions"][0]
    assert question["category"] is None and question["answer"] is None
    assert notes["question_type null (category null)"] == 1
    assert_round_trip(records, [path])


def test_answer_session_that_names_no_session(tmp_path):
    path = write_jsonl(tmp_path / "e.jsonl", [line(1, "info_consolidation", DIALOGUE_A, [2, 9])])
    records, notes = parse_path(path)
    question = records[0]["questions"][0]
    assert question["evidence_session_ids"] == ["2"]
    assert question["unresolved_evidence"] == ["9"]
    assert json.loads(question["extra"])["ans_session_ids"] == [2, 9]
    assert notes["ans_session_ids entry naming no session of the dialogue (kept in unresolved_evidence)"] == 1
    assert_round_trip(records, [path])


def test_crlf_blank_lines_and_byte_order_mark(tmp_path):
    path = write_jsonl(
        tmp_path / "w.jsonl",
        [line(1, "no_info", DIALOGUE_A, []), line(2, "no_info", DIALOGUE_B, [])],
        newline="\r\n",
    )
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes().replace(b"\r\n", b"\r\n\r\n", 1))
    records, notes = parse_path(path)
    assert [json.loads(r["questions"][0]["extra"])["line"] for r in records] == [1, 3]
    assert notes["blank line (skipped)"] == 1
    assert notes["UTF-8 byte-order mark at the start of a file (skipped)"] == 1


# -- bad input ------------------------------------------------------------------------------------------


def test_bad_json_in_a_gz_names_the_line(tmp_path):
    path = tmp_path / "broken.jsonl.gz"
    good = json.dumps(line(1, "no_info", DIALOGUE_A, []), ensure_ascii=False)
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write(good + "\n" + good.replace('"id": 1', '"id": 2') + "\n" + '{"id": 3, "question": \n')
    with pytest.raises(SourceError, match=r"broken\.jsonl\.gz, record at line 3: not valid JSON"):
        builder.index_file(str(path))


def test_bad_field_in_a_gz_names_line_and_field(tmp_path):
    rows = [line(1, "no_info", DIALOGUE_A, []), {**line(2, "no_info", DIALOGUE_B, []), "question_type": 4}]
    path = write_jsonl(tmp_path / "f.jsonl.gz", rows, gz=True)
    with pytest.raises(SourceError, match=r"f\.jsonl\.gz, record 2 at line 2, field 'question_type'"):
        parse_path(path)


def test_truncated_gz_is_a_source_error(tmp_path):
    path = write_jsonl(
        tmp_path / "t.jsonl.gz", [line(n, "no_info", DIALOGUE_A, []) for n in range(50)], gz=True
    )
    path.write_bytes(path.read_bytes()[:-30])
    with pytest.raises(SourceError, match=r"t\.jsonl\.gz, record at line \d+: cannot read the file"):
        builder.index_file(str(path))


@pytest.mark.parametrize("content", [b"", b"\n\n"])
def test_empty_file_is_a_clear_error(tmp_path, content):
    path = tmp_path / "empty.jsonl"
    path.write_bytes(content)
    with pytest.raises(SourceError, match="no records: the file is empty"):
        builder.index_file(str(path))


@pytest.mark.parametrize(
    ("change", "pattern"),
    [
        ({"id": 1}, r"record 1 at line 2, field 'id': duplicate id '1' \(first at line 1\)"),
        ({"id": True}, r"record at line 2, field 'id': expected an integer or a string, got bool"),
        ({"sessions": "нет"}, r"record 5 at line 2, field 'sessions': expected a list, got str"),
        ({"sessions": [{"id": 1}]}, r"field 'sessions\[0\].messages': missing"),
        ({"sessions": [session(1), session("1")]}, r"field 'sessions': two sessions have the id '1'"),
        ({"ans_session_ids": "1"}, r"field 'ans_session_ids': expected a list, got str"),
        ({"question": None}, r"field 'question': expected a string, got NoneType"),
    ],
)
def test_bad_lines_name_file_line_and_field(tmp_path, change, pattern):
    path = write_jsonl(
        tmp_path / "bad.jsonl",
        [line(1, "no_info", DIALOGUE_A, []), {**line(5, "no_info", DIALOGUE_B, []), **change}],
    )
    with pytest.raises(SourceError, match=pattern):
        parse_path(path)


# -- files, subsets, the command ----------------------------------------------------------------------


def test_subset_is_the_file_stem_and_can_be_chosen(tmp_path):
    write_jsonl(tmp_path / "alpha.jsonl", [line(1, "no_info", DIALOGUE_A, [])])
    write_jsonl(tmp_path / "beta.jsonl.gz", [line(1, "no_info", DIALOGUE_A, [])], gz=True)
    (tmp_path / "notes.txt").write_text("not data")
    _, statistics = check_source("gigamemory", str(tmp_path))
    assert sorted(subset for _, subset in statistics.by_split_subset) == ["alpha", "beta"]
    _, statistics = check_source("gigamemory", str(tmp_path), ["beta"])
    assert [subset for _, subset in statistics.by_split_subset] == ["beta"]
    with pytest.raises(KeyError, match="no subset gamma"):
        check_source("gigamemory", str(tmp_path), ["gamma"])


def test_two_files_with_one_stem_are_refused(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [line(1, "no_info", DIALOGUE_A, [])])
    write_jsonl(tmp_path / "a.jsonl.gz", [line(1, "no_info", DIALOGUE_A, [])], gz=True)
    with pytest.raises(SourceError, match="same subset 'a'"):
        check_source("gigamemory", str(tmp_path))


def test_folder_without_jsonl_is_refused(tmp_path):
    (tmp_path / "x.json").write_text("[]")
    with pytest.raises(FileNotFoundError, match=r"no gigamemory \*\.jsonl"):
        check_source("gigamemory", str(tmp_path))


def test_cli_check_and_build(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    write_jsonl(
        data / "team_val.jsonl",
        [line(1, "no_info", DIALOGUE_A, []), line(2, "fact_equal_session", DIALOGUE_A, [1])],
    )
    assert cli.main(["check", "gigamemory", "--data-dir", str(data)]) == 0
    assert "| test | team_val | 1 | 2 | 5 | 2 |" in capsys.readouterr().out
    output = tmp_path / "out" / "gigamemory-unified"
    assert cli.main(["build", "gigamemory", "--data-dir", str(data), "--output", str(output)]) == 0
    assert datasets.load_dataset(str(output), "qa", split="test")["question_id"] == ["1", "2"]
    (data / "team_val.jsonl").write_text('{"id": 1}\n', encoding="utf-8")
    assert cli.main(["build", "gigamemory", "--data-dir", str(data), "--output", str(output)]) == 1
    assert "team_val.jsonl, record 1 at line 1, field 'sessions': missing" in capsys.readouterr().err
    assert datasets.load_dataset(str(output), "qa", split="test").num_rows == 2  # the old build is untouched


def test_default_download_is_the_public_sample():
    from convhub.builders.gigamemory import builder

    assert builder.URL.endswith("ai-forever/memory_aij2025/main/data/format_example.jsonl")
    assert JSON_LINES.stem(builder.URL) == "format_example"


def test_a_stream_gives_the_rows_of_a_build(tmp_path):
    """A stream runs pass 1 before its first row, as a build does, and gives the same rows."""
    (tmp_path / "data").mkdir()
    write_jsonl(tmp_path / "data" / "s.jsonl", [line(1, "no_info", DIALOGUE_A, [1])])
    builder = GigamemoryBuilder(config_name="sessions", data_dir=str(tmp_path / "data"))
    rows = [row for dataset in builder.as_streaming_dataset().values() for row in dataset]
    assert [row["questions"][0]["question_id"] for row in rows] == ["1"]
    built = build_source(
        "gigamemory", tmp_path / "out", data_dir=str(tmp_path / "data"), configs=["sessions"]
    )
    loaded = datasets.load_dataset(str(built.output), "sessions", split="test")
    assert [row["conversation_id"] for row in rows] == loaded["conversation_id"]


def test_sessions_rows_are_written_32_a_batch(tmp_path):
    """A sessions row is a whole ~350k-character dialogue: the writer holds 32 at a time (base's
    ``WRITER_BATCH_SIZES``), the other configs datasets' default batch, and an explicit ``writer_batch_size`` wins."""
    sample = GigamemoryBuilder.sample_dir()

    def batch_rows(config: str, **options) -> int | None:
        builder = GigamemoryBuilder(config_name=config, data_dir=sample, cache_dir=str(tmp_path), **options)
        return builder._writer_batch_size

    assert batch_rows("sessions") == 32
    assert batch_rows("turns") == GigamemoryBuilder.DEFAULT_WRITER_BATCH_SIZE
    assert batch_rows("sessions", writer_batch_size=7) == 7


def test_a_byte_order_mark_before_the_first_line_is_read_as_mnbvc_reads_it(tmp_path):
    """Both JSON Lines sources read their lines alike (``jsonio.load_object``): a BOM is not a bad line."""
    rows = [
        line(1, "no_info", DIALOGUE_A, [1]),
        line(2, "no_info", DIALOGUE_A, [1]),
        line(3, "x", DIALOGUE_B, []),
    ]
    (tmp_path / "plain").mkdir()
    plain = write_jsonl(tmp_path / "plain" / "x.jsonl", rows)
    marked = tmp_path / "marked" / "x.jsonl"
    marked.parent.mkdir()
    marked.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    records, _ = parse_path(marked)
    assert records and records == parse_path(plain)[0]
