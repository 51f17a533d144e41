"""The client matrix's own parts, on this environment's clients (pyarrow, pandas, datasets).

The matrix itself (throwaway environments with datasets 3.6 / 4.8 / 5.2, pandas on pyarrow 17, polars, DuckDB)
runs in CI after the tests: ``python scripts/client_matrix.py``. These tests check that its plan, digests and
comparison say what they claim, so that an "ok" there means equal values.
"""

from __future__ import annotations

import copy
import datetime
from pathlib import Path

import client_matrix
import client_probe
import pandas as pd
import pytest


@pytest.fixture(scope="module")
def plan(sample_builds):
    return client_matrix.make_plan([result.output for result in sample_builds.values()])


def test_the_plan_lists_every_config_and_file_of_every_card(plan, sample_builds):
    for result in sample_builds.values():
        configs = plan["folders"][result.output.name]["configs"]
        assert set(result.configs) <= set(configs)
        for name, built in result.configs.items():
            for split, files in built.files.items():
                planned = configs[name][split]["files"]
                assert sorted(Path(path).relative_to(result.output).as_posix() for path in planned) == sorted(
                    files
                )


def test_json_probes_name_a_string_that_json_loads_finds(plan):
    probes = [
        probe
        for folder in plan["folders"].values()
        for splits in folder["configs"].values()
        for split in splits.values()
        for probe in split["json_probes"]
    ]
    assert len(probes) >= 10
    assert {probe["column"] for probe in probes} >= {"extra", "entity"}
    assert all(isinstance(probe["value"], str) for probe in probes)


@pytest.mark.slow
def test_pandas_and_datasets_here_read_the_values_pyarrow_reads(plan):
    expected = client_matrix.reference(plan)
    for kind in ("pandas", "datasets"):
        got = {name: client_probe.probe_folder(kind, folder) for name, folder in plan["folders"].items()}
        assert client_matrix.compare(expected, plan, got) == []


def test_a_changed_value_column_name_or_json_answer_is_reported(plan):
    expected = client_matrix.reference(plan)
    folder, config, split = "locomo-unified", "qa", "test"
    for field, value, message in [
        ("sha256", "0" * 64, "values differ"),
        ("columns", ["question"], "columns"),
        ("rows", 0, "0 rows"),
    ]:
        got = copy.deepcopy(expected)
        got[folder][config][split][field] = value
        [line] = client_matrix.compare(expected, plan, got)
        assert line.startswith(f"{folder} {config} {split}: {message}")
    got = copy.deepcopy(expected)
    got[folder][config] = {"error": "TypeError: 'module' object is not callable"}
    assert client_matrix.compare(expected, plan, got) == [
        f"{folder} {config}: TypeError: 'module' object is not callable"
    ]


def test_normalize_makes_pandas_missing_values_null_and_refuses_bytes():
    assert client_probe.normalize(pd.NaT) is None
    assert client_probe.normalize(float("nan")) is None
    assert client_probe.normalize(3.0) == 3
    assert client_probe.normalize(pd.Timestamp("2023-05-08 13:56:00")) == "2023-05-08T13:56:00.000"
    assert client_probe.normalize(datetime.datetime(2023, 5, 8, 13, 56)) == "2023-05-08T13:56:00.000"
    with pytest.raises(TypeError, match="bytes"):
        client_probe.normalize(b'{"a": 1}')
