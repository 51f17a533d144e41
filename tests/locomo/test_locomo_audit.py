"""``convhub build locomo --errata``: an audit of LoCoMo's labels carried in the build (``convhub.builders.locomo.audit``),
on small files written here (a consolidated audit, a folder of per-conversation files, audits of another input)
and on the real locomo10.json with dial481/locomo-audit's errors.json (skipped when ../shared/data is absent)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from convhub.cli import main as cli
from convhub.engine.build import build_source
from convhub.errors import SourceError
from convhub.export.exporter import export_source
from tests.locomo.locomo_samples import load, tiny_sample


def entry(sample: int, question: int, qa: dict, error_type: str, answer: str, evidence: list[str]) -> dict:
    """An audit entry in dial481/locomo-audit's shape, of question ``qa`` (as the file writes it)."""
    return {
        "question_id": f"locomo_{sample}_qa{question}",
        "question": qa["question"],
        "golden_answer": str(qa["answer"]),
        "category": qa["category"],
        "error_type": error_type,
        "cited_evidence": qa["evidence"],
        "correct_evidence": evidence,
        "reasoning": f"because of {evidence}",
        "correct_answer": answer,
    }


def two_samples() -> list[dict]:
    """Two tiny samples; the second's first question has an integer answer (as 2022 in locomo10.json)."""
    second = tiny_sample("conv-t2")
    second["qa"] = [
        {"question": "When did Bo move?", "answer": 2022, "evidence": ["D2:1"], "category": 2},
        {"question": "Does Ana have a dog?", "answer": "Yes", "evidence": ["D2:2"], "category": 4},
    ]
    return [tiny_sample("conv-t1"), second]


def audit_of(samples: list[dict]) -> list[dict]:
    """A citation-only verdict on conv-t1:qa0 and a corrected answer on conv-t2:qa0 (evidence with an id that
    names no turn, D9:9)."""
    return [
        entry(0, 0, samples[0]["qa"][0], "WRONG_CITATION", "Porto (the citation is wrong)", ["D1:1", "D2:2"]),
        entry(1, 0, samples[1]["qa"][0], "TEMPORAL_ERROR", "2021", ["D2:1", "D9:9"]),
    ]


def write(path: Path, value) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2), encoding="utf-8")
    return path


@pytest.fixture
def data(tmp_path) -> tuple[Path, list[dict]]:
    samples = two_samples()
    return write(tmp_path / "data" / "tiny.json", samples), samples


def qa_by_id(result) -> dict[str, dict]:
    return {row["question_id"]: row for row in load(result, "qa")}


def test_each_audited_question_gets_the_verdict_and_keeps_its_own_labels(data, tmp_path):
    path, samples = data
    entries = audit_of(samples)
    result = build_source(
        "locomo", tmp_path / "out", str(path), errata=str(write(tmp_path / "errors.json", entries))
    )
    rows = qa_by_id(result)
    cited, corrected = rows["conv-t1:qa0"], rows["conv-t2:qa0"]
    assert cited["answer"] == "Porto" and cited["evidence_turn_ids"] == [
        "D1:1"
    ]  # the source's own, untouched
    assert cited["audit"] == {
        "audit_id": "locomo_0_qa0",
        "error_type": "WRONG_CITATION",
        "answer_changed": False,
        "answer": "Porto (the citation is wrong)",
        "evidence_turn_ids": ["D1:1", "D2:2"],
        "unresolved_evidence": [],
        "reasoning": "because of ['D1:1', 'D2:2']",
        "entry": json.dumps(entries[0], separators=(",", ":")),
    }
    assert corrected["answer"] == "2022" and json.loads(corrected["extra"]) == {
        "evidence": ["D2:1"],
        "answer": 2022,
    }
    audit = corrected["audit"]
    assert (audit["answer_changed"], audit["answer"], audit["error_type"]) == (True, "2021", "TEMPORAL_ERROR")
    assert (audit["evidence_turn_ids"], audit["unresolved_evidence"]) == (["D2:1"], ["D9:9"])
    assert json.loads(audit["entry"]) == entries[1]  # the whole entry: nothing of the audit is lost
    assert rows["conv-t2:qa1"]["audit"] is None
    # the sessions config holds the same verdicts, the qa view being derived from it
    sessions = {row["conversation_id"]: row for row in load(result, "sessions")}
    assert sessions["conv-t2"]["questions"][0]["audit"] == audit
    assert sessions["conv-t2"]["questions"][1]["audit"] is None
    assert result.notes["question with the verdict of the LoCoMo audit (--errata)"] == 2
    assert result.notes["audited question whose gold answer the audit corrects"] == 1
    card = (result.output / "README.md").read_text(encoding="utf-8")
    assert "### The audit of LoCoMo's labels" in card and "CC BY-NC 4.0" in card
    assert (
        "dial481/locomo-audit" in card
        and "judged 2 questions" in card
        and "1 have a wrong gold answer" in card
    )
    # the export gives the original file back: the audit is no part of it
    exported = export_source("locomo", result.output, tmp_path / "export")
    assert json.loads((exported.output / "tiny.json").read_text(encoding="utf-8")) == samples


