"""GigaMemory pass 1 (the group-by of lines by dialogue) and pass 2's shards: same records however a file is
read, cut or sharded; linear work; a file changed under the build refused or rebuilt."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from pathlib import Path

import datasets
import pytest
from convhub.build import build_source
from convhub.errors import Notes, SourceError
from convhub.gigamemory import index, parse
from convhub.gigamemory.builder import GigamemoryBuilder
from gigamemory_fixtures import (
    DIALOGUE_A,
    DIALOGUE_B,
    assert_round_trip,
    line,
    parse_path,
    session,
    write_jsonl,
)

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
    digest = index.dialogue_digest(DIALOGUE_A)
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
    found = index.index_file(path)
    assert len(found.groups) == 1 and len(found.groups[0].lines) == 2
    assert all("sessions" not in item.fields for item in found.groups[0].lines)


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
        found = index.index_file(path, reject)
        notes = Notes()
        shards = index.plan_shards(found, 1 << 30)
        records = [r for shard in shards for r in parse.parse_shard(shard, notes, reject)]
        figures = [
            (g.digest, g.offset, g.length, [(x.number, x.fields, x.keys) for x in g.lines])
            for g in found.groups
        ]
        return figures, records, dict(notes), list(rejected)

    cut = parsed()
    spans = {group.lines[0].number: group.span for group in index.index_file(path, reject).groups}
    assert [number for number, span in spans.items() if span is not None] == [1, 4, 7]
    rejected.clear()
    monkeypatch.setattr(index, "_split_line", lambda *args: None)
    monkeypatch.setattr(index, "_exact_loads", lambda raw: index._INEXACT)
    monkeypatch.setattr(index, "_float_free", lambda value: False)  # json.dumps for every digest
    whole = parsed()
    assert cut == whole
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


def _index_figures(found) -> tuple:
    groups = [
        (g.digest, g.offset, g.length, g.line_sha256, g.span, [(x.number, x.fields, x.keys) for x in g.lines])
        for g in found.groups
    ]
    return groups, dict(found.notes), found.rejected


def test_index_of_a_plain_file_with_every_oddity_is_the_index_of_its_gz(tmp_path):
    """A blank line, a byte-order mark, CRLF, bad lines and no last newline: the same groups, lines, notes
    and rejections, in order, whether the bytes are read plain or decompressed. (This compared pass 1 in
    worker processes with pass 1 in one, before pass 1 went back to one process: see the report of #17.)"""
    dialogues = [[session(n, ("user", f"Факт номер {n}."), ("assistant", "Запомнил."))] for n in range(5)]
    rows = [line(n, "fact_equal_session", dialogues[n % 5], [n % 5]) for n in range(40)]
    with_float = [{**session(7, ("user", "Мне 2.5 года.")), "age": 2.5}]  # not cut: parsed whole by json
    rows[3:3] = [line(n, "info_updating", with_float, [7]) for n in (40, 41)]
    path = write_jsonl(tmp_path / "w.jsonl", rows, newline="\r\n")
    raw = path.read_bytes().replace(b"\r\n", b"\r\n\r\n", 3)  # a blank line, BOM, a bad line, no last newline
    bad = json.dumps(line(99, "no_info", dialogues[0], [])).encode().replace(b'"sessions"', b'"x"')
    last = raw.splitlines()[-1]  # line 39 again: a duplicate id, with no newline at the end of the file
    path.write_bytes(b"\xef\xbb\xbf" + raw + b"not json\r\n" + bad + b"\r\n" + last)
    packed = tmp_path / "w.jsonl.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))

    def indexed(source) -> tuple:
        rejected = []
        found = index.index_file(
            source, lambda error, raw, scope="record": rejected.append((str(error), raw))
        )
        return _index_figures(found), rejected

    one = indexed(path)
    assert [error.split(": ", 1)[1][:14] for error, _ in one[1]] == [
        "not valid JSON",
        "missing",
        "duplicate id '",
    ]
    assert [len(g.lines) for g in index.index_file(path, lambda *a, **k: None).groups] == [8, 8, 8, 2, 8, 8]
    read = indexed(packed)
    assert read[0] == one[0] and [raw for _, raw in read[1]] == [raw for _, raw in one[1]]
    assert [error.split(": ", 1)[1] for error, _ in read[1]] == [
        error.split(": ", 1)[1] for error, _ in one[1]
    ]
    assert index.index_file(packed, lambda *a, **k: None).notes["blank line (skipped)"] == 3


def test_plain_index_is_the_index_of_the_gz(tmp_path, monkeypatch):
    """A plain file and a .gz of the same bytes give the same index, each distinct dialogue parsed and
    digested once (a dialogue seen again is known by its bytes' sha256). Spans of one length and the same
    first and last bytes, differing only inside, stay apart."""
    twins = [[session(1, ("user", f"Я родился в {year} году, это точно."))] for year in (1990, 1991)]
    rows = [line(n, "no_info", [DIALOGUE_A, DIALOGUE_B, *twins][n % 4], [1]) for n in range(12)]
    path = write_jsonl(tmp_path / "m.jsonl", rows, newline="\r\n")
    text = path.read_bytes().replace(b"\r\n", b"\r\n" + b" " * 80 + b"\r\n", 1)  # a long blank line
    path.write_bytes(b"\xef\xbb\xbf" + text + b"not json")
    packed = tmp_path / "m.jsonl.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    digested = []
    real_digest = index.dialogue_digest
    monkeypatch.setattr(index, "dialogue_digest", lambda value: digested.append(1) or real_digest(value))

    def indexed(source) -> tuple:
        rejected = []
        found = index.index_file(
            source, lambda error, raw, scope="record": rejected.append((str(error), raw))
        )
        return _index_figures(found), [(error.split(": ", 1)[1], raw) for error, raw in rejected]

    mapped = indexed(path)
    assert len(digested) == 4  # 12 lines, 4 dialogues
    read = indexed(packed)
    assert len(digested) == 8
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


def test_spans_sharing_their_length_and_ends_are_told_apart_in_linear_work(tmp_path, monkeypatch):
    """Many distinct dialogues of one length and the same first and last bytes cost each line one sha256
    of its dialogue's bytes and a dictionary look-up, and each distinct dialogue one parse, never a
    comparison with every earlier dialogue (that was quadratic: 4,000 such lines took a minute); copies
    still join the first line of their dialogue."""
    distinct = 150
    dialogues = [[session(1, ("user", f"Мне {n:04d} лет, и это правда."))] for n in range(distinct)]
    order = [n for n in range(distinct)] + [n for n in range(0, distinct, 3)]  # 50 copies, after all
    path = write_jsonl(
        tmp_path / "k.jsonl", [line(i, "no_info", dialogues[n], [1]) for i, n in enumerate(order)]
    )
    parsed, hashed = [], []
    real_digest, real_sha256 = index.dialogue_digest, index.hashlib.sha256

    class CountingHashlib:
        @staticmethod
        def sha256(data=b""):
            hashed.append(len(data))
            return real_sha256(data)

    monkeypatch.setattr(index, "dialogue_digest", lambda value: parsed.append(1) or real_digest(value))
    monkeypatch.setattr(index, "hashlib", CountingHashlib)
    found = index.index_file(path)
    lines = len(order)
    assert len(parsed) == distinct  # a copy costs no parse
    # a sha256 of each line's dialogue bytes; of each distinct dialogue's canonical JSON and first line
    # (pass 2 checks it re-reads that very line)
    assert len(hashed) == lines + 2 * distinct
    assert sum(hashed) <= 2 * path.stat().st_size
    assert [[x.number for x in g.lines] for g in found.groups] == [
        [n + 1, *([distinct + n // 3 + 1] if n % 3 == 0 else [])] for n in range(distinct)
    ]
    packed = tmp_path / "k.jsonl.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    assert _index_figures(index.index_file(packed)) == _index_figures(found)


def test_a_file_changed_between_the_passes_is_refused(tmp_path):
    path = write_jsonl(
        tmp_path / "c.jsonl", [line(1, "no_info", DIALOGUE_A, [1]), line(2, "no_info", DIALOGUE_B, [])]
    )
    found = index.index_file(path)
    path.write_bytes(path.read_bytes().replace("Иван".encode(), "Пётр".encode()))
    with pytest.raises(SourceError, match="changed while it was being converted"):
        list(parse.parse_shard(index.plan_shards(found, 1 << 30)[0], Notes()))


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


@pytest.mark.parametrize("large", [False, True], ids=["small-file", "change-past-the-file-ends"])
def test_a_file_rewritten_with_its_size_and_mtime_builds_the_new_content(tmp_path, large):
    """A same-size rewrite in place whose mtime was set back is built with its new content: the second
    line's answer (it shares the first line's dialogue, so pass 2 never re-reads it) is the new one. (This
    checked the cached index, which is gone: no build reuses another's pass 1.)"""
    dialogue = DIALOGUE_A
    if large:
        dialogue = [*DIALOGUE_A, session(3, ("user", "Я люблю длинные истории. " * 4000))]  # ~200 KB a line
    rows = [
        line(1, "no_info", dialogue, [1]),
        line(2, "no_info", dialogue, [1], ans="Иван"),
        line(3, "no_info", DIALOGUE_B, []),
    ]
    (tmp_path / "data").mkdir()
    path = write_jsonl(tmp_path / "data" / "r.jsonl", rows)
    if large:
        offset = path.read_bytes().index('"ans": "Иван"'.encode(), path.read_bytes().index(b"\n"))
        assert 2**16 < offset < path.stat().st_size - 2**16  # far from both ends of the file

    def answers(build: str) -> list:
        output = build_source("gigamemory", tmp_path / build, data_dir=str(tmp_path / "data"), configs=["qa"])
        return datasets.load_dataset(str(output.output), "qa", split="test")["answer"]

    assert answers("first") == ["Иван", "Иван", "Иван"]
    line_two = json.dumps(rows[1], ensure_ascii=False).encode()
    _rewrite_keeping_size_and_mtime(path, line_two, line_two.replace("Иван".encode(), "Пётр".encode()))
    assert answers("second") == ["Иван", "Пётр", "Иван"]


def test_several_shards_of_a_gz_give_the_same_records_as_one(tmp_path):
    dialogues = [[session(n, ("user", f"Факт номер {n}."), ("assistant", "Запомнил."))] for n in range(7)]
    rows = [line(n, "fact_equal_session", dialogues[n % 7], [n % 7]) for n in range(12)]
    path = write_jsonl(tmp_path / "many.jsonl.gz", rows, gz=True)
    whole, _ = parse_path(path)
    shards = index.plan_shards(index.index_file(path), shard_bytes=1)
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


def test_a_stream_and_a_build_index_each_file_once(tmp_path, monkeypatch):
    """Pass 1 reads every file before row one, once per stream or build. (This checked that pass 1 ran in
    the cores' processes for a stream and in num_proc for a build; one process is as fast on the
    benchmark's input: see the report of #17.)"""
    (tmp_path / "data").mkdir()
    write_jsonl(tmp_path / "data" / "s.jsonl", [line(1, "no_info", DIALOGUE_A, [1])])
    indexed = []
    real_index_file = index.index_file
    monkeypatch.setattr(index, "index_file", lambda *args: indexed.append(args[0]) or real_index_file(*args))
    builder = GigamemoryBuilder(config_name="sessions", data_dir=str(tmp_path / "data"))
    rows = [row for dataset in builder.as_streaming_dataset().values() for row in dataset]
    assert [row["questions"][0]["question_id"] for row in rows] == ["1"]
    assert len(indexed) == 1
    indexed.clear()
    build_source(
        "gigamemory", tmp_path / "out", data_dir=str(tmp_path / "data"), configs=["sessions"], num_proc=1
    )
    assert len(indexed) == 1
