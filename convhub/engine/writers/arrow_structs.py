"""Arrow arrays built from many Python values at once, for a source that makes a large nested value (a conversation
of a million turns) as columns instead of one Python dict per item: strings encoded a chunk at a time, and a struct
array of a table's type whose unset fields are empty lists or nulls."""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import numpy as np
import pyarrow as pa

#: Strings encoded to UTF-8 at a time by :func:`string_array`.
CHUNK = 16_384


def string_array(values: Iterable[str | None]) -> pa.Array:
    """A string array of ``values``, encoded here ``CHUNK`` at a time. Given the texts themselves, pyarrow asks
    each for its UTF-8, which CPython then keeps beside the text for as long as it lives: a second copy of every
    non-ASCII text. A lone surrogate raises UnicodeEncodeError."""
    chunks, values = [], iter(values)
    while chunk := list(itertools.islice(values, CHUNK)):
        encoded = [None if value is None else value.encode("utf-8") for value in chunk]
        chunks.append(pa.array(encoded, pa.binary()).cast(pa.string()))
    if len(chunks) == 1:
        return chunks[0]
    return pa.concat_arrays(chunks) if chunks else pa.array([], pa.string())


def struct_array(struct_type: pa.StructType, columns: dict[str, pa.Array], count: int) -> pa.StructArray:
    """``count`` structs of ``struct_type`` from ``columns`` by field name; a field without a column holds empty
    (not null) lists when it is a list, else nulls."""
    arrays = [
        columns[field.name] if field.name in columns else _unset(field.type, count) for field in struct_type
    ]
    return pa.StructArray.from_arrays(arrays, fields=list(struct_type))


def _unset(kind: pa.DataType, count: int) -> pa.Array:
    if not pa.types.is_list(kind):
        return pa.nulls(count, kind)
    offsets = pa.array(np.zeros(count + 1, dtype=np.int32), pa.int32())
    return pa.ListArray.from_arrays(offsets, pa.array([], kind.value_type), type=kind)
