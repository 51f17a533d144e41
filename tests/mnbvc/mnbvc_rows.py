"""Shared by the MNBVC tests: JSONL shards the tests write themselves (``write_shard``), rows of each
format, and readers of built records. No real MNBVC dialogue shard is available offline, so no test reads
../shared/data."""

from __future__ import annotations

import gzip
import json
from functools import partial
from pathlib import Path

from convhub.builders.mnbvc import multiturn
from convhub.builders.mnbvc.builder import MnbvcBuilder
from convhub.engine.grouping import group_by_key, local_groupby
from convhub.engine.readers import json_lines
from convhub.engine.runners.input_shards import GroupShard, Partition
from convhub.errors import Notes, raise_error

SAMPLE = Path(MnbvcBuilder.sample_dir())


# -- fixtures --------------------------------------------------------------------------------------------


def partition(inputs, folder, count: int, processes: int = 1, subsets=None, reject=raise_error):
    """MNBVC's multi-turn files keyed (``multiturn.key_row``) and partitioned by the embedded engine, as a
    build does."""
    keyed_rows = partial(keyed_file, inputs, subsets, reject)
    sizes = [Path(path).stat().st_size for _, path in inputs]
    return local_groupby.write_partitions(keyed_rows, sizes, str(folder), count, processes)


def keyed_file(inputs, subsets, reject, file_index: int):
    """The keyed rows of one multi-turn file, as ``MnbvcBuilder.keyed_rows`` gives them."""
    name, path = inputs[file_index]
    objects = json_lines.read_objects(path, "MNBVC", reject, name=name)
    return group_by_key.keyed_file_rows(
        objects, file_index, partial(multiturn.key_row, name, subsets=subsets), reject
    )


def partition_records(partitioned, number: int, names, notes, reject=raise_error, part=(0, 1)):
    """The records of one partition (or slice of one), as a build reads them."""
    group = GroupShard(files=[(name, "") for name in names], sizes=[0] * len(names), partitions=number + 1)
    shard = Partition(group, partitioned, number, part)
    return multiturn.records_from_sorted(local_groupby.read_partition(shard), names, notes, reject)


def write_shard(path: Path, rows: list, gz: bool = False, crlf: bool = False) -> Path:
    """A JSONL shard; a row given as a string is written as is (to write invalid JSON)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    ending = "\r\n" if crlf else "\n"
    text = "".join(
        (row if isinstance(row, str) else json.dumps(row, ensure_ascii=False)) + ending for row in rows
    )
    data = gzip.compress(text.encode()) if gz else text.encode()
    path.write_bytes(data)
    return path


def pair(conversation, number, question, answer="答", row_id="md5", source="ShareGPT", extension=None, **row):
    """A 多轮对话 row; ``extension`` overrides the 扩展字段 string."""
    if extension is None:
        extension = json.dumps(
            {"会话": conversation, "多轮序号": number, "解析模型": "gpt4"}, ensure_ascii=False
        )
    return {
        "id": row_id,
        "问": question,
        "答": answer,
        "来源": source,
        "时间": "20230517",
        "元数据": {
            "create_time": "20230517 10:41:58",
            "问题明细": '"from": "human"',
            "回答明细": '"from": "gpt"',
            "扩展字段": extension,
        },
        **row,
    }


def thread(thread_id, topic, replies, source="北大树洞", **row):
    return {
        "ID": thread_id,
        "主题": topic,
        "来源": source,
        "回复": replies,
        "时间": "20170924",
        "元数据": {"发帖时间": "20170924 13:53:31", "回复数": len(replies), "扩展字段": ""},
        **row,
    }


def reply(floor, text, **extension):
    return {"楼ID": floor, "回复": text, "扩展字段": json.dumps(extension, ensure_ascii=False)}


def records(data_dir, subsets=None, source_format=None, notes=None) -> list[dict]:
    notes = Notes() if notes is None else notes
    builder = MnbvcBuilder(data_dir=str(data_dir), subsets=subsets, source_format=source_format)
    return [record for _, record in builder.iter_records(notes)]


def by_id(found: list[dict]) -> dict[str, dict]:
    return {record["conversation_id"]: record for record in found}


def texts(record) -> list[tuple[str, str, str]]:
    return [(turn["turn_id"], turn["role"], turn["text"]) for turn in record["sessions"][0]["turns"]]


def extra(value):
    """A Json column as written by the parser (text) or as loaded back (already parsed)."""
    return json.loads(value) if isinstance(value, str) else value


# -- the source rows as they are (rebuilt by convhub.builders.mnbvc.export, `convhub export`) ---------------


def source_rows(folder: Path) -> dict[tuple[str, int], dict]:
    rows = {}
    for path in sorted(folder.rglob("*.jsonl*")):
        name = path.relative_to(folder).as_posix()
        for number, _, line in json_lines.iter_lines(path):
            if line.strip():
                rows[(name, number)] = json.loads(line)
    return rows


def spread_fixture(folder: Path) -> Path:
    """Three conversations whose rows are out of order, apart, and in three shards (one gzipped, one CRLF)."""
    write_shard(
        folder / "part-1.jsonl.gz",
        [pair("c1", 3, "c1-3"), pair(7, 1, "int-1"), pair("c1", 1, "c1-1"), pair("c2", 2, "c2-2")],
        gz=True,
    )
    write_shard(folder / "part-2.jsonl", [pair("c2", 1, "c2-1"), pair("7", 2, "int-2")], crlf=True)
    write_shard(folder / "sub/part-3.jsonl", [pair("c1", 2, "c1-2"), pair("c1", 4, "c1-4", answer="")])
    return folder


def questions(record) -> list[str]:
    return [turn["text"] for turn in record["sessions"][0]["turns"] if turn["role"] == "user"]
