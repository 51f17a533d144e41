"""Read every config of built folders with one client, and print a digest of the values it saw.

Run by ``scripts/client_matrix.py`` inside a throwaway virtual environment that holds one client (one
``datasets`` release, pandas on one pyarrow, polars or DuckDB) and nothing of convhub's: this file imports only
the standard library and the client, so that what it reports is what a user of that client gets.

    python client_probe.py KIND PLAN.json   # prints one JSON document on stdout

``PLAN.json`` (written by the matrix) names each folder's configs, their splits, the Parquet files of each
split and, for each JSON-text column, a few ``$.key`` paths with the value ``json.loads`` finds there. The
probe answers with, per config and split, the row count, the column names, a sha256 of the values normalized
to JSON (so that every client's types compare: datetimes as ISO text, pandas' NaN as null, numpy arrays as
lists), and the values its own JSON functions extract at those paths (polars ``str.json_path_match``, DuckDB
``->>``; Python clients ``json.loads``). A cell the client hands back as ``bytes`` or as a type it cannot say
is an error, not a guess.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import sys
import traceback
from typing import Any


def normalize(value: Any) -> Any:
    """One value as plain JSON, whichever client produced it; raise on what no client should hand back."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if math.isnan(value):
            return None  # pandas' missing value in a nullable integer column
        if value.is_integer():
            return int(value)
        return value
    if isinstance(value, dict):
        return {str(key): normalize(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalize(item) for item in value]
    if isinstance(value, (datetime.datetime, datetime.date)):
        return (
            None if value != value else normalize_datetime(value)
        )  # pandas' NaT is a datetime, unequal to itself
    type_name = type(value).__module__ + "." + type(value).__qualname__
    if type_name.startswith("numpy.") and hasattr(value, "tolist"):
        return normalize(value.tolist())
    if type_name == "pandas._libs.missing.NAType":
        return None
    raise TypeError(f"a cell of type {type_name} ({value!r:.80}): not a value this client should hand back")


def normalize_datetime(value: datetime.date) -> str:
    if isinstance(value, datetime.datetime):
        return value.replace(tzinfo=None).isoformat(timespec="milliseconds")
    return value.isoformat()


def digest(rows: list[dict[str, Any]]) -> str:
    text = json.dumps([normalize(row) for row in rows], sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def json_paths_python(rows: list[dict[str, Any]], probes: list[dict[str, Any]]) -> list[Any]:
    """What ``json.loads`` finds at each probe's path: the answer of the Python clients."""
    found = []
    for probe in probes:
        cell = rows[probe["row"]][probe["column"]]
        found.append(json.loads(cell)[probe["key"]])
    return found


def summary(rows: list[dict[str, Any]], columns: list[str], json_found: list[Any]) -> dict[str, Any]:
    return {"rows": len(rows), "columns": columns, "sha256": digest(rows), "json_paths": json_found}


# --- one reader per kind of client -------------------------------------------------------------------------


def read_pyarrow(files: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
    import pyarrow.parquet as pq

    table = pq.ParquetDataset(files).read() if len(files) > 1 else pq.read_table(files[0])
    return table.to_pylist(), table.column_names


def read_pandas(files: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
    import pandas as pd

    frame = pd.concat([pd.read_parquet(path) for path in files], ignore_index=True)
    return frame.to_dict(orient="records"), [str(column) for column in frame.columns]


def read_polars(files: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
    import polars as pl

    frame = pl.read_parquet(files)
    return frame.to_dicts(), frame.columns


def polars_json_paths(files: list[str], probes: list[dict[str, Any]]) -> list[Any]:
    import polars as pl

    frame = pl.read_parquet(files)
    found = []
    for probe in probes:
        extracted = frame.select(pl.col(probe["column"]).str.json_path_match(f"$.{probe['key']}"))
        found.append(extracted.to_series()[probe["row"]])
    return found


def read_duckdb(files: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
    import duckdb

    relation = duckdb.sql(f"SELECT * FROM read_parquet({sql_list(files)})")
    columns = relation.columns
    return [dict(zip(columns, values, strict=True)) for values in relation.fetchall()], columns


def duckdb_json_paths(files: list[str], probes: list[dict[str, Any]]) -> list[Any]:
    import duckdb

    found = []
    for probe in probes:
        query = f"SELECT {quote_ident(probe['column'])} ->> '$.{probe['key']}' FROM read_parquet({sql_list(files)})"
        found.append(duckdb.sql(query).fetchall()[probe["row"]][0])
    return found


def sql_list(files: list[str]) -> str:
    return "[" + ", ".join("'" + path.replace("'", "''") + "'" for path in files) + "]"


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def read_datasets(folder: str, config: str, streaming: bool) -> dict[str, tuple[list[dict], list[str]]]:
    """Every split of one config, as ``load_dataset(folder, config)`` gives it (map-style or streaming)."""
    import datasets

    loaded = datasets.load_dataset(folder, config, streaming=streaming)
    splits = {}
    for split, dataset in loaded.items():
        rows = list(dataset)
        columns = list(dataset.features) if dataset.features is not None else list(rows[0]) if rows else []
        splits[split] = (rows, columns)
    return splits


# --- the probe ---------------------------------------------------------------------------------------------


def probe_folder(kind: str, folder: dict[str, Any]) -> dict[str, Any]:
    """Every config and split of one folder, read by ``kind``; an error is reported per config, not raised."""
    report: dict[str, Any] = {}
    for config, splits in folder["configs"].items():
        try:
            report[config] = probe_config(kind, folder["path"], config, splits)
        except Exception as error:
            report[config] = {"error": "".join(traceback.format_exception_only(type(error), error)).strip()}
    return report


def probe_config(kind: str, path: str, config: str, splits: dict[str, Any]) -> dict[str, Any]:
    if kind in {"datasets", "datasets-streaming"}:
        loaded = read_datasets(path, config, streaming=kind == "datasets-streaming")
        if sorted(loaded) != sorted(splits):
            raise ValueError(f"splits {sorted(loaded)}, the card names {sorted(splits)}")
        return {
            split: summary(*loaded[split], json_paths_python(loaded[split][0], plan["json_probes"]))
            for split, plan in splits.items()
        }
    readers = {"pyarrow": read_pyarrow, "pandas": read_pandas, "polars": read_polars, "duckdb": read_duckdb}
    report = {}
    for split, plan in splits.items():
        rows, columns = readers[kind](plan["files"])
        if kind == "polars":
            found = polars_json_paths(plan["files"], plan["json_probes"])
        elif kind == "duckdb":
            found = duckdb_json_paths(plan["files"], plan["json_probes"])
        else:
            found = json_paths_python(rows, plan["json_probes"])
        report[split] = summary(rows, columns, found)
    return report


def main(argv: list[str]) -> int:
    kind, plan_path = argv
    with open(plan_path, encoding="utf-8") as handle:
        plan = json.load(handle)
    report = {name: probe_folder(kind, folder) for name, folder in plan["folders"].items()}
    json.dump(report, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