def test_a_build_without_the_audit_says_nothing_of_it(data, tmp_path):
    path, _ = data
    result = build_source("locomo", tmp_path / "out", str(path))
    assert all(row["audit"] is None for row in load(result, "qa"))
    assert "### The audit of LoCoMo's labels" not in (result.output / "README.md").read_text(encoding="utf-8")


def test_a_folder_of_per_conversation_files_is_the_same_audit(data, tmp_path):
    path, samples = data
    entries = audit_of(samples)
    whole = build_source(
        "locomo", tmp_path / "whole", str(path), errata=str(write(tmp_path / "errors.json", entries))
    )
    folder = tmp_path / "audit"
    write(folder / "errors_conv_0.json", entries[:1])
    write(folder / "errors_conv_1.json", entries[1:])
    write(folder / "conv_0.json", {"working material": "not entries"})  # the audit's other files are not read
    (folder / "summary_conv_0.txt").write_text("a summary", encoding="utf-8")
    split = build_source("locomo", tmp_path / "split", str(path), errata=str(folder))
    assert pq.read_table(split.output / "qa").equals(pq.read_table(whole.output / "qa"))


def refused(tmp_path, path: Path, errata: Path) -> str:
    """The build's one-line refusal; no output, no staging folder left."""
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    with pytest.raises(SourceError) as caught:
        build_source("locomo", out / "locomo-unified", str(path), errata=str(errata))
    assert list(out.iterdir()) == []
    return str(caught.value)


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("question", "Where does Bo live?", "field 'question': the audit has 'Where does Bo live?'"),
        ("category", 1, "field 'category': the audit has 1 where question 'conv-t2:qa0'"),
        ("golden_answer", "2023", "field 'golden_answer': the audit has '2023'"),
        ("cited_evidence", ["D2:2"], "field 'cited_evidence': the audit has ['D2:2']"),
    ],
)
def test_an_audit_of_another_input_is_refused(data, tmp_path, field, value, named):
    path, samples = data
    entries = audit_of(samples)
    entries[1][field] = value
    errata = write(tmp_path / "errors.json", entries)
    message = refused(tmp_path, path, errata)
    assert message.startswith(f"{errata}, record locomo_1_qa0, {named}")
    assert message.endswith("the audit is of another input")


