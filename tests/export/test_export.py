"""``convhub export``: build → export → the source's own files again, equal as JSON values, types included.

This is the proof that the builders lose nothing: every real file in ../shared/data and every sample file
of every source is built with the real builder, written to Parquet, read back (from the folder, and from a
Hub repo through the Hub double) and exported; the export must equal the original as a JSON value, field
for field (``2022`` stays an integer, never ``"2022"`` or ``2022.0``). What does not come back byte for byte is
listed in ``BYTE_DIFFERENCES`` (and in each source's card) and each entry is asserted by a test below.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from convhub import registry
from convhub.builders.convlab.builder import DEFAULT_SUBSETS as CONVLAB_DATASETS
from convhub.export.exporter import differences
from convhub.storage.staging import MARKER
from tests.support.data_files import shared_data
from tests.support.export_checks import (
    LOCOMO_QUIRKS,
    assert_convlab_zip_equal,
    assert_equal_values,
    assert_jsonl_files_equal,
    build_and_export,
    content,
    export,
    jsonl_values,
    source_files,
    zip_json,
)

# -- the comparison itself --------------------------------------------------------------------------------


def test_differences_compare_types_not_only_values():
    assert differences({"a": 2022}, {"a": 2022}) == []
    assert differences({"b": 1, "a": [1, "x"]}, {"a": [1, "x"], "b": 1}) == []  # key order is no difference
    assert differences({"a": 2022}, {"a": "2022"}) == ['$.a: int 2022 != str "2022"']
    assert differences({"a": 2022}, {"a": 2022.0}) == ["$.a: int 2022 != float 2022.0"]
    assert differences([1], [True]) == ["$[0]: int 1 != bool true"]
    assert differences({"a": None}, {}) == ["$.a: missing from the export"]
    assert differences({}, {"a": None}) == ["$.a: not in the original"]
    assert differences([1, 2], [1]) == ["$: 2 items != 1 items"]
    assert differences(0.1 + 0.2, 0.3) == ["$: 0.30000000000000004 != 0.3"]


# -- LoCoMo -----------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_locomo_real_file_exports_equal_with_integer_answers(tmp_path):
    path = shared_data("locomo", "locomo10.json")
    exported = build_and_export("locomo", path, tmp_path) / "locomo10.json"
    assert sorted(p.name for p in exported.parent.iterdir()) == [MARKER, "locomo10.json"]
    original, rebuilt = json.loads(path.read_bytes()), json.loads(exported.read_bytes())
    assert_equal_values(original, rebuilt, "locomo10.json")
    answers = [
        qa["answer"] for sample in rebuilt for qa in sample["qa"] if not isinstance(qa.get("answer", ""), str)
    ]
    assert sorted(answers) == [2, 3, 2022, 2022, 2022, 2022] and {type(a) for a in answers} == {int}
    # the one byte difference named in BYTE_DIFFERENCES: key order (LoCoMo's file is json.dumps(indent=2))
    assert exported.read_bytes() != path.read_bytes()
    assert path.read_text() == json.dumps(original, indent=2)
    assert json.dumps(rebuilt, indent=2, sort_keys=True) == json.dumps(original, indent=2, sort_keys=True)


def test_locomo_quirks_export_equal(tmp_path):
    """img_url null or empty, several URLs, a session without date, dangling dates and summaries, an absent
    side table, unknown keys, a float answer of 17 digits and an integer adversarial answer all come back."""
    path = tmp_path / "quirks.json"
    path.write_text(json.dumps(LOCOMO_QUIRKS), encoding="utf-8")
    exported = build_and_export("locomo", path, tmp_path) / "quirks.json"
    rebuilt = json.loads(exported.read_bytes())
    assert_equal_values(LOCOMO_QUIRKS, rebuilt, "quirks.json")
    assert rebuilt[0]["qa"][0]["answer"] == 1.2345678901234567  # datasets' own Json decoding would round it
    assert "observation" not in rebuilt[0]


# -- GigaMemory -------------------------------------------------------------------------------------------


def test_gigamemory_real_file_exports_byte_for_byte(tmp_path):
    path = shared_data("gigamemory", "format_example.jsonl")
    exported = build_and_export("gigamemory", path.parent, tmp_path) / "format_example.jsonl"
    assert_jsonl_files_equal(path, exported)
    assert exported.read_bytes() == path.read_bytes()  # the public file has none of the byte differences
    ids = [type(value["id"]) for value in jsonl_values(exported).values()]
    assert ids == [int] * 4


def gigamemory_line(record_id, sessions, **fields):
    return {"id": record_id, "question": "Как меня зовут?", "ans": "Иван", "question_type": "no_info",
            "sessions": sessions, "ans_session_ids": [1], **fields}  # fmt: skip


def test_gigamemory_quirks_export_equal_and_the_byte_differences_are_the_listed_ones(tmp_path):
    dialogue = [{"id": 1, "messages": [{"role": "assistant", "content": "Добрый день!"}]}]
    other = [{"messages": [{"content": "x", "role": "user", "ts": 0.1 + 0.2}], "id": "s-1", "topic": None}]
    lines = [
        gigamemory_line(1, dialogue),
        gigamemory_line("2", other, ans=1.2345678901234567, extra_key={"k": [1, True]}),
        {"question": "ключи в другом порядке", "id": 3, "sessions": dialogue, "question_type": None},
    ]
    text = "\r\n".join(json.dumps(line, ensure_ascii=False) for line in lines)
    data_dir = tmp_path / "in"
    data_dir.mkdir()
    original = b"\xef\xbb\xbf" + text.replace("\r\n", "\r\n   \r\n", 1).encode() + b"\r\n"
    (data_dir / "quirks.jsonl.gz").write_bytes(gzip.compress(original))
    exported = build_and_export("gigamemory", data_dir, tmp_path / "out") / "quirks.jsonl.gz"
    assert_jsonl_files_equal(data_dir / "quirks.jsonl.gz", exported)
    assert exported.read_bytes()[:2] == b"\x1f\x8b"
    # BYTE_DIFFERENCES["gigamemory"], applied to the original, give the export exactly
    expected = original.removeprefix(b"\xef\xbb\xbf").replace(b"\r\n", b"\n").replace(b"\n   \n", b"\n\n")
    assert content(exported) == expected


#: Every name convhub's GigaMemory parser and export use for their own bookkeeping (extra keys, canonical
#: fields, format keys): as unknown keys of a source line, session or message they must come back as they were.
GIGAMEMORY_INTERNAL_NAMES = (
    "file", "line", "id", "ans", "ans_session_ids", "evidence_not_found", "key_order", "fields", "extra",
    "dialogue_sha256", "session_id", "turns", "speaker", "role", "text", "turn_id", "sessions", "messages",
    "content", "question", "question_type", "category", "answer",
)  # fmt: skip


def test_gigamemory_source_keys_named_like_convhub_bookkeeping_come_back(tmp_path):
    """Unknown keys are kept in their own container (``extra.fields``), apart from convhub's own entries
    of ``extra`` (file, line, raw id, key order...): a source key of any of those names, at any level and
    holding any value, cannot overwrite or be taken for one. Build, Parquet, export: every line equal."""

    def named_like_bookkeeping(standard):
        return {name: {"from the source": name} for name in GIGAMEMORY_INTERNAL_NAMES if name not in standard}

    message = {"role": "user", "content": "Привет", **named_like_bookkeeping(("role", "content"))}
    session = {"id": 7, "messages": [message], **named_like_bookkeeping(("id", "messages"))}
    line_keys = ("id", "question", "ans", "question_type", "sessions", "ans_session_ids")
    lines = [
        {**gigamemory_line(1, [session], ans=5, ans_session_ids=[7, 99]), **named_like_bookkeeping(line_keys)},
        gigamemory_line(2, [session], fields=None, key_order=["x"], file="other.jsonl", line=1, extra=[]),
        {"id": 3, "question": "?", "sessions": [{"id": "s", "messages": [{"role": "user", "content": "x",
         "key_order": 1, "fields": {}}], "key_order": [], "fields": []}]},
    ]  # fmt: skip
    data_dir = tmp_path / "in"
    data_dir.mkdir()
    original = data_dir / "names.jsonl"
    original.write_text(
        "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8"
    )
    exported = build_and_export("gigamemory", data_dir, tmp_path / "out") / "names.jsonl"
    assert_jsonl_files_equal(original, exported)
    assert exported.read_bytes() == original.read_bytes()


def test_gigamemory_sample_exports_byte_for_byte(sample_builds, tmp_path):
    sample = Path(registry.get("gigamemory").sample_dir())
    exported = export("gigamemory", sample_builds["gigamemory"].output, tmp_path / "export")
    assert [p.name for p in source_files(exported)] == [p.name for p in source_files(sample)]
    for path in source_files(sample):
        assert_jsonl_files_equal(path, exported / path.name)
        assert content(exported / path.name) == content(path)


def test_an_export_is_the_same_bytes_whenever_it_runs(sample_builds, tmp_path, monkeypatch):
    """A gzipped file's header holds a time: the export writes 0, so two exports of one build are equal files."""
    import time

    first = export("gigamemory", sample_builds["gigamemory"].output, tmp_path / "first")
    later = time.time() + 3600
    monkeypatch.setattr(time, "time", lambda: later)
    second = export("gigamemory", sample_builds["gigamemory"].output, tmp_path / "second")
    [gzipped] = [path for path in source_files(first) if path.name.endswith(".gz")]
    assert gzipped.read_bytes()[4:8] == b"\0\0\0\0"  # MTIME
    assert (second / gzipped.name).read_bytes() == gzipped.read_bytes()


