"""Spark's regroup of a group shard over DataFrames (``convhub.engine.spark_regroup``) against the embedded engine's
(``convhub.engine.regroup``): the source gets the same tables of whole conversations for each partition, and the
build writes the same rows and quarantines the same records.

A recording MNBVC builder keeps every table its ``grouped_tables`` gets, in a folder both engines' tasks reach
(``local[2]``: the executors' Python workers are processes of this machine).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark", reason='PySpark is the "spark" extra: pip install ".[spark]"')

from builders.mnbvc.builder import MnbvcBuilder
from convhub.engine import keyed_columns, local_build, quarantine, spark_regroup
from convhub.engine.spark import SparkEngine

#: A 多轮序号 no int64 column holds: its row travels as a payload with its exact key.
HUGE = 2**70


@pytest.fixture(scope="module")
def spark():
    engine = SparkEngine("local[2]")
    yield engine
    engine.stop()


def session_of(engine: SparkEngine):
    engine.context  # noqa: B018 - starts the session
    return engine._session


def recording_builder(data_dir: Path, tables: Path, bad: Path) -> MnbvcBuilder:
    """An MNBVC builder of partitions of 400 bytes whose ``grouped_tables`` saves each table it gets as
    ``tables/PPPPP-<call>-NNNNN.arrow`` (P: the partition of its first conversation), under
    ``--on-bad-record skip`` with its quarantine in ``bad``. (A class of a function: Spark pickles it by value.)"""

    class Recording(MnbvcBuilder):
        PARTITION_BYTES = 400
        __module__ = MnbvcBuilder.__module__  # datasets imports a builder's module where it is unpickled

        def grouped_tables(self, tables, shard, notes):
            import pyarrow  # (this module's globals would be pickled by value with the class)

            from convhub.engine.keyed_columns import group_of, partition_of

            def saved():
                call = os.urandom(8).hex()
                for number, table in enumerate(tables):
                    group = group_of(table.column("group")[0].as_py())
                    partition = partition_of(group, shard.partitions)
                    with pyarrow.ipc.new_file(
                        f"{self.tables}/{partition:05d}-{call}-{number:05d}.arrow", table.schema
                    ) as out:
                        out.write_table(table)
                    yield table

            return super().grouped_tables(saved(), shard, notes)

    builder = Recording(data_dir=str(data_dir), on_bad_record="skip", quarantine_dir=str(bad))
    builder.tables = str(tables)
    return builder


def pair(conversation: str, number: int, question: str, answer: str) -> dict:
    """A 多轮对话 row: turn ``number`` of ``conversation``."""
    extension = json.dumps({"会话": conversation, "多轮序号": number, "解析模型": "gpt4"}, ensure_ascii=False)
    return {"id": "md5", "问": question, "答": answer, "来源": "ShareGPT", "时间": "20230517",
            "元数据": {"create_time": "20230517 10:41:58", "扩展字段": extension}}  # fmt: skip


def scattered_rows(folder: Path) -> None:
    """Twelve conversations of four rows, each row in another of three files and the files' rows shuffled; one
    conversation numbered past 64 bits; a line that is not JSON."""
    files: list[list] = [[], [], []]
    for conversation in range(12):
        start = HUGE if conversation == 5 else 1
        for turn in range(4):
            row = pair(f"c{conversation}", start + turn, f"q{conversation}.{turn}", f"a{conversation}.{turn}")
            files[(conversation + turn) % 3].append(row)
    for index, rows in enumerate(files):
        rows.reverse()
        if index == 1:
            rows.insert(3, "{not json")
        lines = [row if isinstance(row, str) else json.dumps(row, ensure_ascii=False) for row in rows]
        (folder / "multiturn").mkdir(parents=True, exist_ok=True)
        (folder / "multiturn" / f"part-{index}.jsonl").write_text("".join(f"{line}\n" for line in lines))


def saved_tables(folder: Path) -> dict[int, list[pa.Table]]:
    """Partition → the tables its grouped_tables got, in order."""
    found: dict[int, list[pa.Table]] = {}
    for path in sorted(folder.glob("*.arrow")):
        found.setdefault(int(path.name.split("-")[0]), []).append(pa.ipc.open_file(path).read_all())
    return found


def test_spark_gives_the_source_the_local_tables_of_rows_scattered_over_files(spark, tmp_path):
    data = tmp_path / "data"
    scattered_rows(data)
    folders = {name: tmp_path / name for name in ("local-tables", "spark-tables", "local-bad", "spark-bad")}
    for folder in folders.values():
        folder.mkdir()

    local = recording_builder(data, folders["local-tables"], folders["local-bad"])
    written = local_build.write_config(local, tmp_path / "local", 1, str(tmp_path / "downloads"))
    on_spark = recording_builder(data, folders["spark-tables"], folders["spark-bad"])
    results = spark.write_config(on_spark, tmp_path / "spark")

    expected, got = saved_tables(folders["local-tables"]), saved_tables(folders["spark-tables"])
    assert len(expected) > 2 and sorted(got) == sorted(expected)  # several partitions, each read once
    for partition, tables in expected.items():
        assert len(got[partition]) == len(tables)
        for mine, theirs in zip(got[partition], tables, strict=True):
            assert mine.equals(theirs, check_metadata=True), partition
    rows = pa.concat_tables([table for tables in expected.values() for table in tables])
    assert set(rows.column("file_index").to_pylist()) == {0, 1, 2}
    huge = rows.filter(pa.compute.is_valid(rows.column("payload")))
    assert huge.num_rows == 4 and set(huge.column("number").to_pylist()) == {keyed_columns.INT64_MAX}

    local_rows = pa.concat_tables(pq.read_table(path) for path in written["train"].files)
    spark_rows = pa.concat_tables(pq.read_table(path) for result in results["train"] for path in result.files)
    assert spark_rows.equals(local_rows, check_metadata=True)
    assert local_rows.num_rows == 12

    lines = [line for result in results["train"] for line in result.quarantine]
    (folders["spark-bad"] / "quarantine-engine.jsonl").write_text("".join(f"{line}\n" for line in lines))
    rejected = quarantine.collect(folders["local-bad"])
    assert len(rejected) == 1 and rejected[0]["file"].endswith("part-1.jsonl")
    assert quarantine.collect(folders["spark-bad"]) == rejected
    assert json.loads(lines[0]) == rejected[0]


def test_a_partition_goes_to_the_spark_partition_of_its_number(spark):
    """``partition_slots``: a row of partition p is in Spark partition p after ``repartition``."""
    from pyspark.sql import functions

    session = session_of(spark)
    count = 9
    slots = spark_regroup.partition_slots(session, count)
    rows = session.range(0, count * 4).select((functions.col("id") % count).cast("int").alias("partition"))
    placed = rows.repartition(count, spark_regroup._slot_column(slots)).select(
        "partition", functions.spark_partition_id().alias("spark_partition")
    )
    assert all(row.partition == row.spark_partition for row in placed.collect())


def test_spark_sorts_binary_as_unsigned_bytes_as_arrow_does(spark):
    """The key columns ``group`` and ``text`` are UTF-8 bytes: Spark's sort must compare them as Arrow's does."""
    session = session_of(spark)
    values = [
        b"\x7f",
        b"\x80",
        b"\xff",
        b"a",
        b"",
        b"\x00",
        b"\x00\x00",
        "中".encode(),
        "\U0001f600".encode(),
    ]
    frame = session.createDataFrame([(value,) for value in values], "value binary")
    ordered = [bytes(row.value) for row in frame.repartition(1).sortWithinPartitions("value").collect()]
    assert ordered == pa.table({"value": values}).sort_by("value").column("value").to_pylist()
    assert ordered == sorted(values)
