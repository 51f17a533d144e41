"""The benchmarks know LongMemEval: a scaled input in its format, and an oracle that skips what was never saved."""

from __future__ import annotations

import json

import oracle
import pytest
import scaled_inputs


def test_the_scaled_input_has_both_file_names_and_recurring_fillers(tmp_path):
    made = scaled_inputs.make("longmemeval", tmp_path / "in", 0.01)
    assert [path.name for path in made.files] == ["longmemeval_part0.json", "longmemeval_part1"]
    instances = [item for path in made.files for item in json.loads(path.read_text(encoding="utf-8"))]
    assert len(instances) == 5 and len({item["question_id"] for item in instances}) == 5
    fillers = [set(item["haystack_session_ids"]) for item in instances]
    assert fillers[0] & fillers[1]  # a filler session in two haystacks
    assert all(len(item["haystack_sessions"]) == len(item["haystack_dates"]) for item in instances)


@pytest.mark.slow
def test_against_skips_a_source_the_saved_folder_lacks(tmp_path, capsys):
    reference = tmp_path / "reference"
    assert oracle.main(["--save", str(reference), "--source", "longmemeval", "--scale", "0.004"]) == 0
    argv = ["--against", str(reference), "--source", "longmemeval", "--source", "gigamemory"]
    assert oracle.main(argv) == 0
    output = capsys.readouterr().out
    assert f"| gigamemory | (none saved) | skipped: {reference} holds no build of it | | |" in output
    assert "| longmemeval | sample | export (bytes) | 0 | equal |" in output
    assert "0 difference(s)" in output
