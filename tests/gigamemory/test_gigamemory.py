"""GigaMemory: the real public sample, the packaged sample and fixtures for every quirk of the format.

The strongest check is :func:`rebuild_lines`: it rebuilds every source line (raw id types, key order, file and
line number) from the loaded ``sessions`` config alone and compares it with the source, so nothing is lost.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import time
from pathlib import Path

import datasets
import pytest
from conftest import shared_data
from convhub import cli
from convhub.build import build_source, check_source
from convhub.errors import Notes, SourceError
from convhub.gigamemory import cut, export, index, parse, read, scan
from convhub.gigamemory.builder import GigamemoryBuilder

REAL_COUNTS = {"conversations": 4, "questions": 4, "sessions": 149, "messages": 1900}


# -- fixture writers ----------------------------------------------------------------------------------


def session(session_id, *messages):
    """A session from (role, content) pairs."""
    return {"id": session_id, "messages": [{"role": role, "content": content} for role, content in messages]}


def line(record_id, question_type, sessions, evidence, question="Как меня зовут?", ans="Иван"):
    return {
        "id": record_id,
        "question": question,
        "ans": ans,
        "question_type": question_type,
        "sessions": sessions,
        "ans_session_ids": evidence,
    }


DIALOGUE_A = [
    session(1, ("user", "Привет, меня зовут Иван."), ("assistant", "Приятно познакомиться, Иван!")),
    session(2, ("user", "У меня есть кот Барсик."), ("assistant", "Сколько ему лет?"), ("user", "Ему 2.")),
]
DIALOGUE_B = [
    session(1, ("assistant", "Добрый день!"), ("user", "Я живу в Самаре."), ("assistant", "Отлично."))
]


def write_jsonl(path: Path, records, gz: bool = False, newline: str = "\n") -> Path:
    text = "".join(json.dumps(record, ensure_ascii=False) + newline for record in records)
    if gz:
        with gzip.open(path, "wt", encoding="utf-8", newline="") as handle:
            handle.write(text)
    else:
        path.write_text(text, encoding="utf-8", newline="")
    return path


def parse_path(path: Path, shard_bytes: int = 1 << 30) -> tuple[list[dict], Notes]:
    """Canonical records of one file through both passes, as the builder runs them."""
    notes = Notes()
    shards = index.plan_shards(index.index_file(path), shard_bytes)
    return [record for shard in shards for record in parse.parse_shard(shard, notes)], notes


def extra(value):
    """A Json column as parsed records hold it (text) or as load_dataset returns it (decoded)."""
    return json.loads(value) if isinstance(value, str) else (value or {})


# -- the round trip `convhub export` makes (convhub.gigamemory.export) ----------------------------------


def rebuild_lines(records) -> dict[tuple[str, int], dict]:
    """(file, line number) → the source line rebuilt from canonical records alone, as `convhub export` does."""
    return {
        (file, line): value for record in records for file, line, value in export.lines_from_record(record)
    }


def source_lines(path: Path) -> dict[tuple[str, int], str]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", newline="") as handle:
        return {(path.name, n): text.rstrip("\r\n") for n, text in enumerate(handle, 1) if text.strip()}


def assert_round_trip(records, paths: list[Path]) -> None:
    rebuilt = rebuild_lines(records)
    expected = {key: text for path in paths for key, text in source_lines(path).items()}
    assert sorted(rebuilt) == sorted(expected)
    for key, text in expected.items():
        # key order matters: compare serializations, not dicts
        assert json.dumps(rebuilt[key], ensure_ascii=False) == json.dumps(
            json.loads(text), ensure_ascii=False
        ), key


# -- the real public sample -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_build(tmp_path_factory):
    folder = shared_data("gigamemory")
    return build_source(
        "gigamemory", tmp_path_factory.mktemp("real") / "gigamemory-unified", data_dir=str(folder)
    )


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


# -- grouping and ids ---------------------------------------------------------------------------------


def test_non_adjacent_lines_with_one_dialogue_become_one_conversation(tmp_path):
    path = write_jsonl(
        tmp_path / "val.jsonl",
        [
            line(10, "fact_equal_session", DIALOGUE_A, [1]),
            line(11, "no_info", DIALOGUE_B, []),
            line(12, "info_consolidation", DIALOGUE_A, [1, 2]),
        ],
    )
    records, notes = parse_path(path)
    assert [[q["question_id"] for q in r["questions"]] for r in records] == [["10", "12"], ["11"]]
    digest = read.dialogue_digest(DIALOGUE_A)
    assert records[0]["conversation_id"] == f"val:{digest[:16]}"
    assert json.loads(records[0]["extra"]) == {"dialogue_sha256": digest}
    assert notes["line sharing its dialogue with an earlier line (one conversation, several questions)"] == 1
    assert_round_trip(records, [path])


def test_same_text_with_string_session_ids_is_another_dialogue(tmp_path):
    as_strings = [{**item, "id": str(item["id"])} for item in DIALOGUE_A]
    path = write_jsonl(
        tmp_path / "ids.jsonl", [line(1, "no_info", DIALOGUE_A, []), line("2", "no_info", as_strings, ["2"])]
    )
    records, _ = parse_path(path)
    assert len(records) == 2
    assert [s["session_id"] for s in records[0]["sessions"]] == [
        s["session_id"] for s in records[1]["sessions"]
    ]
    assert json.loads(records[0]["sessions"][0]["extra"]) == {"id": 1}
    assert records[1]["sessions"][0]["extra"] is None
    assert_round_trip(records, [path])


def test_index_keeps_no_dialogue(tmp_path):
    path = write_jsonl(
        tmp_path / "a.jsonl", [line(1, "no_info", DIALOGUE_A, []), line(2, "no_info", DIALOGUE_A, [])]
    )
    file_index = index.index_file(path)
    assert len(file_index.groups) == 1 and len(file_index.groups[0].lines) == 2
    assert all("sessions" not in item.fields for item in file_index.groups[0].lines)


def tricky_lines() -> list[bytes]:
    """Lines that cutting the ``sessions`` span out of the raw bytes could get wrong, if it trusted the text."""
    floats = [{**session(1, ("user", "Счёт 2:1.5")), "score": 1e16, "big": 2**70, "ratio": 0.1}]
    odd_text = [session(1, ("user", 'Он сказал: "sessions": [1], "ans_session_ids": [2]}'))]
    lines = [
        line(1, "no_info", DIALOGUE_A, [1]),
        line(2, "no_info", DIALOGUE_A, [2], question='"sessions": [] "ans_session_ids"'),
        line(3, "no_info", floats, [1], ans=2**70),
        line(4, "no_info", odd_text, [1]),
        {"sessions": DIALOGUE_B, "id": 5, "question": "Где я живу?"},  # sessions first, no ans_session_ids
        {"id": 6, "extra": {"sessions": DIALOGUE_B}, "sessions": DIALOGUE_B, "ans_session_ids": []},
        line(7, "no_info", [], []),
    ]
    raw = [json.dumps(record, ensure_ascii=False).encode() for record in lines]
    raw.append(json.dumps(line(8, "no_info", DIALOGUE_A, [1])).encode())  # same dialogue, \u escapes
    compact = json.dumps(line(9, "no_info", DIALOGUE_B, []), ensure_ascii=False, separators=(",", ":"))
    raw.append(compact.encode())
    duplicate = b'{"id": 10, "sessions": [], "sessions": %s, "ans_session_ids": []}'
    raw.append(duplicate % json.dumps(DIALOGUE_B).encode())
    raw.append(b'{"id": 11, "sessions": [{"id": 1, "messages": [{"role": "user", "content": NaN}]}]}')
    nested = {"id": 12, "question": "?", "extra": {"sessions": DIALOGUE_A, "ans_session_ids": []}}
    raw.append(json.dumps({**nested, "sessions": DIALOGUE_B}, ensure_ascii=False).encode())
    return raw


def test_cut_lines_index_and_parse_as_whole_lines(tmp_path, monkeypatch):
    """Pass 1 cuts each line into question fields and a dialogue span: same index, records and digests as
    parsing every line whole with json, on lines whose text mimics the cut or whose values orjson reads
    or prints differently (floats, integers beyond 64 bits, NaN)."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join(tricky_lines()) + b"\n")
    rejected = []

    def reject(error, raw, scope="record"):
        rejected.append(str(error))

    def parsed() -> tuple:
        file_index = index.index_file(path, reject)
        notes = Notes()
        shards = index.plan_shards(file_index, 1 << 30)
        records = [r for shard in shards for r in parse.parse_shard(shard, notes, reject)]
        figures = [
            (g.digest, g.offset, g.length, [(x.number, x.fields, x.keys) for x in g.lines])
            for g in file_index.groups
        ]
        return figures, records, dict(notes), list(rejected)

    by_cut = parsed()
    spans = {group.lines[0].number: group.span for group in index.index_file(path, reject).groups}
    assert [number for number, span in spans.items() if span is not None] == [1, 4, 7]
    rejected.clear()
    # each name in every module that looks it up: the cut in cut (a .gz's line) and scan (a mapped line),
    # orjson's reads in read (decode_line), cut (a span) and parse (pass 2), the float check in read
    for module in (cut, scan):
        monkeypatch.setattr(module, "split_line", lambda *args: None)
    for module in (read, cut, parse):
        monkeypatch.setattr(module, "exact_loads", lambda raw: read.INEXACT)
    monkeypatch.setattr(read, "_float_free", lambda value: False)  # json.dumps for every digest
    whole = parsed()
    assert by_cut == whole
    figures, records, _, errors = whole
    assert [[q["question_id"] for q in r["questions"]] for r in records] == [
        ["1", "2", "8"],
        ["3"],
        ["4"],
        ["5", "9", "12"],
        ["7"],
    ]
    assert [number for number, *_ in figures[3][3]] == [5, 6, 9, 10, 12]  # the last "sessions" key wins
    assert [error.split(", ")[1] for error in errors] == [
        "record 6 at line 6",
        "record 10 at line 10",
        "record 11 at line 11",
    ]
    assert errors[2].endswith("expected a string, got float")  # NaN, read by json as before
    assert json.loads(records[1]["questions"][0]["extra"])["ans"] == 2**70
    floats = json.loads(tricky_lines()[2])["sessions"]
    canonical = json.dumps(floats, ensure_ascii=False, separators=(",", ":")).encode()
    assert figures[1][0] == hashlib.sha256(canonical).hexdigest()


