"""A batch of very many turns makes its ``turns`` rows a slice at a time (``derive.turns_tables``, issue 54): the
same rows, and the same row groups in the file, as one table of them made."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from convhub import schema
from convhub.engine.writers.arrow_rows import rows_table
from convhub.engine.writers.parquet_writer import ParquetWriter
from convhub.views import derive


def conversation(conversation_id: str, sessions: list[int]) -> dict:
    return {
        "conversation_id": conversation_id,
        "source": "locomo",
        "subset": "one",
        "language": "en",
        "speakers": ["Ana", "Bo"],
        "sessions": [
            schema.empty_session(
                f"session_{number}",
                [schema.empty_turn(f"D{number}:{i}", "Ana", "user", f"t{i}") for i in range(count)],
            )
            for number, count in enumerate(sessions, 1)
        ],
        "questions": [],
        "extra": None,
    }


def derived_turns(tmp_path, name: str, records: list[dict]):
    sessions_path = tmp_path / f"{name}-sessions.parquet"
    writer = ParquetWriter(features=schema.SESSIONS_FEATURES, path=str(sessions_path))
    writer.write_table(rows_table(records, schema.SESSIONS_FEATURES.arrow_schema))
    writer.finalize()
    turns_path = tmp_path / f"{name}-turns.parquet"
    derive.derive_views({"turns": (schema.TURNS_FEATURES, turns_path, None)}, sessions_path)
    metadata = pq.ParquetFile(turns_path).metadata
    return pq.read_table(turns_path), [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]


@pytest.mark.slow
@pytest.mark.parametrize(
    "sessions",
    [[5200], [2600, 2600, 7], [2500, 1], [100, 5300], [2401, 999, 3000, 1, 1]],
)
@pytest.mark.parametrize("batch_rows", [1, 64])
def test_turns_made_a_slice_at_a_time_are_the_rows_and_row_groups_of_one_table(
    tmp_path, monkeypatch, sessions, batch_rows
):
    # a short conversation before and after: in batches of one, the writer holds the first one's rows when the
    # long one is sliced
    monkeypatch.setattr(derive, "BATCH_ROWS", batch_rows)
    records = [conversation("a", [317]), conversation("long", sessions), conversation("z", [1450])]
    whole = derived_turns(tmp_path, "whole", records)
    monkeypatch.setattr(derive, "TURN_SLICE", 2000)
    made: list[int] = []
    turns_tables = derive.turns_tables

    def counted(batch, pending):
        for table in turns_tables(batch, pending):
            made.append(table.num_rows)
            yield table

    monkeypatch.setattr(derive, "turns_tables", counted)
    sliced = derived_turns(tmp_path, "sliced", records)
    assert len(made) > 1 and max(made) < whole[0].num_rows
    assert sliced[0].equals(whole[0], check_metadata=True)
    assert sliced[1] == whole[1]