# -- ConvLab ----------------------------------------------------------------------------------------------


CONVLAB_CONFIGS = ("sessions", "ontology", "database")


@pytest.mark.slow
def test_convlab_real_zips_export_equal(tmp_path):
    data_dir = shared_data("convlab")
    for name in ("camrest", "woz"):
        shared_data("convlab", name, "data.zip")
    exported = build_and_export(
        "convlab", data_dir, tmp_path, configs=CONVLAB_CONFIGS, subsets=["camrest", "woz"]
    )
    assert sorted(p.name for p in exported.iterdir()) == [MARKER, "camrest", "woz"]
    for name in ("camrest", "woz"):
        assert_convlab_zip_equal(data_dir / name / "data.zip", exported / name)
    # the byte difference named in BYTE_DIFFERENCES: only the key order of objects
    for member in ("data/dialogues.json", "data/ontology.json"):
        original = zip_json(data_dir / "camrest" / "data.zip", member)
        rebuilt = json.loads((exported / "camrest" / member).read_bytes())
        assert json.dumps(rebuilt, sort_keys=True) == json.dumps(original, sort_keys=True)


@pytest.mark.slow
def test_convlab_16_real_dummy_files_export_equal(tmp_path):
    root = tmp_path / "dummies"
    for name in CONVLAB_DATASETS:
        (root / name).mkdir(parents=True)
        os.symlink(shared_data("convlab", name, "dummy_data.json"), root / name / "dummy_data.json")
    exported = build_and_export("convlab", root, tmp_path, configs=CONVLAB_CONFIGS)
    assert sorted(p.relative_to(exported).as_posix() for p in source_files(exported)) == sorted(
        f"{name}/data/dialogues.json" for name in CONVLAB_DATASETS
    )
    for name in CONVLAB_DATASETS:
        original = json.loads((root / name / "dummy_data.json").read_bytes())
        assert len(original) == 10
        rebuilt = json.loads((exported / name / "data" / "dialogues.json").read_bytes())
        assert_equal_values(original, rebuilt, name)