def _index_figures(file_index) -> tuple:
    groups = [
        (g.digest, g.offset, g.length, g.line_check, g.span, [(x.number, x.fields, x.keys) for x in g.lines])
        for g in file_index.groups
    ]
    return groups, dict(file_index.notes), file_index.rejected


def test_index_in_two_processes_is_the_index_of_one(tmp_path, monkeypatch):
    """Pass 1 over byte ranges in worker processes: same groups, lines, notes and rejections, in order."""
    dialogues = [[session(n, ("user", f"Факт номер {n}."), ("assistant", "Запомнил."))] for n in range(5)]
    rows = [line(n, "fact_equal_session", dialogues[n % 5], [n % 5]) for n in range(40)]
    with_float = [{**session(7, ("user", "Мне 2.5 года.")), "age": 2.5}]  # not cut: parsed whole by json
    rows[3:3] = [line(n, "info_updating", with_float, [7]) for n in (40, 41)]
    path = write_jsonl(tmp_path / "w.jsonl", rows, newline="\r\n")
    raw = path.read_bytes().replace(b"\r\n", b"\r\n\r\n", 3)  # a blank line, BOM, a bad line, no last newline
    bad = json.dumps(line(99, "no_info", dialogues[0], [])).encode().replace(b'"sessions"', b'"x"')
    last = raw.splitlines()[-1]  # line 39 again: a duplicate id, with no newline at the end of the file
    path.write_bytes(b"\xef\xbb\xbf" + raw + b"not json\r\n" + bad + b"\r\n" + last)
    monkeypatch.setattr(scan, "PARALLEL_INDEX_BYTES", 0)

    def index_of(processes: int) -> tuple:
        rejected = []
        found = index.index_file(
            path, lambda error, raw, scope="record": rejected.append((str(error), raw)), processes
        )
        return _index_figures(found), rejected

    one = index_of(1)
    assert [error.split(": ", 1)[1][:14] for error, _ in one[1]] == [
        "not valid JSON",
        "missing",
        "duplicate id '",
    ]
    assert [len(g.lines) for g in index.index_file(path, lambda *a, **k: None).groups] == [8, 8, 8, 2, 8, 8]
    for processes in (2, 3):
        assert index_of(processes) == one
    assert index.index_file(path, lambda *a, **k: None, 2).notes["blank line (skipped)"] == 3


