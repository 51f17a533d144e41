"""``convhub mix`` against what a newcomer and an attacker hit (issue 33): recipes that would write outside the
output, never finish, fail late or with a traceback, and mixtures that repeat a few rows unnoticed.

Sources are small build folders written here (``tests/support/mix_sources.py``); the Hub is ``tests/support/hub_double.py``,
and "unreachable" is a loopback port that is bound and never listens.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import subprocess
import sys

import pytest

from convhub import mix
from convhub.cli import main as cli
from convhub.mix import output as mix_output
from tests.support.mix_sources import (  # noqa: F401 (short_arrow_shutdown_pause: an autouse fixture)
    conversation,
    ids,
    numbered,
    recipe,
    short_arrow_shutdown_pause,
    write_source,
)

# -- 1. split names --------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["output_split", "eval_split"])
@pytest.mark.parametrize(
    ("split", "problem"),
    [
        ("../../../victim/data/train", "not a split name"),
        ("a-b", "not a split name"),
        ("a b", "not a split name"),
        ("train*", "not a split name"),
        ("a/b", "not a split name"),
        ("train\n", "not a split name"),
        ("train..x", "not a split name"),
        ("all", "datasets reserves"),
        ("ALL", "datasets reserves"),
    ],
)
def test_split_names_the_mixture_writes_are_checked_at_recipe_load(key, split, problem):
    document = {key: split, "sources": [{"path": "a"}]}
    with pytest.raises(mix.RecipeError, match=problem) as caught:
        mix.parse_recipe(document)
    assert caught.value.key == key


def test_usable_split_names_pass():
    parsed = mix.parse_recipe({"output_split": "train.v2", "eval_split": "dev_1", "sources": [{"path": "a"}]})
    assert (parsed.output_split, parsed.eval_split) == ("train.v2", "dev_1")


def test_an_output_split_that_climbs_out_leaves_the_users_file_alone(tmp_path, capsys):
    write_source(tmp_path / "a", numbered("a", 2))
    victim = tmp_path / "victim" / "train-00000-of-00001.parquet"  # where ../../victim/train would land
    victim.parent.mkdir()
    victim.write_bytes(b"the user's own file")
    (tmp_path / "recipe.yaml").write_text("output_split: ../../victim/train\nsources: [{path: a}]\n")
    capsys.readouterr()  # the fixtures' own output

    status = cli.main(["mix", str(tmp_path / "recipe.yaml"), "--output", str(tmp_path / "out")])

    assert status == 1
    assert victim.read_bytes() == b"the user's own file"
    assert not (tmp_path / "out").exists()
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("convhub mix: error: ") and "recipe key 'output_split'" in line


# -- 2. bounds: repeat and all_exhausted ----------------------------------------------------------


def test_many_passes_cost_an_index_not_a_table_per_pass(tmp_path):
    write_source(tmp_path / "a", numbered("a", 2))
    mixed = mix.mixture(recipe(tmp_path, "sources: [{path: a, repeat: 2000}]"))
    assert len(mixed) == 4000 and ids(mixed.select(range(4))) == ["a-0", "a-1", "a-0", "a-1"]
    assert len(mixed.data) == 2  # the source's 2 rows, indexed 4,000 times: not 2,000 copies of its table


def test_a_repeat_past_max_rows_is_refused_before_mixing(tmp_path):
    with pytest.raises(mix.RecipeError, match=r"max_rows \(10,000,000\)") as caught:
        mix.parse_recipe({"sources": [{"path": "a", "repeat": 20_000_000}]})
    assert caught.value.key == "sources[0].repeat"

    write_source(tmp_path / "a", numbered("a", 2))
    write_source(tmp_path / "b", numbered("b", 5))
    text = "max_rows: 1000\nsources: [{path: b}, {path: a, repeat: 600}]"  # 1,205 rows of 7 distinct
    with pytest.raises(
        mix.RecipeError, match=r"a's repeat 600 makes 1,200 rows.*max_rows \(1,000\)"
    ) as caught:
        mix.mixture(recipe(tmp_path, text))
    assert caught.value.key == "sources[1].repeat"
    assert len(mix.mixture(recipe(tmp_path, text.replace("600", "400")))) == 805


def test_all_exhausted_that_cannot_finish_is_refused_at_recipe_load():
    document = {
        "stopping_strategy": "all_exhausted",
        "sources": [{"path": "a", "weight": 1e-9}, {"path": "b", "weight": 1e9}],
    }
    with pytest.raises(mix.RecipeError, match="all_exhausted_without_replacement") as caught:
        mix.parse_recipe(document)
    assert caught.value.key == "sources[0].weight"
    first = mix.parse_recipe({**document, "stopping_strategy": "first_exhausted"})
    assert first.probabilities[0] == pytest.approx(1e-18)  # the weights themselves are fine


@pytest.mark.slow
def test_all_exhausted_past_max_rows_is_refused_from_the_source_lengths(tmp_path):
    # 1/51 of the draws go to `a`: using up its 40 rows takes about 2,040 rows, of 43 distinct
    write_source(tmp_path / "a", numbered("a", 40))
    write_source(tmp_path / "small", numbered("s", 3))
    text = """
        max_rows: 1000
        stopping_strategy: all_exhausted
        sources: [{path: a, weight: 1}, {path: small, weight: 50}]
        """
    with pytest.raises(
        mix.RecipeError, match=r"about 2,040 rows of 43 distinct.*max_rows \(1,000\)"
    ) as caught:
        mix.mixture(recipe(tmp_path, text))
    assert caught.value.key == "sources[0].weight"
    # streamed: refused as soon, from the local builds' Parquet row counts, not after max_rows rows
    with pytest.raises(mix.RecipeError, match=r"about 2,040 rows of 43 distinct") as caught:
        mix.write_mixture(recipe(tmp_path, text), tmp_path / "out", streaming=True)
    assert caught.value.key == "sources[0].weight" and not (tmp_path / "out").exists()
    assert len(mix.mixture(recipe(tmp_path, text.replace("1000", "5000")))) > 1000


@pytest.mark.slow
def test_a_streamed_repeat_past_max_rows_is_refused_before_a_row_is_read(tmp_path, monkeypatch):
    write_source(tmp_path / "a", numbered("a", 2))
    write_source(tmp_path / "b", numbered("b", 5))
    text = "max_rows: 1000\nsources: [{path: b}, {path: a, repeat: 600}]"  # 1,205 rows of 7 distinct

    def no_row(*args, **kwargs):
        raise AssertionError("a row was read")

    monkeypatch.setattr(mix_output, "_iterate", no_row)
    with pytest.raises(
        mix.RecipeError, match=r"a's repeat 600 makes 1,200 rows: 1,205 rows of 7 distinct"
    ) as caught:
        mix.write_mixture(recipe(tmp_path, text), tmp_path / "out", streaming=True)
    assert caught.value.key == "sources[1].repeat" and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_streamed_source_that_filters_keeps_the_bound_as_rows_arrive(tmp_path):
    """Filters make a streamed source's rows unknown before it is read: the bound holds as the rows arrive."""
    write_source(tmp_path / "a", numbered("a", 2))
    text = "max_rows: 1000\nsources: [{path: a, repeat: 600, filters: {min_turns: 1}}]"
    with pytest.raises(mix.RecipeError, match="passed 1,000 rows") as caught:
        mix.write_mixture(recipe(tmp_path, text), tmp_path / "out", streaming=True)
    assert caught.value.key == "max_rows" and not (tmp_path / "out").exists()