def test_convlab_sample_exports_equal(sample_builds, tmp_path):
    sample = Path(registry.get("convlab").sample_dir())
    exported = export("convlab", sample_builds["convlab"].output, tmp_path / "export")
    assert_convlab_zip_equal(sample / "toyhotel" / "data.zip", exported / "toyhotel")
    for member in ("dialogues.json", "ontology.json"):
        original = json.loads((sample / "toychat" / "data" / member).read_bytes())
        rebuilt = json.loads((exported / "toychat" / "data" / member).read_bytes())
        assert_equal_values(original, rebuilt, f"toychat/{member}")


def test_convlab_empty_and_odd_database_files_come_back(tmp_path):
    """A database file that holds no entity (``[]``, a key with ``[]``) or no list at all is kept whole."""
    data = tmp_path / "in" / "tiny" / "data"
    data.mkdir(parents=True)
    dialogue = {"dataset": "tiny", "data_split": "test", "dialogue_id": "tiny-test-0", "turns": []}
    files = {
        "dialogues.json": [dialogue],
        "ontology.json": {"domains": {}, "intents": {}, "extra_section": [1.5, None]},
        "empty_db.json": [],
        "keyed_db.json": {"hotel": [{"name": "A", "stars": 4}], "taxi": []},
        "scalar_db.json": 3,
        "null_entities_db.json": [None, {"x": 0.1}],
    }
    for name, value in files.items():
        (data / name).write_text(json.dumps(value), encoding="utf-8")
    exported = build_and_export("convlab", tmp_path / "in", tmp_path / "out", configs=CONVLAB_CONFIGS)
    assert sorted(p.name for p in source_files(exported / "tiny" / "data")) == sorted(files)
    for name, value in files.items():
        assert_equal_values(value, json.loads((exported / "tiny" / "data" / name).read_bytes()), name)


