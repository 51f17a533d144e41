"""多轮对话 rows keyed and converted on columns: a batch of lines (``convhub.engine.line_batches``) to a batch of
``converted.KEYED_SCHEMA``, by one DuckDB query over the Arrow batch, Python only for the rows it cannot say.

The columnar rows are those whose values ``converted.values_of`` gives, and exactly those values: a row of the
usual shape (``问``, ``答`` and ``来源`` strings, ``时间`` absent or a string, ``元数据`` an object of scalars
whose ``扩展字段`` is a flat JSON object with a ``会话`` (a non-empty string or an integer) and a 64-bit integer
``多轮序号``, and a ``create_time`` absent, null, empty or ``yyyymmdd HH:MM:SS``). Whatever DuckDB and Python could
read or write differently goes to Python: trailing commas and NaN that DuckDB accepts (``TRAILING_COMMA``, and
floats), integers past 64 bits, nested values, duplicate keys (DuckDB keeps them, Python one), surrogate and
``\\u0000`` escapes (``ESCAPE``), JSON escapes DuckDB writes in upper case where orjson writes them in lower case
(``UPPER_ESCAPE``), any line but an object written from ``{`` to ``}``, any line that is not UTF-8. Those rows take
today's path (``json_lines.read_objects``' parse, ``keyed.keyed_file_rows`` with ``multiturn.key_row``), which
rejects a bad one as it always did, and keep their payload and exact key (``keyed_columns.python_batch``, value
columns null).
"""

from __future__ import annotations

import itertools
import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from builders.mnbvc import converted
from builders.mnbvc.parse import MULTITURN
from convhub.engine import keyed, keyed_columns
from convhub.engine.json_lines import line_place
from convhub.engine.jsonio import load_object
from convhub.engine.keyed_columns import KeyedRow
from convhub.engine.line_batches import line_batches
from convhub.errors import Reject, SourceError

#: What sends a line (or a ``扩展字段``) to Python wherever it is: a trailing comma (DuckDB reads it), a
#: ``\\u0000`` (a zero character in a group's text) or a surrogate escape (DuckDB refuses a lone one). A raw
#: control character needs no rule: DuckDB refuses the JSON where Python does. (Two patterns: RE2 is ten times
#: slower on the two as one alternation.)
TRAILING_COMMA = r",[ \t\r\n]*[\]}]"
ESCAPE = r"\\u(0000|[dD][89a-fA-F])"
#: A JSON escape DuckDB writes in upper case and orjson in lower case.
UPPER_ESCAPE = r"\\u00(0B|0E|0F|1[A-F])"
ROW_PATHS = ["问", "答", "来源", "时间", "元数据.create_time", "元数据.扩展字段"]
QUESTION, ANSWER, SOURCE, TIME, CREATE_TIME, EXTENSION = range(1, 7)  # DuckDB's lists count from 1


def _paths(names: list[str]) -> str:
    return (
        "["
        + ", ".join("'$." + ".".join(f'"{part}"' for part in name.split(".")) + "'" for name in names)
        + "]"
    )


def _flat(structure: str, objects: int) -> str:
    """SQL: a ``json_structure`` of ``objects`` objects (counting the outer one) and no array, float, empty
    object or value of mixed types (``JSON``); a key holding ``{`` or ``[`` only sends its row to Python."""
    return (
        f"NOT contains({structure}, '[') AND NOT contains({structure}, '\"DOUBLE\"')"
        f" AND NOT contains({structure}, '\"JSON\"')"
        f" AND length({structure}) - length(replace({structure}, '{{', '')) = {objects}"
    )


def _plain(text: str, valid: bool = False) -> str:
    """SQL: text from ``{`` to ``}`` that DuckDB reads as Python does (no ``TRAILING_COMMA``, no ``ESCAPE``),
    and when ``valid``, JSON."""
    return (
        f"starts_with({text}, '{{') AND ends_with({text}, '}}') AND NOT regexp_matches({text}, $comma)"
        f" AND NOT regexp_matches({text}, $escape)" + (f" AND json_valid({text})" if valid else "")
    )


