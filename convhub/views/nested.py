"""The nested columns of a ``sessions`` batch as flat Arrow arrays: what every derived view starts from.

A ``sessions`` row holds a list of sessions, each a list of turns. The views flatten those lists with Arrow
kernels and keep, for each element, where it came from (its parent row and its index inside the parent's list),
so that a view's columns are ``take``\\ s of the batch's, never Python values.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def list_positions(lists: pa.ListArray) -> tuple[pa.Array, pa.Array]:
    """For each element of the flattened lists: the index of its parent list and its index inside it."""
    parents = pc.list_parent_indices(lists)
    offsets = lists.offsets.to_numpy()
    starts = offsets[:-1][parents.to_numpy()] if len(parents) else np.array([], dtype=np.int64)
    inside = np.arange(offsets[0], offsets[0] + len(parents), dtype=np.int64) - starts
    return parents, pa.array(inside.astype(np.int32), pa.int32())


def struct_fields(array: pa.StructArray) -> dict[str, pa.Array]:
    """Child arrays by name, aligned with the struct's rows (``flatten`` honours offsets)."""
    return {field.name: child for field, child in zip(array.type, array.flatten(), strict=True)}


def flattened(lists: pa.ListArray) -> pa.Array:
    """The values of a list array as its rows see them (respecting slicing and offsets)."""
    return pc.list_flatten(lists)


def sessions_of(batch: pa.RecordBatch) -> tuple[pa.Array, pa.Array, dict[str, pa.Array]]:
    """Every session of the batch: its conversation's row, its index in the conversation, its fields."""
    sessions = batch.column("sessions")
    session_parent, session_index = list_positions(sessions)
    return session_parent, session_index, struct_fields(flattened(sessions))
