"""多轮对话 rows keyed and converted on columns: a batch of lines (``convhub.engine.line_batches``) to a batch of
``converted.KEYED_SCHEMA``, by one DuckDB query over the Arrow batch, Python only for the rows it cannot say.

The columnar rows are those whose values ``converted.values_of`` gives, and exactly those values: a row of the
usual shape (``问``, ``答`` and ``来源`` strings, ``时间`` absent or a string, ``元数据`` an object of scalars
whose ``扩展字段`` is a flat JSON object with a ``会话`` (a non-empty string or an integer) and a 64-bit integer
``多轮序号``, and a ``create_time`` absent, null, empty or ``yyyymmdd HH:MM:SS``). Whatever DuckDB and Python could
read or write differently goes to Python (``ROUTE``): trailing commas and NaN that DuckDB accepts, floats,
integers past 64 bits, nested values, duplicate keys (DuckDB keeps them, Python one), lone surrogates, control
characters, JSON escapes DuckDB writes in upper case (``\\u000B``) where orjson writes them in lower case, any
other line than an object written from ``{`` to ``}``. Those rows take today's path (``json_lines.read_objects``'
parse, ``keyed.keyed_file_rows`` with ``multiturn.key_row``), which rejects a bad one as it always did, and keep
their payload and exact key (``keyed_columns.python_batch``, value columns null).
"""

from __future__ import annotations

import itertools
import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from builders.mnbvc import converted
from builders.mnbvc.parse import MULTITURN
from convhub.engine import keyed, keyed_columns
from convhub.engine.json_lines import line_place
from convhub.engine.jsonio import load_object
from convhub.engine.line_batches import line_batches
from convhub.engine.regroup import KeyedRow
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


def _plain(text: str) -> str:
    """SQL: an object from ``{`` to ``}`` that DuckDB reads as Python does (no ``TRAILING_COMMA``, no
    ``ESCAPE``)."""
    return (
        f"starts_with({text}, '{{') AND ends_with({text}, '}}') AND NOT regexp_matches({text}, $comma)"
        f" AND NOT regexp_matches({text}, $escape) AND json_valid({text})"
    )


#: Every function that may raise (on JSON it cannot read, a cast) is under a ``CASE`` whose condition says it
#: will not: DuckDB evaluates a ``CASE`` branch only for the rows it selects, where it may reorder conditions.
#: Every line comes out with ``columnar``, not only the columnar ones: filtered in DuckDB, its conditions were
#: pushed down and computed twice (a third slower).
QUERY = f"""
WITH plain AS (
  SELECT number, line, {_plain("line")} AS ok FROM mnbvc_lines
), parsed AS (
  SELECT number, line,
    CASE WHEN ok THEN json_structure(line) END AS structure,
    CASE WHEN ok THEN json_keys(line, ['$', '$."元数据"']) END AS keys,
    CASE WHEN ok THEN json_extract_string(line, {_paths(ROW_PATHS)}) END AS v
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
    AND t[{EXTENSION}] = 'VARCHAR' AND {_plain("e")} AS row_ok,
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
), checked AS (
  SELECT *, row_ok AND {_flat("e_structure", 1)}
    AND len(e_keys) = json_array_length(json_keys(e_structure))
    AND (json_extract_string(e_structure, '$."会话"') IN ('BIGINT', 'UBIGINT')
         OR (json_extract_string(e_structure, '$."会话"') = 'VARCHAR' AND ev[1] <> ''))
    AND json_extract_string(e_structure, '$."多轮序号"') IN ('BIGINT', 'UBIGINT')
    AND try_cast(ev[2] AS BIGINT) IS NOT NULL
    AND (ct IS NULL OR ct = '' OR fast_time) AS ok
  FROM extension
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
SELECT number, coalesce(ok AND NOT regexp_matches(extra, $upper), false) AS columnar, v[{SOURCE}] AS source, ev[1] AS group_key, ev[2] AS sequence,
  CASE WHEN ok THEN ev[2]::BIGINT END AS sequence_number, v[{QUESTION}] AS question,
  nullif(v[{ANSWER}], '') AS answer, extra, v[{TIME}] AS time, ct AS create_time
FROM made
"""

