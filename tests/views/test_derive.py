"""Views derived from ``sessions`` (convhub.views.derive) give exactly the rows the builder parses for them."""

from __future__ import annotations

import pickle

import datasets
import pytest

from convhub import registry
from convhub.errors import Notes, SourceError
from convhub.stats import Report
from convhub.storage.staging import MARKER
from convhub.views.derive import DERIVERS

#: Every view a build derives from ``sessions``: the shared ones Arrow flattens, and each source's own views of
#: the record (LoCoMo's observations and events, ConvLab's dialogues), which run on the records read back.
DERIVED = [(source, view) for source in registry.names() for view in sorted(DERIVERS)] + [
    (source, view.name)
    for source in registry.names()
    for view in registry.get(source).EXTRA_VIEWS
    if view.rows_from_record is not None
]


@pytest.mark.slow
@pytest.mark.parametrize(("source", "view"), DERIVED)
def test_derived_view_equals_builder_view(sample_builds, tmp_path, source, view):
    if view not in sample_builds[source].configs:
        pytest.skip(f"{source}'s sample has no {view} row, so its build leaves the config out")
    builder_cls = registry.get(source)
    builder = builder_cls(config_name=view, data_dir=builder_cls.sample_dir(), cache_dir=str(tmp_path))
    builder.download_and_prepare()
    derived = datasets.load_dataset(str(sample_builds[source].output), view)
    # a split with no row left (messages leaves out sessions no chat template takes) is left out of the build
    assert set(derived) == {split for split, info in builder.info.splits.items() if info.num_examples}
    for split in derived:
        expected = builder.as_dataset(split=split)
        assert derived[split].features == expected.features
        assert derived[split].to_list() == expected.to_list()


def test_build_of_a_derived_view_alone_parses_once_and_writes_only_that_view(tmp_path):
    from convhub.build import build_source

    builder_cls = registry.get("locomo")
    result = build_source("locomo", tmp_path / "out", data_dir=builder_cls.sample_dir(), configs=["qa"])
    assert list(result.configs) == ["qa"]
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == [MARKER, "README.md", "qa"]
    assert result.statistics.total().questions == result.configs["qa"].splits["test"].num_examples
    assert result.notes  # the sample exercises LoCoMo's quirks, so some normalization was counted


@pytest.mark.slow
@pytest.mark.parametrize("source", ["mnbvc", "gigamemory"])
def test_derive_in_worker_processes_gives_the_rows_of_one_process(sample_builds, tmp_path, source):
    from convhub.build import build_source

    builder_cls = registry.get(source)
    result = build_source(source, tmp_path / "out", data_dir=builder_cls.sample_dir(), num_proc=2)
    assert any(len(files) > 1 for files in result.configs["sessions"].files.values()), "no pool was used"
    for view in ("turns", "messages"):
        parallel = datasets.load_dataset(str(result.output), view)
        single = datasets.load_dataset(str(sample_builds[source].output), view)
        assert {split: parallel[split].to_list() for split in parallel} == {
            split: single[split].to_list() for split in single
        }
        rows = {split: info.num_examples for split, info in result.configs[view].splits.items()}
        assert rows == {
            split: info.num_examples for split, info in sample_builds[source].configs[view].splits.items()
        }


def test_a_build_of_source_configs_only_derives_nothing(tmp_path):
    from convhub.build import build_source

    builder_cls = registry.get("locomo")
    result = build_source("locomo", tmp_path / "out", data_dir=builder_cls.sample_dir(), configs=["events"])
    assert list(result.configs) == ["events"]
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == [MARKER, "README.md", "events"]


def test_source_error_survives_pickling_between_processes():
    error = SourceError("data/x.jsonl", 7, "sessions", "expected a list")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.path, copy.record, copy.field, copy.problem) == (
        "data/x.jsonl",
        7,
        "sessions",
        "expected a list",
    )
    assert str(copy) == "data/x.jsonl, record 7, field 'sessions': expected a list"


def test_reports_of_workers_merge(tmp_path):
    record = {
        "subset": "s",
        "language": "en",
        "sessions": [
            {"turns": [{"text": "a b", "dialogue_acts": [], "state": [], "images": [], "role": "user"}]}
        ],
        "questions": [{"category": "temporal"}],
    }
    for _ in range(2):
        report = Report()
        report.notes.add("kind", 3)
        list(report.counting("test", [record]))
        report.save(str(tmp_path))
    merged = Report.load_all(str(tmp_path))
    assert merged.notes == Notes({"kind": 6})
    total = merged.statistics.total()
    assert (total.conversations, total.turns, total.characters, total.questions) == (2, 2, 6, 2)
    assert total.languages == {"en": 2}
    assert total.categories == {"temporal": 2} and total.roles == {"user": 2}
    assert Report.load_all(str(tmp_path / "none")) is None
