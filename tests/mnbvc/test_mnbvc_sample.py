"""The packaged sample (``builders/mnbvc/sample``: one gzipped multi-turn shard, one with CRLF endings, a 问答
and a 论坛 shard): every quirk of SOURCES.md, nothing lost, the build, the card and the CLI."""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import datetime

import datasets
import numpy as np
import pytest

from convhub.build import build_source, check_source
from convhub.builders.mnbvc import export
from convhub.builders.mnbvc import language as languages
from convhub.builders.mnbvc.builder import MnbvcBuilder
from convhub.cli import main as cli
from convhub.errors import SourceError
from tests.mnbvc.mnbvc_rows import (
    SAMPLE,
    by_id,
    pair,
    partition,
    questions,
    records,
    source_rows,
    spread_fixture,
    write_shard,
)

# -- the packaged sample: nothing lost, the build, the card, the CLI -----------------------------------------


SAMPLE_NOTES = {
    "multi-turn conversation spread over several files": 3,
    "multi-turn row with an empty or missing 会话 (grouped by id)": 3,
    "multi-turn conversation with a duplicate 多轮序号 (all rows kept)": 1,
    "multi-turn conversation with a gap in 多轮序号": 1,
    "元数据.扩展字段: unquoted values": 5,
    "元数据.扩展字段: empty values": 2,
    "元数据.扩展字段 unreadable (raw string kept)": 1,
    "回复.扩展字段 unreadable (raw string kept)": 1,
    "empty 答 (question with no answer: no assistant turn)": 2,
    "时间 before year 1 (BC) or after 9999 (timestamp null, raw kept)": 1,
    "时间 absent (session date_time from create_time)": 1,
    "时间 absent (session date_time from 发帖时间)": 1,
    "forum thread with an empty 主题 (kept as an empty topic turn)": 1,
    "conversation detected as en, not zh": 1,
    "conversation detected as ja, not zh": 1,
}


def test_sample_covers_every_quirk():
    notes, statistics = check_source("mnbvc", str(SAMPLE))
    for kind, count in SAMPLE_NOTES.items():
        assert notes[kind] == count, kind
    subsets = {subset for _, subset in statistics.by_split_subset}
    assert subsets == {"multiturn/ShareGPT", "qa/wikihow", "qa/古籍问答", "forum/北大树洞", "forum/清华树洞"}
    raw = (SAMPLE / "multiturn/sharegpt-0002.jsonl").read_bytes()
    assert raw.count(b"\r\n") == raw.count(b"\n") > 0
    assert (SAMPLE / "multiturn/sharegpt-0001.jsonl.gz").read_bytes()[:2] == b"\x1f\x8b"


def test_every_sample_row_rebuilds_exactly_from_the_built_sessions(sample_builds):
    result = sample_builds["mnbvc"]
    sessions = datasets.load_dataset(str(result.output), "sessions", split="train")
    rebuilt = {}
    for record in sessions:
        for file, line, row in export.rows_from_record(record):
            assert (file, line) not in rebuilt
            rebuilt[(file, line)] = row
    original = source_rows(SAMPLE)
    assert rebuilt.keys() == original.keys()
    for key, row in original.items():
        assert json.dumps(rebuilt[key], ensure_ascii=False) == json.dumps(row, ensure_ascii=False), key


