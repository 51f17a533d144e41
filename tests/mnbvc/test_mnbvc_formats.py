"""问答 and 论坛 rows, language and ``--subset``, streaming, and the default download."""

from __future__ import annotations

import json

import datasets
import pytest

from convhub.builders.mnbvc import language as languages
from convhub.builders.mnbvc import parse
from convhub.builders.mnbvc.builder import MnbvcBuilder
from convhub.cli import main as cli
from convhub.engine.runners.input_shards import GroupShard
from convhub.errors import Notes, SourceError
from tests.mnbvc.mnbvc_rows import by_id, extra, pair, questions, records, reply, texts, thread, write_shard

# -- 问答 -------------------------------------------------------------------------------------------------------


def test_qa_rows_are_one_conversation_each_with_typed_ids(tmp_path):
    write_shard(
        tmp_path / "qa.jsonl",
        [
            {
                "id": 0,
                "问": "如何?",
                "答": "这样。",
                "来源": "wikihow",
                "时间": "20230517",
                "元数据": {"扩展字段": ""},
            },
            {
                "id": "x1",
                "问": "出处?",
                "答": "论语。",
                "来源": "古籍",
                "时间": "-04790101",
                "元数据": {"扩展字段": "{}"},
            },
        ],
    )
    notes = Notes()
    found = by_id(records(tmp_path, notes=notes))
    assert set(found) == {"qa.jsonl:1", "qa.jsonl:2"}
    first, second = found["qa.jsonl:1"], found["qa.jsonl:2"]
    assert first["sessions"][0]["session_id"] == "0"
    assert extra(first["sessions"][0]["turns"][0]["extra"])["row"]["id"] == 0
    assert second["sessions"][0]["date_time"] == "-04790101"
    assert second["sessions"][0]["timestamp"] is None
    assert notes["int id → string (raw type kept in the row)"] == 1
    assert notes["时间 before year 1 (BC) or after 9999 (timestamp null, raw kept)"] == 1


# -- 论坛 -------------------------------------------------------------------------------------------------------


def test_forum_thread_turns_speakers_replies_and_times(tmp_path):
    replies = [
        reply("1", "有意者可加洞主微信", 回复人="洞主", 回复时间="20170924 13:54:21"),
        reply(2, "搭车转", 回复人="Alice", 回复时间="20170924 14:31:48", 点赞数=2),
        reply("3", "已出", 回复人="洞主", 引用ID=2, 引用人="Alice", 回复时间=""),
        reply("4", "楼上", 回复人="Bob", 引用ID="", 引用人="洞主"),
    ]
    write_shard(tmp_path / "forum.jsonl", [thread(275957, "出一张票", replies)])
    notes = Notes()
    [record] = records(tmp_path, notes=notes)
    turns = record["sessions"][0]["turns"]
    assert [(t["turn_id"], t["speaker"], t["role"], t["reply_to"]) for t in turns] == [
        ("topic", "楼主", "user", None),
        ("1", "洞主", "user", None),
        ("2", "Alice", "assistant", None),
        ("3", "洞主", "user", "2"),
        ("4", "Bob", "assistant", None),
    ]
    assert extra(turns[1]["extra"])["timestamp"] == "2017-09-24T13:54:21"
    assert extra(turns[3]["extra"])["timestamp"] is None
    assert extra(turns[0]["extra"])["timestamp"] == "2017-09-24T13:53:31"
    assert extra(turns[2]["extra"])["reply"]["楼ID"] == 2
    assert record["sessions"][0]["session_id"] == "275957"
    assert record["speakers"] == ["楼主", "洞主", "Alice", "Bob"]
    assert notes["int 楼ID → string (raw type kept in the row)"] == 1


def test_forum_empty_topic_escaped_keys_and_missing_speaker(tmp_path):
    escaped = {
        "楼ID": 1,
        "回复": "链接挂了",
        "扩展字段": json.dumps({"回复人": "Bob", "回复时间": ""}, ensure_ascii=True),
    }
    nobody = {"楼ID": 2, "回复": "?", "扩展字段": ""}
    write_shard(tmp_path / "forum.jsonl", [thread("t-1", "", [escaped, nobody])])
    notes = Notes()
    [record] = records(tmp_path, notes=notes)
    assert texts(record)[0] == ("topic", "user", "")
    assert record["sessions"][0]["turns"][1]["speaker"] == "Bob"
    assert record["sessions"][0]["turns"][2]["speaker"] == ""
    assert notes["forum thread with an empty 主题 (kept as an empty topic turn)"] == 1
    assert notes["forum reply without 回复人 (speaker empty)"] == 1