#: Every function that may raise (on JSON it cannot read, a cast) is under a ``CASE`` whose condition says it
#: will not: DuckDB evaluates a ``CASE`` branch only for the rows it selects, where it may reorder conditions.
#: Every line comes out with ``columnar``, not only the columnar ones: filtered in DuckDB, its conditions were
#: pushed down and computed twice (a third slower).
QUERY = f"""
WITH plain AS (
  -- try: a line DuckDB cannot read is rare, and json_valid would read every line once more
  SELECT number, line, CASE WHEN {_plain("line")} THEN try(json_structure(line)) END AS structure FROM mnbvc_lines
), parsed AS (
  SELECT number, line, structure,
    CASE WHEN structure IS NOT NULL THEN json_keys(line, ['$', '$."元数据"']) END AS keys,
    CASE WHEN structure IS NOT NULL THEN json_extract_string(line, {_paths(ROW_PATHS)}) END AS v
  FROM plain
), typed AS (
  SELECT *, CASE WHEN {_flat("structure", 2)} THEN json_keys(structure, ['$', '$."元数据"']) END AS structure_keys,
    json_extract_string(structure, {_paths(ROW_PATHS)}) AS t, v[{EXTENSION}] AS e, v[{CREATE_TIME}] AS ct
  FROM parsed
), row_ok AS (
  SELECT *,
    -- a key twice is once in the structure
    structure_keys IS NOT NULL AND len(keys[1]) = len(structure_keys[1]) AND len(keys[2]) = len(structure_keys[2])
    AND t[{QUESTION}] = 'VARCHAR' AND t[{ANSWER}] = 'VARCHAR' AND t[{SOURCE}] = 'VARCHAR'
    AND coalesce(t[{TIME}], 'VARCHAR') = 'VARCHAR' AND coalesce(t[{CREATE_TIME}], 'NULL') IN ('NULL', 'VARCHAR')
    AND t[{EXTENSION}] = 'VARCHAR' AND {_plain("e", valid=True)} AS row_ok,
    CASE WHEN regexp_full_match(ct, '[0-9]{{8}} ([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]') THEN
      CASE WHEN substr(ct, 1, 4)::INT >= 1 AND substr(ct, 5, 2)::INT BETWEEN 1 AND 12 THEN
        substr(ct, 7, 2)::INT BETWEEN 1 AND day(last_day(make_date(substr(ct, 1, 4)::INT, substr(ct, 5, 2)::INT, 1)))
      ELSE false END
    ELSE false END AS fast_time
  FROM typed
), extension AS (
  SELECT *,
    CASE WHEN row_ok THEN json_structure(e) END AS e_structure,
    CASE WHEN row_ok THEN json_keys(e) END AS e_keys,
    CASE WHEN row_ok THEN json_extract_string(e, ['$."会话"', '$."多轮序号"']) END AS ev,
    CASE WHEN row_ok THEN json(e) END AS e_json
  FROM row_ok
), extension_types AS (
  SELECT *, json_extract_string(e_structure, ['$."会话"', '$."多轮序号"']) AS et FROM extension
), checked AS (
  SELECT *, row_ok AND {_flat("e_structure", 1)}
    AND len(e_keys) = len(json_keys(e_structure))
    AND (et[1] IN ('BIGINT', 'UBIGINT') OR (et[1] = 'VARCHAR' AND ev[1] <> ''))
    AND et[2] IN ('BIGINT', 'UBIGINT') AND try_cast(ev[2] AS BIGINT) IS NOT NULL
    AND (ct IS NULL OR ct = '' OR fast_time) AS ok
  FROM extension_types
), made AS (
  SELECT *,
    CASE WHEN ok THEN concat('{{"file":', $file, ',"line":', number, ',"keys":', to_json(keys[1]),
      ',"row":', json_merge_patch(line, '{{"问":null,"答":null}}'), ',"扩展字段":', e_json,
      CASE WHEN ct IS NULL OR ct = '' THEN ''
        ELSE concat(',"create_timestamp":"', substr(ct, 1, 4), '-', substr(ct, 5, 2), '-', substr(ct, 7, 2), 'T',
          substr(ct, 10), '"') END,
      '}}') END AS extra
  FROM checked
)
SELECT number, columnar,
  CASE WHEN columnar THEN v[{SOURCE}] END AS source, CASE WHEN columnar THEN ev[1] END AS group_key,
  CASE WHEN columnar THEN ev[2] END AS sequence, CASE WHEN columnar THEN ev[2]::BIGINT END AS sequence_number,
  CASE WHEN columnar THEN v[{QUESTION}] END AS question, CASE WHEN columnar THEN nullif(v[{ANSWER}], '') END AS answer,
  CASE WHEN columnar THEN extra END AS extra, CASE WHEN columnar THEN v[{TIME}] END AS time,
  CASE WHEN columnar THEN ct END AS create_time
FROM (SELECT *, coalesce(ok AND NOT regexp_matches(extra, $upper), false) AS columnar FROM made)
"""

logger = logging.getLogger(__name__)
_CONNECTION: tuple[int, Any] | None = None
#: Connections a forked child inherited from its parent: kept, never closed nor collected there (DuckDB's state
#: belongs to the parent's threads; closing it in the child crashed the child).
_INHERITED: list[tuple[int, Any]] = []
#: Bytes of lines converted at a time, one query each: planning a query takes some ms, and DuckDB's memory grows
#: with the block (its allocator keeps what a query used), so neither much less nor much more.
BLOCK_BYTES = 8 * 2**20