def test_convlab_dialogues_come_back_grouped_by_split_the_one_value_difference(tmp_path):
    """VALUE_DIFFERENCES["convlab"]: the build keeps no position across splits, only within one."""
    data = tmp_path / "in" / "mixed" / "data"
    data.mkdir(parents=True)
    splits = ["test", "train", "validation", "train", "test"]
    dialogues = [
        {"dataset": "mixed", "data_split": split, "dialogue_id": f"mixed-{index}", "turns": []}
        for index, split in enumerate(splits)
    ]
    (data / "dialogues.json").write_text(json.dumps(dialogues), encoding="utf-8")
    exported = build_and_export("convlab", tmp_path / "in", tmp_path / "out")
    rebuilt = json.loads((exported / "mixed" / "data" / "dialogues.json").read_bytes())
    assert [d["dialogue_id"] for d in rebuilt] == ["mixed-1", "mixed-3", "mixed-2", "mixed-0", "mixed-4"]
    by_split = sorted(dialogues, key=lambda d: ("train", "validation", "test").index(d["data_split"]))
    assert_equal_values(by_split, rebuilt, "dialogues grouped by split")


# -- MNBVC ------------------------------------------------------------------------------------------------


def test_mnbvc_sample_exports_every_shard_row_for_row(sample_builds, tmp_path):
    sample = Path(registry.get("mnbvc").sample_dir())
    exported = export("mnbvc", sample_builds["mnbvc"].output, tmp_path / "export")
    names = [p.relative_to(sample).as_posix() for p in source_files(sample)]
    assert [p.relative_to(exported).as_posix() for p in source_files(exported)] == names
    for name in names:
        assert_jsonl_files_equal(sample / name, exported / name)
        assert (exported / name).read_bytes()[:2] == (sample / name).read_bytes()[:2]  # gzip stays gzip
        # BYTE_DIFFERENCES["mnbvc"]: CRLF → LF is the only one in the sample (written as json.dumps)
        assert content(exported / name) == content(sample / name).replace(b"\r\n", b"\n")
    assert b"\r\n" in (sample / "multiturn/sharegpt-0002.jsonl").read_bytes()


def mnbvc_pair(session, number, question, line_id="md5"):
    extension = json.dumps({"会话": session, "多轮序号": number}, ensure_ascii=False)
    return {"id": line_id, "问": question, "答": "" if number == 2 else "好", "来源": "ShareGPT",
            "时间": "20230517", "元数据": {"create_time": "20230517 10:41:58", "扩展字段": extension}}  # fmt: skip


def test_mnbvc_rows_grouped_across_files_go_back_to_their_lines(tmp_path):
    """A conversation's rows spread over two shards, out of order, with blank lines: each row at its line."""
    data_dir = tmp_path / "in"
    (data_dir / "b").mkdir(parents=True)
    first = [mnbvc_pair("s1", 3, "三"), mnbvc_pair(7, 1, "一", line_id=12), mnbvc_pair("s1", 1, "一")]
    second = [mnbvc_pair(7, 2, "二"), mnbvc_pair("s1", 2, "二", line_id=1.5)]
    (data_dir / "a.jsonl").write_text(
        "\n".join(json.dumps(row, ensure_ascii=False) for row in first) + "\n\n", encoding="utf-8"
    )
    text = "\n \n".join(json.dumps(row, ensure_ascii=False, indent=None) for row in second)
    (data_dir / "b" / "c.jsonl.gz").write_bytes(gzip.compress(text.encode()))
    exported = build_and_export("mnbvc", data_dir, tmp_path / "out")
    assert [p.relative_to(exported).as_posix() for p in source_files(exported)] == ["a.jsonl", "b/c.jsonl.gz"]
    assert_jsonl_files_equal(data_dir / "a.jsonl", exported / "a.jsonl")
    assert_jsonl_files_equal(data_dir / "b" / "c.jsonl.gz", exported / "b" / "c.jsonl.gz")
    assert content(exported / "b" / "c.jsonl.gz") == text.replace("\n \n", "\n\n").encode() + b"\n"