def test_forum_repeated_floor_and_quote_of_no_reply(tmp_path):
    replies = [reply("1", "a", 回复人="A"), reply("1", "b", 回复人="B", 引用ID="99")]
    write_shard(tmp_path / "forum.jsonl", [thread(1, "t", replies)])
    notes = Notes()
    [record] = records(tmp_path, notes=notes)
    assert [turn["turn_id"] for turn in record["sessions"][0]["turns"]] == ["topic", "1", "1~2"]
    assert notes["forum reply with a repeated 楼ID (turn_id suffixed ~n, raw kept)"] == 1
    assert notes["forum 引用ID naming no reply of the thread (reply_to kept as written)"] == 1


def test_forum_replies_that_are_not_a_list_fail_with_field(tmp_path):
    write_shard(tmp_path / "forum.jsonl", [thread(1, "t", [])])
    write_shard(tmp_path / "forum2.jsonl", [{**thread(2, "t", []), "回复": "none"}])
    with pytest.raises(SourceError, match=r"forum2\.jsonl, record line 1, field '回复'"):
        records(tmp_path)


# -- language and subsets -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("长城是中国古代修建的军事防御工程", "zh"),
        ("Sure, here's a Shakespearean script about a girl.", "en"),
        ("用Python写一个web server", "zh"),
        ("「こんにちは」です。", "ja"),
        ("안녕하세요 반갑습니다", "ko"),
        ("", "zh"),
    ],
)
def test_language_detection(text, language):
    assert languages.detect_language([text]) == language


def test_subsets_by_format_by_source_and_both(tmp_path):
    write_shard(
        tmp_path / "m.jsonl", [pair("a", 1, "q", source="ShareGPT"), pair("b", 1, "q", source="知乎")]
    )
    write_shard(tmp_path / "f.jsonl", [thread(1, "t", []), thread(2, "t", [], source="清华树洞")])
    assert {r["subset"] for r in records(tmp_path, subsets=("forum",))} == {
        "forum/北大树洞",
        "forum/清华树洞",
    }
    assert {r["subset"] for r in records(tmp_path, subsets=("知乎",))} == {"multiturn/知乎"}
    assert {r["subset"] for r in records(tmp_path, subsets=("forum/清华树洞", "ShareGPT"))} == {
        "forum/清华树洞",
        "multiturn/ShareGPT",
    }


# -- streaming ---------------------------------------------------------------------------------------------


def test_streaming_reads_every_format_directly(tmp_path):
    write_shard(
        tmp_path / "m.jsonl.gz", [pair("a", 2, "a2"), pair("a", 1, "a1"), pair("b", 1, "b1")], gz=True
    )
    write_shard(tmp_path / "f.jsonl", [thread(1, "t", [reply("1", "r", 回复人="X")])], crlf=True)
    builder = MnbvcBuilder(data_dir=str(tmp_path))
    streamed = builder.as_streaming_dataset(split="train")
    assert isinstance(streamed, datasets.IterableDataset)
    found = by_id(list(streamed))
    assert set(found) == {"ShareGPT/a", "ShareGPT/b", "f.jsonl:1"}
    assert questions(found["ShareGPT/a"]) == ["a1", "a2"]
    assert streamed.features == builder.info.features


def test_streaming_and_building_from_a_url(bucket, tmp_path):
    """An S3 URL as data_dir (the tests' S3 server): streamed from the URL, or downloaded by the build."""
    multiturn = write_shard(tmp_path / "m.jsonl.gz", [pair("a", 1, "a1"), pair("a", 2, "a2")], gz=True)
    forum = write_shard(tmp_path / "f.jsonl", [thread(1, "t", [])])
    (bucket / "mnbvc-test" / "sub").mkdir(parents=True)
    (bucket / "mnbvc-test" / "sub" / "m.jsonl.gz").write_bytes(multiturn.read_bytes())
    (bucket / "mnbvc-test" / "f.jsonl").write_bytes(forum.read_bytes())
    url = str(bucket / "mnbvc-test")
    builder = MnbvcBuilder(data_dir=url, cache_dir=str(tmp_path / "cache"))
    streamed = by_id(builder.as_streaming_dataset(split="train"))
    assert set(streamed) == {"ShareGPT/a", "f.jsonl:1"}
    assert questions(streamed["ShareGPT/a"]) == ["a1", "a2"]
    assert set(by_id(records(url))) == {"ShareGPT/a", "f.jsonl:1"}


