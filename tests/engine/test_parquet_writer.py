"""convhub's Parquet writer (``convhub.engine.writers.parquet_writer``): the files ``datasets`` reads back with the same
features, row groups of the writer's batch, tables conformed to the features, and a URL written through fsspec."""

from __future__ import annotations

import datasets
import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from convhub.engine.writers.parquet_writer import ParquetWriter, write_parquet

FEATURES = datasets.Features(
    {
        "conversation_id": datasets.Value("string"),
        "turn_index": datasets.Value("int32"),
        "text": datasets.Value("string"),
    }
)


def _rows(count: int) -> pa.Table:
    return pa.Table.from_pylist(
        [{"conversation_id": f"c{i}", "turn_index": i, "text": "words " * i} for i in range(count)],
        schema=FEATURES.arrow_schema,
    )


def test_the_file_carries_the_features_and_loads_back_with_them(tmp_path):
    path = tmp_path / "train.parquet"
    rows, size = write_parquet(path, FEATURES, lambda _: [_rows(5)])
    assert (rows, size) == (5, _rows(5).nbytes)
    table = pq.read_table(path)
    assert table.equals(_rows(5), check_metadata=True)
    assert datasets.Features.from_arrow_schema(table.schema) == FEATURES
    loaded = datasets.load_dataset(
        "parquet", data_files=str(path), split="train", cache_dir=str(tmp_path / "c")
    )
    assert loaded.features == FEATURES and loaded["turn_index"] == [0, 1, 2, 3, 4]


def test_each_write_is_cut_into_row_groups_of_the_writer_batch(tmp_path):
    path = tmp_path / "train.parquet"
    writer = ParquetWriter(FEATURES, str(path), writer_batch_size=4)
    try:
        writer.write_table(_rows(10))
        assert writer.finalize() == (10, _rows(10).nbytes)
    finally:
        writer.close()
    metadata = pq.read_metadata(path)
    assert [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)] == [4, 4, 2]


def test_a_table_in_another_column_order_and_type_is_written_as_the_features_say(tmp_path):
    path = tmp_path / "train.parquet"
    other = pa.table(
        {"text": ["a", "b"], "turn_index": pa.array([1, 2], pa.int64()), "conversation_id": ["x", "y"]}
    )
    write_parquet(path, FEATURES, lambda _: [other])
    table = pq.read_table(path)
    assert table.schema.names == ["conversation_id", "turn_index", "text"]
    assert table.schema.field("turn_index").type == pa.int32()
    assert table.to_pylist() == [
        {"conversation_id": "x", "turn_index": 1, "text": "a"},
        {"conversation_id": "y", "turn_index": 2, "text": "b"},
    ]


def test_a_url_is_written_through_fsspec(bucket):
    url = str(bucket / "train.parquet")
    write_parquet(url, FEATURES, lambda _: [_rows(3)])
    with fsspec.open(url, "rb") as handle:
        assert pq.read_table(handle).equals(_rows(3))