@pytest.mark.parametrize("streaming", [[], ["--streaming"]])
def test_the_mixture_s_size_is_said_before_mixing(tmp_path, caplog, streaming):
    write_source(tmp_path / "a", numbered("a", 2))
    write_source(tmp_path / "b", numbered("b", 5))
    (tmp_path / "recipe.yaml").write_text("sources: [{path: b}, {path: a, repeat: 400}]")  # 805 rows of 7
    arguments = ["mix", str(tmp_path / "recipe.yaml"), "--output", str(tmp_path / "out"), *streaming]
    with caplog.at_level(logging.INFO, logger="convhub.build"):  # (the command's phase lines)
        assert cli.main(arguments) == 0
    said = [record.getMessage() for record in caplog.records if "mixing about" in record.getMessage()]
    assert len(said) == 1 and said[0].startswith("recipe: mixing about 805 rows of 7 distinct"), said
    assert said[0].endswith("MB in Arrow)") != bool(streaming)


# -- 3. weights, probabilities, empty streamed sources --------------------------------------------


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan"])
@pytest.mark.parametrize("name", ["weight", "probability"])
def test_a_weight_that_is_not_a_finite_number_names_its_key(tmp_path, name, value):
    with pytest.raises(mix.RecipeError, match="finite number > 0") as caught:
        recipe(tmp_path, f"sources: [{{path: a, {name}: {value}}}, {{path: b, {name}: 1}}]")
    assert caught.value.key == f"sources[0].{name}"