def connection():
    """This process's DuckDB connection (one thread: a build runs processes), made again in a forked child."""
    global _CONNECTION
    if _CONNECTION is None or _CONNECTION[0] != os.getpid():
        import duckdb  # here: DuckDB loads in the processes that convert, not in every build

        if _CONNECTION is not None:
            _INHERITED.append(_CONNECTION)

        _CONNECTION = (os.getpid(), duckdb.connect(config={"threads": 1}))
    return _CONNECTION[1]


def duckdb_errors() -> tuple[type[Exception], ...]:
    """What DuckDB raises on data it cannot read (malformed JSON, a failed cast), not on a wrong query."""
    import duckdb

    return duckdb.InvalidInputException, duckdb.ConversionException


def _texts(lines: pa.Array) -> pa.Array:
    """The lines as UTF-8 text; in a batch holding a line that is not UTF-8, that line empty (it goes to
    Python)."""
    try:
        return lines.cast(pa.string())
    except pa.ArrowInvalid:
        pass
    texts = []
    for raw in lines.to_pylist():
        try:
            texts.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            texts.append("")
    return pa.array(texts, pa.string())


def columnar_rows(batch: pa.RecordBatch, name_json: str) -> pa.Table | None:
    """DuckDB's reading of each line of a ``line_batches`` batch: ``columnar`` (whether its values say the row
    exactly) and, for a columnar row, its values; None when DuckDB failed on the batch."""
    lines = pa.table({"number": batch.column("number"), "line": _texts(batch.column("line"))})
    parameters = {"comma": TRAILING_COMMA, "escape": ESCAPE, "upper": UPPER_ESCAPE, "file": name_json}
    with connection().cursor() as database:  # a cursor of its own: the registered name is the cursor's
        database.register("mnbvc_lines", lines)
        try:
            return database.sql(QUERY, params=parameters).to_arrow_table()
        except duckdb_errors() as error:  # JSON DuckDB could not read after all: the batch goes to Python
            logger.debug("a batch of lines left to Python: %s", error)
            return None


def keyed_table(
    batch: pa.RecordBatch,
    file_index: int,
    name_json: str,
    wanted: Callable[[pa.Array], pa.Array] | None,
    python: Callable[[pa.RecordBatch], pa.RecordBatch],
) -> pa.Table:
    """A batch of lines as a table of ``converted.KEYED_SCHEMA``, in line order: the lines DuckDB converts with
    their values (a 来源 not ``wanted`` left out, as ``key_row`` leaves it), the others as ``python(their
    lines)`` gives them (rows by ``keyed_columns.python_batch``). The value columns come from DuckDB as they are
    (null on a Python row); only the key columns take the Python rows' cells."""
    count = batch.num_rows
    found = columnar_rows(batch, name_json)
    if found is None:
        found = pa.table({"columnar": pa.array([False] * count)})
    columnar = found.column("columnar").combine_chunks()
    routed = batch.filter(pc.invert(columnar))
    by_python = python(routed) if routed.num_rows else pa.RecordBatch.from_pylist([], converted.KEYED_SCHEMA)
    lines = batch.column("number").to_numpy()
    places = np.searchsorted(lines, by_python.column("line").to_numpy())
    from_python = np.zeros(count, dtype=bool)
    from_python[places] = True
    kept = columnar.to_numpy(zero_copy_only=False)
    if wanted is not None and found.num_columns > 1:
        kept = kept & wanted(found.column("source")).to_numpy(zero_copy_only=False)
    kept = kept | from_python

    def value(name: str, kind: pa.DataType) -> pa.ChunkedArray:
        """DuckDB's column ``name``, in its chunks (not copied into one)."""
        return found.column(name) if name in found.column_names else pa.chunked_array([pa.nulls(count, kind)])

    def placed(columnar_values: pa.Array, name: str) -> pa.Array:
        """``columnar_values`` with the Python rows' cells of column ``name`` in their places."""
        if not len(places):
            return columnar_values
        return pc.replace_with_mask(columnar_values, pa.array(from_python), by_python.column(name))

    source, key = value("source", pa.string()), value("group_key", pa.string())
    how = pa.array(np.where(columnar.to_numpy(zero_copy_only=False), "会话", None), pa.string())
    nothing = pa.array([""] * count, pa.string())
    group = (
        pc.binary_join_element_wise(source, how, key, nothing, "\x00\x00").combine_chunks().cast(pa.binary())
    )
    rank = np.zeros(count, dtype=np.int8)
    rank[places] = by_python.column("rank").to_numpy()
    number = value("sequence_number", pa.int64()).fill_null(0).to_numpy(zero_copy_only=False).copy()
    number[places] = by_python.column("number").to_numpy()
    columns = {
        "group": placed(group, "group"),
        "rank": pa.array(rank),
        "number": pa.array(number),
        "text": placed(nothing.cast(pa.binary()), "text"),
        "file_index": pa.array(np.full(count, file_index, dtype=np.int32)),
        "line": batch.column("number"),
        "size": pc.add(pc.binary_length(batch.column("line")), 1).cast(pa.int64()),
        "key": placed(pa.nulls(count, pa.binary()), "key"),
        "payload": placed(pa.nulls(count, pa.binary()), "payload"),
        "how": how,
    }
    arrays = [
        columns[f.name] if f.name in columns else value(f.name, f.type).cast(f.type)
        for f in converted.KEYED_SCHEMA
    ]
    table = pa.Table.from_arrays(arrays, schema=converted.KEYED_SCHEMA)
    return table if kept.all() else table.filter(pa.array(kept))