def test_mapped_index_is_the_index_of_a_line_by_line_read(tmp_path, monkeypatch):
    """A plain file is mapped and a dialogue seen again is recognized by its length, end bytes and one
    comparison; a .gz of the same bytes is read line by line and hashes every span: same index. Spans of
    one length and the same first and last bytes, differing only inside, stay apart."""
    monkeypatch.setattr(scan, "SPAN_KEY_BYTES", 8)
    twins = [[session(1, ("user", f"Я родился в {year} году, это точно."))] for year in (1990, 1991)]
    rows = [line(n, "no_info", [DIALOGUE_A, DIALOGUE_B, *twins][n % 4], [1]) for n in range(12)]
    path = write_jsonl(tmp_path / "m.jsonl", rows, newline="\r\n")
    text = path.read_bytes().replace(b"\r\n", b"\r\n" + b" " * 80 + b"\r\n", 1)  # a long blank line
    path.write_bytes(b"\xef\xbb\xbf" + text + b"not json")
    packed = tmp_path / "m.jsonl.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    compared = []
    real_place_span = scan._place_span
    monkeypatch.setattr(scan, "_place_span", lambda *args: compared.append(1) or real_place_span(*args))

    def index_of(source) -> tuple:
        rejected = []
        found = index.index_file(
            source, lambda error, raw, scope="record": rejected.append((str(error), raw))
        )
        return _index_figures(found), [(error.split(": ", 1)[1], raw) for error, raw in rejected]

    mapped, read = index_of(path), index_of(packed)
    assert len(compared) == 12
    assert mapped == read
    (groups, notes, _), _ = mapped
    assert [[number for number, *_ in g[5]] for g in groups] == [
        [1, 6, 10],
        [3, 7, 11],
        [4, 8, 12],
        [5, 9, 13],
    ]
    assert (
        notes["blank line (skipped)"] == 1
        and notes["UTF-8 byte-order mark at the start of a file (skipped)"] == 1
    )
    assert read[1] == [(read[1][0][0], b"not json")] and read[1][0][0].startswith("not valid JSON")