def test_sample_build_counts_timestamps_and_configs(sample_builds):
    result = sample_builds["mnbvc"]
    assert set(result.configs) == {"sessions", "turns", "messages"}  # no memory questions: no qa config
    sessions = datasets.load_dataset(str(result.output), "sessions", split="train")
    assert sessions.num_rows == 15
    found = {row["conversation_id"]: row for row in sessions}
    assert found["qa/wikihow-and-classics.jsonl:3"]["sessions"][0]["timestamp"] == datetime(738, 3, 3)
    assert found["qa/wikihow-and-classics.jsonl:2"]["sessions"][0]["timestamp"] is None
    assert found["qa/wikihow-and-classics.jsonl:2"]["sessions"][0]["date_time"] == "-04790101"
    assert questions(found["ShareGPT/1"]) == [
        "长城是什么时候开始修建的？",
        "用一句话介绍一下长城。",
        "那它有多长？",
    ]
    messages = datasets.load_dataset(str(result.output), "messages", split="train")
    assert all(
        message["content"] or message["role"] == "user" for row in messages for message in row["messages"]
    )
    card = (result.output / "README.md").read_text()
    assert "MNBVC in this schema" in card
    assert "| multi-turn conversation with a gap in 多轮序号 | 1 |" in card
    assert "回复 by anyone else | `assistant`" in card


@pytest.mark.slow
def test_build_with_two_processes_equals_one(tmp_path, monkeypatch):
    monkeypatch.setattr(MnbvcBuilder, "PARTITION_BYTES", 2000, raising=False)
    one = build_source("mnbvc", tmp_path / "one", str(SAMPLE), ["sessions"], num_proc=1)
    two = build_source("mnbvc", tmp_path / "two", str(SAMPLE), ["sessions"], num_proc=2)
    assert len(two.configs["sessions"].files["train"]) == 2  # one Parquet file per process
    load = lambda result: datasets.load_dataset(str(result.output), "sessions", split="train")  # noqa: E731
    assert list(load(one)) == list(load(two))  # the same rows in the same order
    assert one.notes == two.notes


def test_cli_check_and_build_with_format_and_subset(tmp_path, capsys):
    assert cli.main(["check", "mnbvc", "--sample", "--subset", "forum"]) == 0
    printed = capsys.readouterr().out
    assert "forum/北大树洞" in printed and "multiturn/ShareGPT" not in printed
    write_shard(tmp_path / "data/m.jsonl", [pair("a", 1, "一"), pair("a", 2, "二")])
    output = tmp_path / "out"
    args = ["build", "mnbvc", "--data-dir", str(tmp_path / "data"), "--output", str(output), "--format", "qa"]
    assert cli.main(args) == 0
    built = datasets.load_dataset(str(output), "sessions", split="train")
    assert built["subset"] == ["qa/ShareGPT", "qa/ShareGPT"]