@pytest.mark.parametrize(
    ("question_id", "problem"),
    [
        ("locomo_7_qa0", "names sample 7, but {path} holds 2 samples"),
        (
            "locomo_1_qa5",
            "names question 5 of sample 'conv-t2' (position 1 in {path}), which has 2 questions",
        ),
    ],
)
def test_an_audit_naming_an_unknown_question_is_refused(data, tmp_path, question_id, problem):
    path, samples = data
    entries = audit_of(samples)
    entries.append({**entries[1], "question_id": question_id})
    errata = write(tmp_path / "errors.json", entries)
    message = refused(tmp_path, path, errata)
    assert message.startswith(
        f"{errata}, record {question_id}, field 'question_id': " + problem.format(path=path)
    )


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (lambda entries: entries[1].pop("reasoning"), "record locomo_1_qa0, field 'reasoning': missing"),
        (
            lambda entries: entries[1].update(category="2"),
            "record locomo_1_qa0, field 'category': expected int",
        ),
        (
            lambda entries: entries[1].update(correct_evidence=["D2:1", 3]),
            "record locomo_1_qa0, field 'correct_evidence': expected a list of strings",
        ),
        (
            lambda entries: entries[1].update(question_id="conv-t2:qa0"),
            "record conv-t2:qa0, field 'question_id': 'conv-t2:qa0' is not locomo_<sample>_qa<question>",
        ),
        (
            lambda entries: entries.append(dict(entries[0])),
            "record locomo_0_qa0, field 'question_id': the same question as an earlier entry",
        ),
        (lambda entries: entries.append(["not", "an entry"]), "record 2: expected an object, got list"),
    ],
)
def test_a_malformed_audit_is_refused_before_any_sample_is_read(data, tmp_path, edit, named):
    path, samples = data
    entries = audit_of(samples)
    edit(entries)
    errata = write(tmp_path / "errors.json", entries)
    assert refused(tmp_path, path, errata).startswith(f"{errata}, {named}")


def test_a_folder_file_holding_another_conversations_entry_is_refused(data, tmp_path):
    path, samples = data
    entries = audit_of(samples)
    folder = tmp_path / "audit"
    write(folder / "errors_conv_0.json", entries)  # holds sample 1's entry too
    message = refused(tmp_path, path, folder)
    assert message == (
        f"{folder / 'errors_conv_0.json'}, record locomo_1_qa0, field 'question_id': names sample 1, in the file of "
        "sample 0"
    )
    (folder / "errors_conv_0.json").unlink()
    assert refused(tmp_path, path, folder).endswith(
        "a folder of the audit holds errors_conv_<i>.json files: none here"
    )


def test_with_skip_an_entry_of_a_sample_left_out_is_counted(tmp_path):
    samples = two_samples()
    entries = audit_of(samples)
    samples[1]["qa"][1]["category"] = "4"  # a bad sample: --on-bad-record skip leaves it out
    path = write(tmp_path / "data" / "tiny.json", samples)
    errata = write(tmp_path / "errors.json", entries)
    result = build_source("locomo", tmp_path / "out", str(path), errata=str(errata), on_bad_record="skip")
    assert [row["audit"]["audit_id"] for row in load(result, "qa")] == ["locomo_0_qa0"]
    assert result.notes["audit entry of a sample left out as bad (not applied)"] == 1


def test_an_audit_is_of_one_file(data, tmp_path):
    path, samples = data
    write(path.parent / "other.json", [tiny_sample("conv-t3")])
    errata = write(tmp_path / "errors.json", audit_of(samples))
    assert (
        "the audit names samples by their position in one LoCoMo file; the input holds other.json, tiny.json"
        in (refused(tmp_path, path.parent, errata))
    )


def test_the_command_refuses_in_one_line(data, tmp_path, capsys):
    path, samples = data
    entries = audit_of(samples)
    entries[0]["question"] = "Who is Ana?"
    errata = write(tmp_path / "errors.json", entries)
    out = tmp_path / "out"
    argv = ["build", "locomo", "--data-dir", str(path), "--output", str(out), "--errata", str(errata)]
    assert cli.main(argv) == 1
    # the one error line, not the progress bars
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(errors) == 1 and not out.exists()
    assert errors[0].startswith(f"convhub build: error: {errata}, record locomo_0_qa0, field 'question'")
    assert cli.main([*argv[:-1], str(tmp_path / "absent.json")]) == 2
    assert "--errata" in capsys.readouterr().err and not out.exists()
    assert cli.main(["build", "gigamemory", "--sample", "--output", str(out), "--errata", str(errata)]) == 2
    assert "convhub build: error: --errata applies to locomo only" in capsys.readouterr().err