def test_probabilities_within_the_tolerance_are_normalised_for_numpy(tmp_path):
    write_source(tmp_path / "a", numbered("a", 20))
    write_source(tmp_path / "b", numbered("b", 20))
    parsed = recipe(
        tmp_path, "sources: [{path: a, probability: 0.3333333}, {path: b, probability: 0.666666}]"
    )
    assert math.fsum(parsed.probabilities) == pytest.approx(1.0, abs=1e-12)
    assert len(mix.mixture(parsed)) > 0  # numpy refused a sum 7e-7 from 1
    huge = mix.parse_recipe({"sources": [{"path": "a", "weight": 1e308}, {"path": "b", "weight": 1e308}]})
    assert huge.probabilities == [0.5, 0.5]  # their sum overflows to inf


def test_a_streamed_source_emptied_by_filters_fails_as_the_map_style_one(tmp_path):
    write_source(tmp_path / "a", numbered("a", 4))
    write_source(tmp_path / "b", numbered("b", 3))
    parsed = recipe(
        tmp_path, "sources: [{path: a, weight: 1}, {path: b, weight: 1, filters: {min_turns: 3}}]"
    )
    for streaming in (False, True):
        with pytest.raises(mix.RecipeError, match="b has no rows left to interleave") as caught:
            mix.mixture(parsed, streaming=streaming)
        assert caught.value.key == "sources[1]"


# -- 4. recipe files that are not recipes ---------------------------------------------------------


