"""``streaming=True`` for every builder and every shared config: the streamed rows are the built rows.

The build (``build_source``) writes Parquet and derives turns/qa/messages with Arrow; streaming runs the
builder's generator and the Python view functions. On each packaged sample both must give the same rows
in the same order, read back through ``load_dataset``. MNBVC is the one exception, by design: its build
regroups a multi-turn conversation spread over files, which a single streaming pass cannot, so for its
multi-turn rows only the turns (as a multiset) must match; its forum and Q/A rows match one for one.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import datasets
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from convhub import registry
from convhub.views.definitions import SHARED_VIEWS

CASES = [(source, view.name) for source in registry.names() for view in SHARED_VIEWS]


def built_rows(result, config: str, split: str, cache_dir) -> list[dict]:
    files = [str(result.output / relative) for relative in result.configs[config].files[split]]
    return datasets.load_dataset(
        "parquet", data_files=files, split="train", cache_dir=str(cache_dir)
    ).to_list()


def streamed_split(source: str, config: str, split: str) -> datasets.IterableDataset:
    builder_cls = registry.get(source)
    builder = builder_cls(config_name=config, data_dir=builder_cls.sample_dir())
    return builder.as_streaming_dataset(split=split)


def is_multiturn(row: dict) -> bool:
    return (row.get("subset") or "").startswith("multiturn/")


def turn_texts(rows: list[dict]) -> Counter:
    """Every turn's (role, text) of some rows of any shared config, as a multiset."""
    found = Counter()
    for row in rows:
        if "sessions" in row:
            turns = [turn for session in row["sessions"] for turn in session["turns"]]
            found.update((turn["role"], turn["text"]) for turn in turns)
        elif "messages" in row:
            found.update((message["role"], message["content"]) for message in row["messages"])
        elif "turn_id" in row:
            found[(row["role"], row["text"])] += 1
    return found


@pytest.mark.parametrize(("source", "config"), CASES)
def test_streamed_rows_are_the_built_rows(sample_builds, tmp_path, source, config):
    result = sample_builds[source]
    if config not in result.configs:
        pytest.skip(f"{source}'s sample has no {config} row, so the build leaves the config out")
    for split in result.configs[config].splits:
        expected = built_rows(result, config, split, tmp_path)
        streamed = streamed_split(source, config, split)
        first = next(iter(streamed))
        assert first is not None
        got = list(streamed)
        assert expected, f"{source}/{config}/{split} built no row"
        if source != "mnbvc":
            assert got[0] == first == expected[0]
            assert got == expected
            continue
        # MNBVC: forum and Q/A rows one for one, multi-turn rows by their turns.
        assert [row for row in got if not is_multiturn(row)] == [
            row for row in expected if not is_multiturn(row)
        ]
        streamed_texts = turn_texts(row for row in got if is_multiturn(row))
        built_texts = turn_texts(row for row in expected if is_multiturn(row))
        if config == "messages":
            # A conversation streamed in pieces: a piece with no assistant turn is no chat and is left out,
            # so the streamed messages are some of the built ones' texts (never a text the build lacks).
            assert {text for _, content in streamed_texts for text in content.split("\n")} <= {
                text for _, content in built_texts for text in content.split("\n")
            }
        else:
            assert streamed_texts == built_texts


@pytest.mark.parametrize("source", registry.names())
def test_streaming_features_are_the_configs_features(source):
    builder_cls = registry.get(source)
    for view in SHARED_VIEWS:
        streamed = builder_cls(
            config_name=view.name, data_dir=builder_cls.sample_dir()
        ).as_streaming_dataset()
        for split in streamed.values():
            assert split.features == view.features


def test_locomo_streams_without_reading_every_file_first_and_still_refuses_a_duplicate_id(tmp_path):
    """Streaming checks sample_id across files as it goes (the build checks before any shard)."""
    from convhub.builders.locomo.builder import LocomoBuilder
    from convhub.errors import SourceError

    sample = next(Path(LocomoBuilder.sample_dir()).glob("*.json"))
    (tmp_path / "a.json").write_bytes(sample.read_bytes())
    (tmp_path / "b.json").write_bytes(sample.read_bytes())
    streamed = iter(LocomoBuilder(data_dir=str(tmp_path)).as_streaming_dataset(split="test"))
    first = next(streamed)
    assert first["subset"] == "a"
    with pytest.raises(SourceError, match=r"b\.json.*sample_id.*duplicate sample_id .* also in .*a\.json"):
        list(streamed)


@pytest.mark.parametrize("source", registry.names())
def test_a_source_without_questions_streams_qa_as_no_row_without_parsing(sample_builds, source, monkeypatch):
    """HAS_QUESTIONS is true to the data: a source that says it has none built no question from its sample."""
    builder_cls = registry.get(source)
    result = sample_builds[source]
    files = [result.output / name for names in result.configs["sessions"].files.values() for name in names]
    questions = sum(
        pc.sum(pc.list_value_length(pq.read_table(f, columns=["questions"])[0])).as_py() for f in files
    )
    assert bool(questions) == builder_cls.HAS_QUESTIONS
    if builder_cls.HAS_QUESTIONS:
        return
    parsed = []
    monkeypatch.setattr(
        builder_cls, "parse_shard", lambda self, shard, notes: parsed.append(shard) or iter(())
    )
    builder = builder_cls(config_name="qa", data_dir=builder_cls.sample_dir())
    streamed = builder.as_streaming_dataset()
    assert streamed and all(list(split) == [] for split in streamed.values())
    assert parsed == []


def test_a_streamed_view_derives_growing_batches_of_records_and_gives_each_records_rows_in_order():
    """``View.rows_of``: batches of 1, 2, 4... records (the first row after the first record), one given early
    when it holds many turns; the rows are those of each record alone, in the records' order."""
    from convhub.views import definitions

    records = [_record(number, turns=definitions.BATCH_TURNS if number == 9 else 4) for number in range(12)]
    sizes = [len(batch) for batch in definitions.record_batches(records)]
    assert sizes == [1, 2, 4, 3, 2]  # 8 asked for, the 10th record's turns reach the limit; then the rest
    for view in SHARED_VIEWS[1:]:
        one_by_one = [row for record in records for row in view.rows_from_record(record)]
        assert list(view.rows_of(records)) == one_by_one
        assert (
            len(one_by_one)
            == {"turns": 11 * 4 + definitions.BATCH_TURNS, "qa": 12, "messages": 12}[view.name]
        )
    turns = definitions.TURNS.rows_of(iter(records))
    assert next(turns)["conversation_id"] == "c0"


def _record(number: int, turns: int) -> dict:
    """A canonical record: one session of ``turns`` turns, user and assistant in turn, and one question."""
    from convhub import schema

    roles = ("user", "assistant")
    session = schema.empty_session(
        "s1", [schema.empty_turn(f"t{i}", roles[i % 2], roles[i % 2], f"hi {i}") for i in range(turns)]
    )
    return {
        "conversation_id": f"c{number}",
        "source": "test",
        "subset": "",
        "language": "en",
        "speakers": list(roles),
        "sessions": [session],
        "questions": [schema.empty_question(f"q{number}", "what?")],
        "extra": None,
    }