def test_spans_sharing_their_key_are_told_apart_in_linear_work(tmp_path, monkeypatch):
    """Many distinct dialogues of one length and the same first and last bytes (one cheap key) cost each
    line at most one byte comparison and one sha256, never a comparison with every earlier dialogue (that
    was quadratic: 4,000 such lines took a minute); copies still join the first line of their dialogue."""
    monkeypatch.setattr(scan, "SPAN_KEY_BYTES", 8)
    distinct = 150
    dialogues = [[session(1, ("user", f"Мне {n:04d} лет, и это правда."))] for n in range(distinct)]
    order = [n for n in range(distinct)] + [n for n in range(0, distinct, 3)]  # 50 copies, after all
    path = write_jsonl(
        tmp_path / "k.jsonl", [line(i, "no_info", dialogues[n], [1]) for i, n in enumerate(order)]
    )
    compared, hashed = [], []
    real_same, real_sha256 = scan._same_bytes, scan._full_sha256
    monkeypatch.setattr(scan, "_same_bytes", lambda *args: compared.append(args[4]) or real_same(*args))
    monkeypatch.setattr(scan, "_full_sha256", lambda span: hashed.append(len(span)) or real_sha256(span))
    file_index = index.index_file(path)
    lines = len(order)
    assert len(compared) == lines - 1  # every line after the first meets the key's first dialogue once
    assert len(hashed) == lines - 2  # all but the first line and the copy the comparison found (line 151)
    assert sum(compared) + sum(hashed) <= 2 * path.stat().st_size
    assert [[x.number for x in g.lines] for g in file_index.groups] == [
        [n + 1, *([distinct + n // 3 + 1] if n % 3 == 0 else [])] for n in range(distinct)
    ]
    packed = tmp_path / "k.jsonl.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    assert _index_figures(index.index_file(packed)) == _index_figures(file_index)


def test_a_file_changed_between_the_passes_is_refused(tmp_path):
    path = write_jsonl(
        tmp_path / "c.jsonl", [line(1, "no_info", DIALOGUE_A, [1]), line(2, "no_info", DIALOGUE_B, [])]
    )
    file_index = index.index_file(path)
    path.write_bytes(path.read_bytes().replace("Иван".encode(), "Пётр".encode()))
    with pytest.raises(SourceError, match="changed while it was being converted"):
        list(parse.parse_shard(index.plan_shards(file_index, 1 << 30)[0], Notes()))


def test_an_index_store_that_cannot_be_written_or_read_only_costs_time(tmp_path, monkeypatch):
    """The on-disk index is a cache: an unwritable store, or a stored index that is corrupt, is skipped and the
    file is indexed again, with the same records."""
    path = tmp_path / "big.jsonl"
    path.write_bytes(b"\n".join(tricky_lines()[:5]) + b"\n")
    expected = parse_path(path)[0]
    monkeypatch.setattr(index, "PERSIST_INDEX_BYTES", 0)
    monkeypatch.setattr(index, "_INDEX_CACHE", {})
    blocked = tmp_path / "a-file-not-a-folder"
    blocked.write_text("x")
    monkeypatch.setattr(index, "INDEX_STORE", str(blocked))
    unwritten = index.cached_index(path)  # the store cannot be made: no error, no leftover
    assert blocked.read_text() == "x" and list(tmp_path.glob("*.tmp")) == []
    records = [
        r for shard in index.plan_shards(unwritten, 1 << 30) for r in parse.parse_shard(shard, Notes())
    ]
    assert records == expected
    store = tmp_path / "store"
    monkeypatch.setattr(index, "INDEX_STORE", str(store))
    index._INDEX_CACHE.clear()
    index.cached_index(path)
    [stored] = store.glob("*.json")
    stored.write_text('{"groups": [[1, 2]]}')  # cut short or tampered with
    index._INDEX_CACHE.clear()
    reread = index.cached_index(path)
    records = [r for shard in index.plan_shards(reread, 1 << 30) for r in parse.parse_shard(shard, Notes())]
    assert records == expected


def test_index_of_a_large_file_is_kept_on_disk_per_file_version(tmp_path, monkeypatch):
    """The next build or stream of the same file skips pass 1; a changed file is indexed again."""
    path = tmp_path / "big.jsonl"
    path.write_bytes(b"\n".join(tricky_lines()[:5]) + b"\n")
    monkeypatch.setattr(index, "PERSIST_INDEX_BYTES", 0)
    monkeypatch.setattr(index, "INDEX_STORE", str(tmp_path / "store"))
    monkeypatch.setattr(index, "_INDEX_CACHE", {})
    expected = parse_path(path)[0]
    first = index.cached_index(path)
    assert len(list((tmp_path / "store").glob("*.json"))) == 1
    indexed = []
    real_index_file = index.index_file
    monkeypatch.setattr(index, "index_file", lambda *args: indexed.append(args) or real_index_file(*args))
    index._INDEX_CACHE.clear()  # a new process
    again = index.cached_index(path)
    assert indexed == [] and _index_figures(again) == _index_figures(first)
    assert [g.span for g in again.groups] == [g.span for g in first.groups]
    notes = Notes()
    records = [r for shard in index.plan_shards(again, 1 << 30) for r in parse.parse_shard(shard, notes)]
    assert records == expected
    path.write_bytes(path.read_bytes() + b"\n")
    index._INDEX_CACHE.clear()
    assert index.cached_index(path).notes["blank line (skipped)"] == 1
    assert len(indexed) == 1


def test_the_stored_index_is_kept_per_version_of_every_parser_module():
    """An index on disk is keyed by the bytes of every module of the parser (they were one module): a module
    added to it must join the list, or a change to how it reads, cuts or groups a line would reuse stale indexes."""
    modules = {path.name for path in Path(index.__file__).parent.glob("*.py")}
    assert set(index._PARSER_MODULES) == modules - {"__init__.py", "builder.py", "export.py"}


def _rewrite_keeping_size_and_mtime(path: Path, old: bytes, new: bytes) -> None:
    """Rewrite ``path`` in place (same inode), same size, its modification time set back."""
    assert len(old) == len(new)
    before = os.stat(path)
    data = path.read_bytes()
    assert data.count(old) == 1
    with open(path, "r+b") as handle:
        handle.write(data.replace(old, new))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (
        before.st_size,
        before.st_mtime_ns,
        before.st_ino,
    )


@pytest.mark.parametrize("large", [False, True], ids=["small-file", "change-past-the-sampled-ends"])
@pytest.mark.parametrize("persist", [False, True], ids=["in-memory", "on-disk"])
def test_a_file_rewritten_with_its_size_and_mtime_is_indexed_again(tmp_path, monkeypatch, large, persist):
    """The cached index of a file is not reused for a same-size rewrite whose mtime was set back: the
    second line's answer (it shares the first line's dialogue, so pass 2 never re-reads it) is the new one.
    A small file is caught by its content; a change in the middle of a large one by its change time."""
    monkeypatch.setattr(index, "_INDEX_CACHE", {})
    monkeypatch.setattr(index, "INDEX_STORE", str(tmp_path / "store"))
    monkeypatch.setattr(index, "PERSIST_INDEX_BYTES", 0 if persist else 1 << 60)
    dialogue = DIALOGUE_A
    if large:
        dialogue = [*DIALOGUE_A, session(3, ("user", "Я люблю длинные истории. " * 4000))]  # ~200 KB a line
    rows = [
        line(1, "no_info", dialogue, [1]),
        line(2, "no_info", dialogue, [1], ans="Иван"),
        line(3, "no_info", DIALOGUE_B, []),
    ]
    path = write_jsonl(tmp_path / "r.jsonl", rows)
    if large:
        offset = path.read_bytes().index('"ans": "Иван"'.encode(), path.read_bytes().index(b"\n"))
        assert 2**16 < offset < path.stat().st_size - 2**16  # outside the sampled ends

    def answers() -> list:
        if persist:
            index._INDEX_CACHE.clear()  # a new process: only the index on disk is left
        file_index = index.cached_index(path)
        records = [
            r for shard in index.plan_shards(file_index, 1 << 30) for r in parse.parse_shard(shard, Notes())
        ]
        return [q["answer"] for r in records for q in r["questions"]]

    assert answers() == ["Иван", "Иван", "Иван"]
    if persist:
        assert len(list((tmp_path / "store").glob("*.json"))) == 1
    time.sleep(0.05)  # past a coarse filesystem clock, so the rewrite gets a new change time
    line_two = json.dumps(rows[1], ensure_ascii=False).encode()
    _rewrite_keeping_size_and_mtime(path, line_two, line_two.replace("Иван".encode(), "Пётр".encode()))
    assert answers() == ["Иван", "Пётр", "Иван"]
    assert index.VERSION_SAMPLE_BYTES <= 2**16


def test_several_shards_of_a_gz_give_the_same_records_as_one(tmp_path):
    dialogues = [[session(n, ("user", f"Факт номер {n}."), ("assistant", "Запомнил."))] for n in range(7)]
    rows = [line(n, "fact_equal_session", dialogues[n % 7], [n % 7]) for n in range(12)]
    path = write_jsonl(tmp_path / "many.jsonl.gz", rows, gz=True)
    whole, _ = parse_path(path)
    file_index = index.index_file(path)
    shards = index.plan_shards(file_index, shard_bytes=1)
    assert len(shards) == 7
    pieces = [record for shard in shards for record in parse.parse_shard(shard, Notes())]
    assert pieces == whole
    assert [len(record["questions"]) for record in whole] == [2, 2, 2, 2, 2, 1, 1]


def test_build_with_two_processes_matches_one(tmp_path, monkeypatch):
    dialogues = [[session(n, ("user", f"Мне {20 + n} лет."), ("assistant", "Понял."))] for n in range(4)]
    (tmp_path / "data").mkdir()
    write_jsonl(
        tmp_path / "data" / "x.jsonl", [line(n, "info_updating", dialogues[n % 4], [n % 4]) for n in range(8)]
    )
    monkeypatch.setattr(GigamemoryBuilder, "SHARD_BYTES", 1)
    one = build_source(
        "gigamemory", tmp_path / "one", data_dir=str(tmp_path / "data"), configs=["sessions", "qa"]
    )
    two = build_source(
        "gigamemory",
        tmp_path / "two",
        data_dir=str(tmp_path / "data"),
        configs=["sessions", "qa"],
        num_proc=2,
    )
    for config in ("sessions", "qa"):
        first = datasets.load_dataset(str(one.output), config, split="test")
        second = datasets.load_dataset(str(two.output), config, split="test")
        assert sorted(first["conversation_id"]) == sorted(second["conversation_id"])
        assert first.num_rows == second.num_rows == {"sessions": 4, "qa": 8}[config]


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
        index.index_file(path)


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
        index.index_file(path)


@pytest.mark.parametrize("content", [b"", b"\n\n"])
def test_empty_file_is_a_clear_error(tmp_path, content):
    path = tmp_path / "empty.jsonl"
    path.write_bytes(content)
    with pytest.raises(SourceError, match="no records: the file is empty"):
        index.index_file(path)


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
    with pytest.raises(FileNotFoundError, match=r"no GigaMemory \*\.jsonl"):
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
    from convhub.gigamemory import builder

    assert builder.URL.endswith("ai-forever/memory_aij2025/main/data/format_example.jsonl")
    assert read.subset_of(builder.URL) == "format_example"


def test_a_stream_indexes_with_the_cores_and_a_build_with_its_num_proc(tmp_path, monkeypatch):
    """Pass 1 parses every distinct dialogue before row one: a stream, which has no num_proc, runs it in
    the cores' processes (up to STREAM_INDEX_PROCESSES); a build in its own num_proc."""
    (tmp_path / "data").mkdir()
    write_jsonl(tmp_path / "data" / "s.jsonl", [line(1, "no_info", DIALOGUE_A, [1])])
    asked = []
    real_cached_index = index.cached_index
    monkeypatch.setattr(
        index, "cached_index", lambda *args: asked.append(args[2]) or real_cached_index(*args)
    )
    # (a stream replaces the builder module's ``os`` with datasets' patched copy: cpu_count cannot be faked)
    monkeypatch.setattr(GigamemoryBuilder, "STREAM_INDEX_PROCESSES", 3)
    builder = GigamemoryBuilder(config_name="sessions", data_dir=str(tmp_path / "data"))
    rows = [row for dataset in builder.as_streaming_dataset().values() for row in dataset]
    assert [row["questions"][0]["question_id"] for row in rows] == ["1"]
    assert asked == [min(os.cpu_count() or 1, 3)]
    asked.clear()
    build_source(
        "gigamemory", tmp_path / "out", data_dir=str(tmp_path / "data"), configs=["sessions"], num_proc=1
    )
    assert asked and set(asked) == {1}


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