def test_an_engine_reads_a_url_data_dir_where_it_is(tmp_path):
    """For Spark, a URL ``data_dir`` is listed as URLs its tasks open (no download): the multi-turn files as one
    group shard sized through the URL, the others as URL shards; the same files, names and sizes as a local
    listing of the same folder."""
    write_shard(tmp_path / "sub/m.jsonl.gz", [pair("a", 1, "a1"), pair("a", 2, "a2")], gz=True)
    write_shard(tmp_path / "f.jsonl", [thread(1, "t", [])])
    url = f"file://{tmp_path}"
    [group, forum] = MnbvcBuilder(data_dir=url).engine_shards(datasets.DownloadManager())["train"]
    [local_group, local_forum] = MnbvcBuilder(data_dir=str(tmp_path)).shards(datasets.DownloadManager())[
        "train"
    ]
    assert isinstance(group, GroupShard) and isinstance(local_group, GroupShard)
    assert [name for name, _ in group.files] == [name for name, _ in local_group.files] == ["sub/m.jsonl.gz"]
    assert group.files[0][1].startswith("file://") and group.files[0][1].endswith("sub/m.jsonl.gz")
    assert group.sizes == local_group.sizes and group.partitions == local_group.partitions == 1
    assert forum["kind"] == "url" and local_forum["kind"] == "rows"
    assert forum["name"] == local_forum["name"] == "f.jsonl" and forum["path"].startswith("file://")


def test_streaming_non_adjacent_rows_come_in_pieces_and_are_counted(tmp_path):
    write_shard(tmp_path / "m.jsonl", [pair("a", 1, "a1"), pair("b", 1, "b1"), pair("a", 2, "a2")])
    notes = Notes()
    shard = {
        "kind": "stream",
        "format": parse.MULTITURN,
        "name": "m.jsonl",
        "path": str(tmp_path / "m.jsonl"),
    }
    found = by_id(MnbvcBuilder(data_dir=str(tmp_path)).parse_shard(shard, notes))
    assert set(found) == {"ShareGPT/a", "ShareGPT/b", "ShareGPT/a#2"}
    assert notes["streamed multi-turn conversation whose rows are not adjacent (emitted in pieces)"] == 1
    assert set(by_id(records(tmp_path))) == {"ShareGPT/a", "ShareGPT/b"}  # the build regroups them


def test_streaming_turns_config(tmp_path):
    write_shard(tmp_path / "m.jsonl", [pair("a", 1, "a1", "r1"), pair("a", 2, "a2", "")])
    streamed = MnbvcBuilder(config_name="turns", data_dir=str(tmp_path)).as_streaming_dataset(split="train")
    assert [(row["turn_id"], row["text"]) for row in streamed] == [("0q", "a1"), ("0a", "r1"), ("1q", "a2")]


# -- default download --------------------------------------------------------------------------------------


def test_default_download_failure_asks_for_data_dir(monkeypatch):
    def offline():
        raise OSError("no network")

    monkeypatch.setattr(MnbvcBuilder, "default_files", lambda self: offline())
    with pytest.raises(FileNotFoundError, match=r"liwu/MNBVC.*--data-dir"):
        records_default()
    monkeypatch.setattr(MnbvcBuilder, "default_files", lambda self: [])
    with pytest.raises(FileNotFoundError, match="--data-dir"):
        records_default()


def records_default():
    builder = MnbvcBuilder()
    return builder.shards(datasets.DownloadManager())


def test_cli_without_data_dir_prints_the_message(monkeypatch, capsys):
    monkeypatch.setattr(MnbvcBuilder, "default_files", lambda self: (_ for _ in ()).throw(OSError("offline")))
    assert cli.main(["check", "mnbvc"]) == 1
    assert "--data-dir" in capsys.readouterr().err


def test_missing_data_dir_is_reported(tmp_path):
    with pytest.raises(FileNotFoundError, match="neither a folder nor a file"):
        records(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"no MNBVC \*\.jsonl"):
        records(tmp_path / "empty")
