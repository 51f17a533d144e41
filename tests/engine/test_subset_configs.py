"""Per-subset configs (``SUBSET_CONFIGS``): files of a split with one subset are moved, not rewritten."""

from __future__ import annotations

import datasets
import pytest

from convhub import registry
from convhub.engine.build import build_source


@pytest.mark.slow
def test_a_build_of_one_subset_moves_its_files_and_loads_alone_and_whole(tmp_path):
    sample = registry.get("convlab").sample_dir()
    whole = build_source("convlab", tmp_path / "whole", data_dir=sample)
    one = build_source("convlab", tmp_path / "one", data_dir=sample, subsets=["toyhotel"], num_proc=2)
    sessions = one.configs["sessions"]
    assert set(sessions.subsets) == {"toyhotel"}
    for split, files in sessions.files.items():
        assert files and all(path.startswith("sessions/toyhotel/") for path in files)
        assert all((one.output / path).exists() for path in files)
        assert sessions.subsets["toyhotel"].files[split] == files
    assert not list((one.output / "sessions").glob("*.parquet"))  # nothing left outside the subset folder
    for view in ("sessions", "turns", "messages"):
        alone = datasets.load_dataset(str(one.output), f"{view}-toyhotel")
        plain = datasets.load_dataset(str(one.output), view)
        everything = datasets.load_dataset(str(whole.output), view)
        for split in alone:
            expected = [row for row in everything[split].to_list() if row["subset"] == "toyhotel"]
            assert alone[split].to_list() == plain[split].to_list() == expected
