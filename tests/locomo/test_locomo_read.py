"""Reading a LoCoMo file one sample at a time gives what ``json.loads`` gives, and names a broken file."""

from __future__ import annotations

import gc
import json

import pytest

from convhub.builders.locomo.builder import LocomoBuilder, samples_of
from convhub.errors import Notes, SourceError
from tests.locomo.locomo_samples import records_of, shard_of, tiny_sample

# -- values ------------------------------------------------------------------------------------------------


def test_an_integer_beyond_64_bits_in_an_unknown_key_is_kept_exactly(tmp_path):
    sample = tiny_sample()
    sample["qa"][0]["big"] = 123456789012345678901234567890
    path = tmp_path / "big.json"
    path.write_text(json.dumps([sample]), encoding="utf-8")
    [record] = records_of(path)
    assert '"big": 123456789012345678901234567890' in record["questions"][0]["extra"]


def test_the_parser_leaves_the_cycle_collector_as_the_caller_set_it(tmp_path):
    """A caller that holds a record, stops iterating or raises finds the collector as it left it."""
    path = tmp_path / "two.json"
    path.write_text(json.dumps([tiny_sample("conv-1"), tiny_sample("conv-2")]), encoding="utf-8")
    records = LocomoBuilder(config_name="sessions").records_of(shard_of(path), Notes())
    next(records)
    assert gc.isenabled()
    assert [record["conversation_id"] for record in records] == ["conv-2"]
    assert gc.isenabled()
    gc.disable()  # a caller that runs without the collector keeps it off
    try:
        assert len(records_of(path)) == 2
        assert not gc.isenabled()
    finally:
        gc.enable()


# -- a file is read one sample at a time -------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '[{"n": 123456789012345678901234567890}, {"m": 2}]',
        '[{"x": 1}, {"x": NaN}, {"x": Infinity}, {"x": 1.5e400}]',
        '[{"x": "fine"}, {"x": "\\ud800 lone high"}, {"x": "\\ud83d\\ude00 a pair"}]',
        '[{"a": 1, "a": 2}]',
    ],
)
def test_samples_are_read_one_at_a_time_as_json_loads_reads_them(tmp_path, text):
    path = tmp_path / "f.json"
    path.write_text(text, encoding="utf-8")
    assert repr([sample for _, sample in samples_of(str(path))]) == repr(json.loads(text))


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "the file is empty"),
        ('{"a": 1}', "expected a JSON list of samples"),
        ("[]", "no samples: the list is empty"),
        ('[{"a": 1}] trailing', "data after the end of the top-level list"),
    ],
)
def test_a_file_that_is_not_a_list_of_samples_is_named(tmp_path, text, problem):
    path = tmp_path / "f.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SourceError, match=f"f.json: {problem}"):
        list(samples_of(str(path)))


def test_samples_come_before_the_end_of_the_file_is_read(tmp_path):
    """Memory follows one sample, not the file: the first samples arrive although the file is broken
    further on, and the break is named by its byte."""
    path = tmp_path / "broken.json"
    path.write_text(json.dumps([tiny_sample("conv-1"), tiny_sample("conv-2")])[:-1] + ", {", encoding="utf-8")
    records = LocomoBuilder(config_name="sessions").parse_shard(shard_of(path), Notes())
    assert [next(records)["conversation_id"], next(records)["conversation_id"]] == ["conv-1", "conv-2"]
    with pytest.raises(SourceError, match=r"broken.json, record 2: not valid JSON: .* at byte \d+"):
        next(records)