def wanted_sources(subsets: Iterable[str] | None) -> Callable[[pa.Array], pa.Array] | None:
    """Which 来源 ``parse.subset_wanted`` keeps of a 多轮对话 row, as a mask over a column; None: every one."""
    if not subsets or MULTITURN in subsets:
        return None
    prefix = f"{MULTITURN}/"
    names = {s for s in subsets} | {s[len(prefix) :] for s in subsets if s.startswith(prefix)}
    value_set = pa.array(sorted(names), pa.string())
    return lambda sources: pc.is_in(sources, value_set=value_set)


def python_rows(
    lines: Iterable[tuple[int, bytes]],
    name: str,
    file_index: int,
    key_row: Callable[[int, dict, bytes], keyed.Keyed | None],
    reject: Reject,
) -> Iterator[KeyedRow]:
    """Today's path for lines the columns leave to Python: each parsed as ``json_lines.read_objects`` parses it
    (a bad one rejected with its bytes), keyed by ``key_row`` (``keyed.keyed_file_rows``)."""

    def objects():
        for number, raw in lines:
            try:
                value = load_object(raw, name, line_place(number))
            except SourceError as error:
                reject(error, raw)
                continue
            yield number, 0, raw, value

    return keyed.keyed_file_rows(objects(), file_index, key_row, reject)


def opens_a_document(line: bytes) -> bool:
    """Whether a file's first non-blank line may be the start of one JSON document or a JSON array: then the file
    is read as ``json_lines.read_objects`` reads it (``jsonio.refuse_json_document`` tells it from JSON Lines)."""
    opening = line.removeprefix(b"\xef\xbb\xbf").lstrip()[:1]
    if opening == b"[":
        return True
    if opening != b"{":
        return False
    try:
        orjson.loads(line)
    except orjson.JSONDecodeError:
        try:
            json.loads(line)
        except (ValueError, RecursionError):
            return True
    return False


#: Rows of a batch made by Python where a whole file is read as today.
REFERENCE_BATCH_ROWS = 8192


def file_batches(
    path: str,
    name: str,
    file_index: int,
    key_row: Callable[[int, dict, bytes], keyed.Keyed | None],
    reject: Reject,
    subsets: Iterable[str] | None,
    reference: Callable[[], Iterable[KeyedRow]],
) -> Iterator[pa.RecordBatch]:
    """The keyed batches of a 多轮对话 file, in file order: each block of lines converted on columns, the lines
    the columns leave to Python converted by ``python_rows``. A file whose first line may open a JSON document is
    ``reference()``'s rows (today's reading of the whole file); an unreadable one goes to ``reject`` (scope the
    file) after the lines read before it, as ``json_lines.read_objects`` does."""
    try:
        name_json = orjson.dumps(name).decode()
    except orjson.JSONEncodeError:
        name_json = None
    batches = line_batches(path, name, block_bytes=BLOCK_BYTES)
    first = _next(batches, reject)
    if first is None:
        return
    if name_json is None or opens_a_document(first.column("line")[0].as_py()):
        rows = iter(reference())
        while chunk := list(itertools.islice(rows, REFERENCE_BATCH_ROWS)):
            yield keyed_columns.python_batch(chunk, converted.KEYED_SCHEMA, converted.values_of)
        return
    wanted = wanted_sources(subsets)

    def python(lines: pa.RecordBatch) -> pa.RecordBatch:
        pairs = zip(lines.column("number").to_pylist(), lines.column("line").to_pylist(), strict=True)
        rows = list(python_rows(pairs, name, file_index, key_row, reject))
        return keyed_columns.python_batch(rows, converted.KEYED_SCHEMA)

    batch = first
    while batch is not None:
        yield from keyed_table(batch, file_index, name_json, wanted, python).to_batches()
        batch = _next(batches, reject)


def _next(batches: Iterator[pa.RecordBatch], reject: Reject) -> pa.RecordBatch | None:
    """The next batch of lines; None at the end, or after an unreadable file went to ``reject``."""
    try:
        return next(batches)
    except StopIteration:
        return None
    except SourceError as error:
        reject(error, None, "file")
        return None