logger = logging.getLogger(__name__)
_CONNECTION: tuple[int, Any] | None = None
#: Bytes of lines converted at a time: one query each (planning one is some ms).
BLOCK_BYTES = 16 * 2**20


def connection():
    """This process's DuckDB connection (one thread: a build runs processes), made again in a forked child."""
    global _CONNECTION
    if _CONNECTION is None or _CONNECTION[0] != os.getpid():
        import duckdb  # here: DuckDB loads in the processes that convert, not in every build

        _CONNECTION = (os.getpid(), duckdb.connect(config={"threads": 1}))
    return _CONNECTION[1]


def duckdb_errors() -> type[Exception]:
    import duckdb

    return duckdb.Error


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
    database = connection()
    database.register("mnbvc_lines", lines)
    try:
        parameters = {"comma": TRAILING_COMMA, "escape": ESCAPE, "upper": UPPER_ESCAPE, "file": name_json}
        return database.sql(QUERY, params=parameters).to_arrow_table()
    except duckdb_errors() as error:  # JSON DuckDB could not read after all: the batch goes to Python
        logger.debug("a batch of lines left to Python: %s", error)
        return None
    finally:
        database.unregister("mnbvc_lines")


def keyed_columns_batch(
    batch: pa.RecordBatch, file_index: int, name_json: str, wanted: Callable[[pa.Array], pa.Array] | None
) -> tuple[pa.Table, pa.Array]:
    """(the columnar rows of a batch of lines as a table of ``converted.KEYED_SCHEMA``, a mask of the lines left
    to Python). A columnar row of a 来源 not ``wanted`` is left out, as ``key_row`` leaves it."""
    rows = columnar_rows(batch, name_json)
    if rows is None:
        return converted.KEYED_SCHEMA.empty_table(), pa.array([True] * batch.num_rows)
    columnar = rows.column("columnar").combine_chunks()
    rows = rows.filter(columnar)
    sizes = pc.add(pc.binary_length(batch.column("line").filter(columnar)), 1)
    if wanted is not None:
        keep = wanted(rows.column("source"))
        rows, sizes = rows.filter(keep), sizes.filter(keep)
    count = rows.num_rows
    how = pa.array(["会话"] * count, pa.string())
    group = pc.binary_join_element_wise(
        rows.column("source"), how, rows.column("group_key"), pa.array([""] * count, pa.string()), "\x00\x00"
    )
    columns = {
        "group": group.cast(pa.binary()),
        "rank": pa.array([0] * count, pa.int8()),
        "number": rows.column("sequence_number"),
        "text": pa.array([b""] * count, pa.binary()),
        "file_index": pa.array([file_index] * count, pa.int32()),
        "line": rows.column("number"),
        "size": sizes.cast(pa.int64()),
        "key": pa.nulls(count, pa.binary()),
        "payload": pa.nulls(count, pa.binary()),
        "source": rows.column("source"),
        "how": how,
        "group_key": rows.column("group_key"),
        "sequence": rows.column("sequence"),
        "question": rows.column("question"),
        "answer": rows.column("answer"),
        "extra": rows.column("extra"),
        "time": rows.column("time"),
        "create_time": rows.column("create_time"),
    }
    arrays = [columns[f.name].cast(f.type) for f in converted.KEYED_SCHEMA]
    return pa.Table.from_arrays(arrays, schema=converted.KEYED_SCHEMA), pc.invert(columnar)


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
    batch = first
    while batch is not None:
        table, left = keyed_columns_batch(batch, file_index, name_json, wanted)
        routed = batch.filter(left)
        if routed.num_rows:
            pairs = zip(routed.column("number").to_pylist(), routed.column("line").to_pylist(), strict=True)
            rows = list(python_rows(pairs, name, file_index, key_row, reject))
            if rows:
                python = pa.Table.from_batches([keyed_columns.python_batch(rows, converted.KEYED_SCHEMA)])
                table = pa.concat_tables([table, python]).sort_by("line")
        yield from table.combine_chunks().to_batches()
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
