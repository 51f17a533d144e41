"""GigaMemory's pass 1: lines grouped by dialogue, ids, values read as json reads them, a plain file and its
``.gz`` indexed alike, and the shards of pass 2.
"""

from __future__ import annotations

import gzip
import hashlib
import json

import datasets
import pytest

from convhub.build import build_source
from convhub.builders.gigamemory import builder
from convhub.builders.gigamemory.builder import GigamemoryBuilder
from convhub.builders.gigamemory.line_groups import canonical_digest
from convhub.errors import Notes, SourceError
from tests.gigamemory.gigamemory_lines import (
    DIALOGUE_A,
    DIALOGUE_B,
    assert_round_trip,
    line,
    parse_path,
    session,
    shards_of,
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
    digest = canonical_digest(DIALOGUE_A)
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
    file_groups, _ = builder.index_file(str(path))
    assert len(file_groups) == 1 and len(file_groups[0].kept) == 2
    assert all(item.fields["sessions"] is None for item in file_groups[0].kept)


def tricky_lines() -> list[bytes]:
    """Lines whose text mimics a line's structure, or whose values orjson reads or prints differently from json."""
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


def test_tricky_lines_index_and_parse_as_json_reads_them(tmp_path):
    """Same dialogue, same conversation, whatever the text holds or how it is escaped; floats, integers beyond 64
    bits and NaN read as json reads them; the last of two ``sessions`` keys wins."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join(tricky_lines()) + b"\n")
    rejected = []

    def reject(error, raw, scope="record"):
        rejected.append(str(error))

    notes = Notes()
    shards = shards_of(path, reject=reject)
    records = [r for shard in shards for r in builder.parse_shard(shard, notes, reject)]
    file_groups = [group for shard in shards for group in shard["groups"]]
    assert [[q["question_id"] for q in r["questions"]] for r in records] == [
        ["1", "2", "8"],
        ["3"],
        ["4"],
        ["5", "9", "12"],
        ["7"],
    ]
    assert [x.number for x in file_groups[3].kept] == [5, 6, 9, 10, 12]  # the last "sessions" key wins
    assert [error.split(", ")[1] for error in rejected] == [
        "record 6 at line 6",
        "record 10 at line 10",
        "record 11 at line 11",
    ]
    assert rejected[2].endswith("expected a string, got float")  # NaN, read by json
    assert json.loads(records[1]["questions"][0]["extra"])["ans"] == 2**70
    floats = json.loads(tricky_lines()[2])["sessions"]
    canonical = json.dumps(floats, ensure_ascii=False, separators=(",", ":")).encode()
    assert file_groups[1].key == hashlib.sha256(canonical).hexdigest()


def _index_figures(path, reject=lambda *args, **kwargs: None) -> tuple:
    file_groups, notes = builder.index_file(str(path), reject=reject)
    figures = [(g.key, g.spot, [(x.number, x.fields) for x in g.kept]) for g in file_groups]
    return figures, dict(notes)


def test_bad_lines_are_rejected_in_file_order_and_the_others_grouped(tmp_path):
    """Blank lines, a byte-order mark, CRLF, a line that is not JSON, one without sessions, a duplicate id at the
    end of a file with no last newline: each bad line rejected with its bytes, the good ones grouped."""
    dialogues = [[session(n, ("user", f"Факт номер {n}."), ("assistant", "Запомнил."))] for n in range(5)]
    rows = [line(n, "fact_equal_session", dialogues[n % 5], [n % 5]) for n in range(40)]
    with_float = [{**session(7, ("user", "Мне 2.5 года.")), "age": 2.5}]
    rows[3:3] = [line(n, "info_updating", with_float, [7]) for n in (40, 41)]
    path = write_jsonl(tmp_path / "w.jsonl", rows, newline="\r\n")
    raw = path.read_bytes().replace(b"\r\n", b"\r\n\r\n", 3)
    bad = json.dumps(line(99, "no_info", dialogues[0], [])).encode().replace(b'"sessions"', b'"x"')
    last = raw.splitlines()[-1]  # line 39 again: a duplicate id, with no newline at the end of the file
    path.write_bytes(b"\xef\xbb\xbf" + raw + b"not json\r\n" + bad + b"\r\n" + last)
    rejected = []
    figures, notes = _index_figures(
        path, lambda error, raw, scope="record": rejected.append((str(error), raw))
    )
    assert [(error.split(": ", 1)[1][:14], raw) for error, raw in rejected] == [
        ("not valid JSON", b"not json"),
        ("missing", bad),
        ("duplicate id '", last),
    ]
    assert [len(lines) for *_, lines in figures] == [8, 8, 8, 2, 8, 8]
    assert notes["blank line (skipped)"] == 3
    assert notes["UTF-8 byte-order mark at the start of a file (skipped)"] == 1


def test_a_plain_file_and_its_gz_index_alike(tmp_path):
    """A ``.gz`` of the same bytes gives the same groups, at the same (uncompressed) offsets; dialogues of one
    length and the same first and last bytes, differing only inside, stay apart."""
    twins = [[session(1, ("user", f"Я родился в {year} году, это точно."))] for year in (1990, 1991)]
    rows = [line(n, "no_info", [DIALOGUE_A, DIALOGUE_B, *twins][n % 4], [1]) for n in range(12)]
    path = write_jsonl(tmp_path / "m.jsonl", rows, newline="\r\n")
    text = path.read_bytes().replace(b"\r\n", b"\r\n" + b" " * 80 + b"\r\n", 1)  # a long blank line
    path.write_bytes(b"\xef\xbb\xbf" + text + b"not json")
    packed = tmp_path / "m.jsonl.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))

    def index_of(source) -> tuple:
        rejected = []
        figures = _index_figures(
            source, lambda error, raw, scope="record": rejected.append((str(error), raw))
        )
        return figures, [(error.split(": ", 1)[1], raw) for error, raw in rejected]

    plain, packed_index = index_of(path), index_of(packed)
    assert plain == packed_index
    (figures, notes), rejected = plain
    assert [[number for number, *_ in lines] for *_, lines in figures] == [
        [1, 6, 10],
        [3, 7, 11],
        [4, 8, 12],
        [5, 9, 13],
    ]
    assert notes["blank line (skipped)"] == 1
    assert notes["UTF-8 byte-order mark at the start of a file (skipped)"] == 1
    assert rejected == [(rejected[0][0], b"not json")] and rejected[0][0].startswith("not valid JSON")


def test_a_file_changed_between_the_passes_is_refused(tmp_path):
    path = write_jsonl(
        tmp_path / "c.jsonl", [line(1, "no_info", DIALOGUE_A, [1]), line(2, "no_info", DIALOGUE_B, [])]
    )
    [shard] = shards_of(path)
    path.write_bytes(path.read_bytes().replace("Иван".encode(), "Пётр".encode()))
    with pytest.raises(SourceError, match="changed while it was being converted"):
        list(builder.parse_shard(shard, Notes()))


def test_several_shards_of_a_gz_give_the_same_records_as_one(tmp_path):
    dialogues = [[session(n, ("user", f"Факт номер {n}."), ("assistant", "Запомнил."))] for n in range(7)]
    rows = [line(n, "fact_equal_session", dialogues[n % 7], [n % 7]) for n in range(12)]
    path = write_jsonl(tmp_path / "many.jsonl.gz", rows, gz=True)
    whole, _ = parse_path(path)
    shards = shards_of(path, shard_bytes=1)
    assert len(shards) == 7
    pieces = [record for shard in shards for record in builder.parse_shard(shard, Notes())]
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
