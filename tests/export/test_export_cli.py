"""``convhub export`` from a Hub repo and from the command line, its failures, the JSON text columns read back, and
the export section of each card."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import datasets
import pytest

from convhub import registry
from convhub.build import build_source
from convhub.cli import main as cli
from convhub.export.exporter import ExportError, LocalBuild, export_source
from convhub.storage.staging import MARKER
from tests.support.export_checks import (
    BYTE_DIFFERENCES,
    CARD_TEMPLATES,
    LOCOMO_QUIRKS,
    VALUE_DIFFERENCES,
    assert_convlab_zip_equal,
    assert_equal_values,
    export,
)
from tests.support.mix_sources import short_arrow_shutdown_pause  # noqa: F401 (autouse: streamed reads pause 0.1 s, not 5)
from tests.support.running_commands import command_env

# -- Hub repos, the command line, failures ------------------------------------------------------------------


@pytest.mark.slow
def test_export_from_a_hub_repo(hub, sample_builds, tmp_path):
    from convhub.publish.push import push_folder

    folder = tmp_path / "convlab-unified"
    shutil.copytree(sample_builds["convlab"].output, folder)
    push_folder(folder, "org/convlab-unified")
    exported = export("convlab", "org/convlab-unified", tmp_path / "export")
    sample = Path(registry.get("convlab").sample_dir())
    assert_convlab_zip_equal(sample / "toyhotel" / "data.zip", exported / "toyhotel")
    original = json.loads((sample / "toychat" / "data" / "dialogues.json").read_bytes())
    assert_equal_values(
        original, json.loads((exported / "toychat/data/dialogues.json").read_bytes()), "toychat"
    )


@pytest.mark.slow
def test_cli_export_from_a_hub_repo_streamed(hub, sample_builds, tmp_path, capsys):
    from convhub.publish.push import push_folder

    folder = tmp_path / "locomo-unified"
    shutil.copytree(sample_builds["locomo"].output, folder)
    push_folder(folder, "org/locomo-unified")
    output = tmp_path / "export"
    assert (
        cli.main(["export", "locomo", "--from", "org/locomo-unified", "--output", str(output), "--streaming"])
        == 0
    )
    assert "locomo_sample.json" in capsys.readouterr().out
    sample = Path(registry.get("locomo").sample_dir()) / "locomo_sample.json"
    assert_equal_values(
        json.loads(sample.read_bytes()), json.loads((output / "locomo_sample.json").read_bytes()), ""
    )


def test_cli_export_from_a_folder(sample_builds, tmp_path, capsys):
    output = tmp_path / "export"
    folder = str(sample_builds["gigamemory"].output)
    assert cli.main(["export", "gigamemory", "--from", folder, "--output", str(output)]) == 0
    out = capsys.readouterr().out
    assert "dialogues.jsonl" in out and "string_ids.jsonl.gz" in out
    assert sorted(p.name for p in output.iterdir()) == [MARKER, "dialogues.jsonl", "string_ids.jsonl.gz"]


def test_exporting_another_sources_build_fails_and_leaves_the_output_alone(sample_builds, tmp_path, capsys):
    output = tmp_path / "export"
    output.mkdir()
    (output / "keep.txt").write_text("earlier export")
    (output / MARKER).write_text("an earlier export by convhub")
    folder = str(sample_builds["gigamemory"].output)
    assert cli.main(["export", "locomo", "--from", folder, "--output", str(output)]) == 1
    error = capsys.readouterr().err
    assert "holds 'gigamemory' records, not 'locomo' ones" in error
    assert [p.name for p in tmp_path.iterdir()] == ["export"]  # no staging folder left
    assert (output / "keep.txt").read_text() == "earlier export"


def test_a_folder_that_is_no_build_or_a_bad_repo_id_is_one_clear_error(tmp_path):
    (tmp_path / "not-a-build").mkdir()
    with pytest.raises(ExportError, match="not a convhub build folder"):
        export_source("locomo", tmp_path / "not-a-build", tmp_path / "out")
    with pytest.raises(ExportError, match="neither a local build folder nor a Hub repo id"):
        export_source("locomo", tmp_path / "no" / "such" / "folder", tmp_path / "out")
    assert not (tmp_path / "out").exists()


#: Hub page URLs and the repo id each line tells a user to give instead.
HUB_PAGES = [
    ("https://huggingface.co/datasets/ORG/locomo-unified", "use ORG/locomo-unified"),
    ("https://hf.co/datasets/ORG/locomo-unified/", "use ORG/locomo-unified"),
    (
        "https://huggingface.co/datasets/ORG/locomo-unified/tree/v2",
        "use ORG/locomo-unified with --revision v2",
    ),
]


def hub_page_commands(page: str, answers: Path) -> list[tuple[str, list[str]]]:
    return [
        ("export", ["export", "locomo", "--from", page, "--output", "again"]),
        ("score", ["score", "locomo", "--data", page, "--predictions", str(answers), "--output", "r.json"]),
    ]


@pytest.mark.slow
def test_a_hub_page_url_is_refused_naming_the_repo_id_to_use(tmp_path, monkeypatch, capsys):
    """A Hub page's URL is no location convhub reads: ``export --from`` and ``score --data`` say the repo id to
    give (exit 2, a command line that cannot run as given), with nothing written: each command once as a real
    ``convhub`` process, every form of page through ``main``."""
    answers = tmp_path / "answers.jsonl"
    answers.write_text('{"question_id": "q", "prediction": "p"}\n', encoding="utf-8")
    page, use = HUB_PAGES[0]
    for command, argv in hub_page_commands(page, answers):
        done = subprocess.run(
            [sys.executable, "-m", "convhub.cli", *argv],
            capture_output=True, text=True, env=command_env(), cwd=tmp_path, timeout=120,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().splitlines() == [
            f"convhub {command}: error: {page} is a Hub page, not a build: {use} to read it (its repo id)"
        ]
    monkeypatch.chdir(tmp_path)
    for page, use in HUB_PAGES:
        for command, argv in hub_page_commands(page, answers):
            assert cli.main(argv) == 2
            assert capsys.readouterr().err.strip().splitlines() == [
                f"convhub {command}: error: {page} is a Hub page, not a build: {use} to read it (its repo id)"
            ]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["answers.jsonl"]


def test_json_text_columns_read_exactly_through_export_and_load_dataset(tmp_path):
    """JSON text, not ``datasets.Json`` (whose decoder gave 1.234567890123456 for 1.2345678901234567)."""
    path = tmp_path / "float.json"
    path.write_text(json.dumps(LOCOMO_QUIRKS), encoding="utf-8")
    build = build_source("locomo", tmp_path / "build", data_dir=str(path), configs=["sessions"])
    row = next(LocalBuild(build.output).rows("sessions", "test"))
    assert row["questions"][0]["extra"]["answer"] == 1.2345678901234567
    loaded = datasets.load_dataset("parquet", data_dir=str(build.output / "sessions"), split="test")
    assert json.loads(loaded[0]["questions"][0]["extra"])["answer"] == 1.2345678901234567


# -- the cards name the differences ---------------------------------------------------------------------------


@pytest.mark.parametrize("source", sorted(BYTE_DIFFERENCES))
def test_each_card_template_has_an_export_section(source):
    template = (CARD_TEMPLATES / f"{source}.md").read_text(encoding="utf-8")
    section = template[template.index("### Export") :]
    assert f"convhub export {source} --from" in section
    assert "byte for byte" in section
    if source in VALUE_DIFFERENCES:
        assert "One difference in value" in section and "split by split" in section