@pytest.mark.slow
def test_a_deeply_nested_recipe_and_a_folder_are_one_error(tmp_path, capsys):
    deep = tmp_path / "deep.yaml"
    deep.write_text("sources: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(mix.RecipeError, match="nested too deeply") as caught:
        mix.load_recipe(deep)
    assert caught.value.key == "<document>"
    with pytest.raises(mix.RecipeError, match="is a folder") as caught:
        mix.load_recipe(tmp_path)
    capsys.readouterr()
    for path in (deep, tmp_path):
        status = cli.main(["mix", str(path), "--output", str(tmp_path / "out")])
        err = capsys.readouterr().err
        assert status in (1, 2) and "Traceback" not in err
        [line] = err.strip().splitlines()
        assert line.startswith("convhub mix: error: ")


def test_a_long_or_nested_value_is_quoted_short(tmp_path):
    (tmp_path / "recipe.yaml").write_text("name: " + "[" * 300 + "]" * 300 + "\nsources: [{path: a}]\n")
    with pytest.raises(mix.RecipeError, match="must be a string") as caught:
        mix.load_recipe(tmp_path / "recipe.yaml")
    assert caught.value.key == "name" and len(str(caught.value)) < 200


# -- 5. the Hub ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_an_unreachable_hub_is_one_line_naming_the_endpoint(tmp_path):
    """A fresh process whose HF_ENDPOINT is a port that is bound and never listens: refused at once."""
    (tmp_path / "recipe.yaml").write_text("sources: [{repo: org/a-unified, weight: 1}]\n")
    with socket.socket() as reserved:
        reserved.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{reserved.getsockname()[1]}"
        finished = subprocess.run(
            [sys.executable, "-m", "convhub.cli.main", "mix", "recipe.yaml", "--output", "out"],
            cwd=tmp_path,
            env={**os.environ, "HF_ENDPOINT": endpoint},
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert finished.returncode == 1, finished.stderr
    [line] = finished.stderr.strip().splitlines()
    assert line == (
        "convhub mix: error: recipe.yaml: recipe key 'sources[0].repo': could not connect to the Hub at "
        f"{endpoint} (HF_ENDPOINT): connection refused (reading org/a-unified)"
    )
    assert not (tmp_path / "out").exists()


def test_a_missing_hub_repo_or_revision_names_its_key(hub, tmp_path):
    from convhub.publish.push import push_folder

    push_folder(write_source(tmp_path / "a", numbered("a", 3)), "org/a-unified")
    with pytest.raises(mix.RecipeError, match="cannot read org/nothing") as caught:
        mix.mixture(recipe(tmp_path, "sources: [{repo: org/nothing}]"), streaming=True)
    assert caught.value.key == "sources[0].repo"
    with pytest.raises(mix.RecipeError, match="cannot read org/a-unified") as caught:
        mix.mixture(recipe(tmp_path, "sources: [{repo: org/a-unified, revision: v9}]"), streaming=True)
    assert caught.value.key == "sources[0].revision"


@pytest.mark.slow
def test_a_hub_lost_after_the_first_file_ends_the_stream_in_bounded_tries_with_one_line(
    hub, tmp_path, capsys, monkeypatch
):
    """The second of a source's two files never arrives (every connection for it closed unanswered): ``datasets``
    tried 20 times, each with ``huggingface_hub``'s five retries, 9.5 minutes, and said "Server Disconnected"."""
    import datasets
    import pyarrow.parquet as pq

    from convhub.publish import hub_client
    from convhub.publish.push import push_folder

    monkeypatch.setattr(datasets.config, "STREAMING_READ_RETRY_INTERVAL", 0)  # the test's time, not the tries
    folder = write_source(tmp_path / "a", numbered("a", 40))
    whole = folder / "messages" / "train-00000-of-00001.parquet"
    table = pq.read_table(whole)
    whole.unlink()
    pq.write_table(table.slice(0, 20), folder / "messages" / "train-00000-of-00002.parquet")
    pq.write_table(table.slice(20), folder / "messages" / "train-00001-of-00002.parquet")
    push_folder(folder, "org/a-unified")
    (tmp_path / "recipe.yaml").write_text("sources: [{repo: org/a-unified}]\n")
    hub.fail_next("resolve", times=10_000, drop=True, path="train-00001")
    arguments = ["mix", str(tmp_path / "recipe.yaml"), "--output", str(tmp_path / "out"), "--streaming"]
    assert cli.main(arguments) == 1
    assert datasets.config.STREAMING_READ_MAX_RETRIES == hub_client.STREAMING_TRIES == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("convhub")]
    assert lines == [
        f"convhub mix: error: lost the connection to the Hub at {hub.url} (HF_ENDPOINT) while reading "
        f"/datasets/org/a-unified/resolve/{hub.repo('org/a-unified').head().sha}/messages/"
        "train-00001-of-00002.parquet, on every try: Server disconnected without sending a response."
    ]
    tried = [call for call in hub.calls("resolve") if "train-00001" in call.path]
    assert 2 <= len(tried) <= 6 * hub_client.STREAMING_TRIES + 2  # each try: one request and five retries
    assert not (tmp_path / "out").exists()


# -- 6. oversampling --------------------------------------------------------------------------------


def test_oversampling_past_the_distinct_rows_is_warned_about_and_counted_as_passes(tmp_path, capsys):
    write_source(tmp_path / "a", numbered("a", 40))
    write_source(tmp_path / "small", numbered("s", 2))
    (tmp_path / "recipe.yaml").write_text(
        "seed: 3\nstopping_strategy: all_exhausted\nsources: [{path: a, weight: 1}, {path: small, weight: 1}]\n"
    )
    result = mix.write_mixture(mix.load_recipe(tmp_path / "recipe.yaml"), tmp_path / "out")
    a, small = result.reports
    assert (a.rows, a.distinct_rows, small.distinct_rows) == (40, 40, 2) and small.rows > 10
    [warning] = result.oversampling_warnings()
    share = f"{small.rows / result.rows:.1%}"
    passes = mix.passes(small)
    assert float(passes) == pytest.approx(small.rows / 2, abs=0.05)
    assert warning.startswith(
        f"small: oversampled: {small.rows} rows from 2 distinct ({passes} passes, {share} of the mixture)"
    )
    card = (tmp_path / "out" / "README.md").read_text(encoding="utf-8")
    assert f"| {small.rows} | 2 | {passes} | {share} |" in card and "| 40 | 40 | 1 |" in card
    capsys.readouterr()
    assert cli.main(["mix", str(tmp_path / "recipe.yaml"), "--output", str(tmp_path / "cli")]) == 0
    printed = capsys.readouterr()
    assert f"warning: {warning}" in printed.err.splitlines()
    assert any(
        line.split()[:1] == ["small"] and f" {passes} passes " in line for line in printed.out.splitlines()
    )

    asked = mix.write_mixture(
        recipe(tmp_path, "sources: [{path: small, repeat: 3}, {path: a}]"), tmp_path / "r"
    )
    assert asked.oversampling_warnings() == [] and mix.passes(asked.reports[0]) == "3"
