"""GigaMemory's pass 1: lines grouped by dialogue, ids, the cut and mapped reads against a whole-line read, the
index in several processes, the index kept on disk per file version, and shards.
"""

from __future__ import annotations

import gzip
import hashlib
import json

import datasets
import pytest
from gigamemory_lines import (
    DIALOGUE_A,
    DIALOGUE_B,
    assert_round_trip,
    line,
    parse_path,
    session,
    write_jsonl,
)

from builders.gigamemory import cut, index, parse, read, scan
from builders.gigamemory.builder import GigamemoryBuilder
from convhub.engine import jsonio
from convhub.engine.build import build_source
from convhub.errors import Notes, SourceError

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
    # orjson's reads in jsonio (decode_line), cut (a span) and parse (pass 2), the float check in read
    for module in (cut, scan):
        monkeypatch.setattr(module, "split_line", lambda *args: None)
    for module in (jsonio, cut, parse):
        monkeypatch.setattr(module, "orjson_exact", lambda raw: jsonio.INEXACT)
    monkeypatch.setattr(read, "holds_float", lambda value: True)  # json.dumps for every digest
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