# -- the real files --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """locomo10.json built with the audit's errors.json, and both files as they were read."""
    from tests.support.data_files import shared_data

    data, errata = shared_data("locomo", "locomo10.json"), shared_data("locomo-audit", "errors.json")
    result = build_source("locomo", tmp_path_factory.mktemp("real") / "out", str(data), errata=str(errata))
    return (
        result,
        json.loads(data.read_text(encoding="utf-8")),
        json.loads(errata.read_text(encoding="utf-8")),
    )


@pytest.mark.slow
def test_the_real_audit_lands_on_the_questions_it_names(real, tmp_path):
    result, samples, entries = real
    rows = load(result, "qa")
    audited = [row for row in rows if row["audit"] is not None]
    assert len(rows) == 1986 and len(audited) == 156
    assert sum(row["audit"]["answer_changed"] for row in audited) == 99
    assert Counter(row["audit"]["error_type"] for row in audited) == {
        "WRONG_CITATION": 57,
        "HALLUCINATION": 33,
        "TEMPORAL_ERROR": 26,
        "ATTRIBUTION_ERROR": 24,
        "AMBIGUOUS": 13,
        "INCOMPLETE": 3,
    }
    by_id = {row["audit"]["audit_id"]: row for row in audited}
    for raw in entries:
        row = by_id[raw["question_id"]]
        sample, question = raw["question_id"].removeprefix("locomo_").split("_qa")
        assert row["question_id"] == f"{samples[int(sample)]['sample_id']}:qa{question}"
        assert row["question"] == raw["question"] and json.loads(row["audit"]["entry"]) == raw
        assert row["audit"]["answer"] == raw["correct_answer"]
    assert {row["category_id"] for row in audited} == {1, 2, 3, 4}
    exported = export_source("locomo", result.output, tmp_path / "export")
    assert json.loads((exported.output / "locomo10.json").read_text(encoding="utf-8")) == samples


@pytest.mark.slow
def test_the_real_audit_split_per_conversation_is_the_same_audit(real, tmp_path):
    """The audit's folder layout (audit/errors_conv_<i>.json), written here from errors.json."""
    result, _, entries = real
    folder = tmp_path / "audit"
    for raw in entries:
        sample = int(raw["question_id"].split("_")[1])
        path = folder / f"errors_conv_{sample}.json"
        write(path, [*(json.loads(path.read_text()) if path.exists() else []), raw])
    from tests.support.data_files import shared_data

    split = build_source(
        "locomo", tmp_path / "out", str(shared_data("locomo", "locomo10.json")), errata=str(folder)
    )
    assert pq.read_table(split.output / "qa").equals(pq.read_table(result.output / "qa"))


@pytest.mark.spark
@pytest.mark.slow
def test_the_real_audit_builds_on_spark_as_locally(real, tmp_path):
    pytest.importorskip("pyspark", reason='PySpark is the "spark" extra: pip install ".[spark]"')
    from convhub.engine.runners.spark import SparkEngine
    from tests.support.data_files import shared_data

    result, _, _ = real
    engine = SparkEngine("local[2]")
    try:
        data, errata = shared_data("locomo", "locomo10.json"), shared_data("locomo-audit", "errors.json")
        on_spark = build_source("locomo", tmp_path / "spark", str(data), errata=str(errata), engine=engine)
    finally:
        engine.stop()
    for config in ("sessions", "qa"):
        assert pq.read_table(on_spark.output / config).equals(pq.read_table(result.output / config)), config