def test_partitions_are_removed_after_check(tmp_path, monkeypatch):
    monkeypatch.setenv("CONVHUB_TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    records(spread_fixture(tmp_path / "data"))
    leftovers = [path for path in (tmp_path / "tmp").rglob("*") if path.is_file()]
    assert leftovers == []


#: The four scripts as patterns: the specification that detect_language's table lookup must match.
CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
KANA = re.compile(r"[\u3040-\u30ff]+")
HANGUL = re.compile(r"[\uac00-\ud7af]+")
LATIN_WORD = re.compile(r"[A-Za-z]+")


def script_counts(sample: str) -> tuple[int, int, int, int]:
    """Kana, Hangul and CJK characters and Latin words of ``sample``, counted as detect_language counts them."""
    classes = languages._script_classes(sample)
    counts = np.bincount(classes, minlength=5)
    kinds = (languages._KANA, languages._HANGUL, languages._CJK)
    return (*(int(counts[kind]) for kind in kinds), languages._latin_words(classes))


def test_script_counts_are_the_regex_counts():
    """detect_language counts scripts with numpy; the counts are those of the patterns."""
    import random

    def regex_counts(sample: str) -> tuple[int, ...]:
        return (
            *(sum(map(len, s.findall(sample))) for s in (KANA, HANGUL, CJK)),
            len(LATIN_WORD.findall(sample)),
        )

    rng = random.Random(0)
    alphabet = "abcXYZ 123,。的一是あいアイ한국어\ud800\U0001f600ＡＢ\u3400\uf900\u4dbf\u9fff\u30ff\u3040@[`{"
    for _ in range(3000):
        sample = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        assert script_counts(sample) == regex_counts(sample)


def test_detect_language_decides_as_its_rule_on_every_count():
    """detect_language counts Latin words only when they can decide; its answer is the rule's on the full
    counts (samples from mostly-Latin to mostly-Hangul, so each branch is taken)."""
    import random

    def by_the_rule(text: str) -> str:
        kana, hangul, cjk, latin_words = script_counts(text[: languages.LANGUAGE_SAMPLE_CHARS])
        if kana and kana * 5 >= cjk:
            return "ja"
        if hangul > cjk and hangul >= latin_words:
            return "ko"
        return "en" if latin_words > cjk else "zh"

    rng = random.Random(1)
    pieces = ["ab", "a b", "X", " ", "的", "一是", "あ", "한국", "\U0001f600", "\ud800", "1", "。"]
    seen = Counter()
    for _ in range(3000):
        weights = [rng.random() for _ in pieces]
        text = "".join(rng.choices(pieces, weights, k=rng.randint(0, 30)))
        seen[languages.detect_language([text])] += 1
        assert languages.detect_language([text]) == by_the_rule(text)
    assert set(seen) == {"zh", "en", "ja", "ko"}


def test_conversation_ids_are_unambiguous_where_parts_hold_separators(tmp_path):
    """Joined as they were, each pair below gave one id: the second conversation was called a duplicate."""
    write_shard(
        tmp_path / "data" / "m.jsonl",
        [
            pair("c", 1, "甲", source="a/b"),
            pair("b/c", 1, "乙", source="a"),
            pair("id:md5-a", 1, "丙"),
            pair(None, 1, "丁", row_id="md5-a", extension="{}"),
            pair("x%2Fy", 1, "戊", source="s"),
            pair("x/y", 1, "己", source="s"),
        ],
    )
    found = by_id(records(tmp_path / "data"))
    assert len(found) == 6
    assert questions(found["a%2Fb/c"]) == ["甲"]
    assert questions(found["a/b/c"]) == ["乙"]
    assert questions(found["ShareGPT/id%3Amd5-a"]) == ["丙"]
    assert questions(found["ShareGPT/id:md5-a"]) == ["丁"]
    assert questions(found["s/x%252Fy"]) == ["戊"]
    assert questions(found["s/x/y"]) == ["己"]
    result = build_source("mnbvc", tmp_path / "out", data_dir=str(tmp_path / "data"), on_bad_record="skip")
    assert result.skipped == 0


def test_symlink_loops_read_each_file_once_and_finish(tmp_path):
    data = tmp_path / "data"
    write_shard(data / "a" / "m.jsonl", [pair("c1", 1, "甲"), pair("c1", 2, "乙"), pair("c2", 1, "丙")])
    (data / "a" / "back").symlink_to(data)  # a loop: data/a/back/a/back/...
    (data / "b").symlink_to(data / "a")  # the same file under a second name
    (data / "b" / "deeper").symlink_to(data / "b")  # and a second loop
    found = records(data)
    assert sorted(record["conversation_id"] for record in found) == ["ShareGPT/c1", "ShareGPT/c2"]
    assert sum(len(record["sessions"][0]["turns"]) for record in found) == 6


def test_regrouping_a_json_document_is_one_error_naming_the_file(tmp_path):
    """The multi-turn regrouping reads files itself: a JSON document there is the same one error naming
    the file, not "not valid JSON" at its line 1."""
    shard = tmp_path / "m.jsonl"
    shard.write_text(json.dumps([pair("c", n, f"q{n}") for n in (1, 2)], ensure_ascii=False, indent=1))
    with pytest.raises(SourceError) as raised:
        partition([("m.jsonl", str(shard))], str(tmp_path), 1)
    assert raised.value.path == "m.jsonl" and raised.value.record is None
    assert raised.value.problem.startswith("this is one JSON document, not JSON Lines: its first line '['")
