"""LoCoMo's ``--data-dir`` at a URL: one file, or some subsets of a folder, each opened where its task reads it.
``tests/storage/test_input_url.py`` builds and streams every source from a URL the same way.
"""

from __future__ import annotations

from convhub import registry
from convhub.engine.build import build_source
from convhub.storage.folders import folder_at
from tests.support.data_files import tables, uploaded


def test_a_locomo_url_to_one_file_and_a_subset_of_a_folder(bucket, sample_builds, tmp_path):
    url = uploaded(registry.get("locomo").sample_dir(), bucket)
    (folder_at(url) / "other.json").write_bytes(b"[]")  # another subset, not asked for
    one_file = build_source("locomo", tmp_path / "file", f"{url}/locomo_sample.json", configs=["sessions"])
    subset = build_source("locomo", tmp_path / "subset", url, configs=["sessions"], subsets=["locomo_sample"])
    expected = tables(sample_builds["locomo"].output)["sessions/test-00000-of-00001.parquet"]
    for result in (one_file, subset):
        assert tables(result.output)["sessions/test-00000-of-00001.parquet"].equals(expected)
