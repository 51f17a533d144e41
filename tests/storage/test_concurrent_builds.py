"""Two builds of different inputs into one new output at once (issue #54): the output is one whole build or the
other, or one of them is refused in one line, never rows of both; on a local folder and on S3 (moto's server),
where a first build is written in place and two runs hold the folder by a conditional write
(``staging.writing_into``).

The builds are real ``convhub build`` subprocesses started together.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from convhub import registry
from convhub.storage.abandoned import owner_record
from convhub.storage.folders import folder_at
from convhub.storage.staging import MARKER, WRITING, OutputError, staged_folder
from tests.support.running_commands import start

COPIES = 40  # of each sample conversation: a build of some seconds, so that the two overlap


def locomo_input(folder: Path, prefix: str, files: int) -> Path:
    """The LoCoMo sample's conversations ``COPIES`` times in ``files`` files, each id starting with ``prefix``.
    Two inputs of different numbers of files make builds of different files: written into one folder together,
    the files of one would stay beside the other's."""
    samples = json.loads(next(Path(registry.get("locomo").sample_dir()).glob("*.json")).read_text())
    copies = [
        {**sample, "sample_id": f"{prefix}-{sample['sample_id']}-{number}"}
        for number in range(COPIES)
        for sample in samples
    ]
    folder.mkdir()
    for part in range(files):
        (folder / f"locomo{part}.json").write_text(json.dumps(copies[part::files]), encoding="utf-8")
    return folder


def conversation_ids(output) -> set[str]:
    """The conversation ids of every Parquet file of a build, local or at a URL."""
    found = set()
    for path in folder_at(output).rglob("*.parquet"):
        with path.open("rb") as handle:
            found.update(pq.read_table(handle, columns=["conversation_id"]).column(0).to_pylist())
    return found


@pytest.mark.slow
@pytest.mark.parametrize("where", ["local", "s3"])
def test_two_builds_into_one_new_output_give_one_whole_build_or_a_refusal(tmp_path, where, request):
    parent = tmp_path if where == "local" else request.getfixturevalue("bucket")
    output = str(parent / "out")
    inputs = {
        prefix: locomo_input(tmp_path / prefix, prefix, files)
        for prefix, files in (("first", 2), ("second", 1))
    }
    processes = {
        prefix: start(
            ["build", "locomo", "--data-dir", str(data), "--output", output, "--num-proc", "2"],
            tmp_path / f"{prefix}.stderr",
            tmp_path,
        )
        for prefix, data in inputs.items()
    }
    statuses = {prefix: process.wait(timeout=600) for prefix, process in processes.items()}
    logs = {prefix: (tmp_path / f"{prefix}.stderr").read_text() for prefix in processes}
    assert 0 in statuses.values(), logs
    for prefix, status in statuses.items():
        if status != 0:  # a refusal of the output: one line, exit 2 (as every command refuses an output)
            assert status == 2, logs[prefix]
            assert logs[prefix].strip().splitlines()[-1].startswith("convhub build: error: "), logs[prefix]
            assert "Traceback" not in logs[prefix]
    ids = conversation_ids(output)
    prefixes = {conversation.split("-")[0] for conversation in ids}
    assert len(prefixes) == 1, prefixes  # never rows of both
    [winner] = prefixes
    assert statuses[winner] == 0
    assert len(ids) == COPIES * 2  # the whole build (the sample holds two conversations)
    assert not (folder_at(output) / WRITING).exists()
    assert sorted(entry.name for entry in parent.iterdir() if entry.name.startswith(".out.")) == []


def test_an_object_store_folder_another_run_writes_is_refused_and_a_killed_runs_is_taken_over(bucket):
    output = bucket / "out"
    output.mkdir()
    (output / MARKER).write_text("convhub")
    (output / WRITING).write_text(json.dumps(owner_record()))  # this process: a run that still runs
    refused = pytest.raises(OutputError, match=r"is being written by another convhub run \(pid \d+ on ")
    with refused, staged_folder(output):
        pytest.fail("a folder another run writes was staged for")
    assert (output / WRITING).exists() and (output / MARKER).exists()  # its hold and its folder, untouched
    (output / WRITING).write_text(json.dumps({**owner_record(), "pid": 2**22 + 1}))  # no such process
    with staged_folder(output) as staging:
        (staging / "sessions.parquet").write_text("built")
    assert (output / "sessions.parquet").read_text() == "built"
    assert not (output / WRITING).exists()


def test_an_object_store_output_another_run_makes_as_this_one_starts_is_refused_in_one_line(
    bucket, monkeypatch
):
    """Two first builds into one new S3 output: both find nothing there, the other makes it first, and this one's
    ``mkdir`` finds it. That was ``FileExistsError``, printed as the bare path (exit 1); it is an output refused."""
    output = bucket / "out"
    (output / "sessions.parquet").write_text("the other run's")
    output_class = type(output)
    exists, mkdir = output_class.exists, output_class.mkdir
    making: list[object] = []  # (until this run's mkdir, the output looks absent, as the other run makes it)

    def made_now(self, *args, **kwargs):
        making.append(self)
        return mkdir(self, *args, **kwargs)

    monkeypatch.setattr(output_class, "mkdir", made_now)
    monkeypatch.setattr(
        output_class,
        "exists",
        lambda self, *rest: False if self == output and not making else exists(self, *rest),
    )
    refused = pytest.raises(OutputError, match="was made by another run while this build started")
    with refused, staged_folder(output):
        pytest.fail("an output another run made was written into")
    monkeypatch.undo()
    assert [path.name for path in output.iterdir()] == ["sessions.parquet"]  # the other run's, untouched
    assert (output / "sessions.parquet").read_text() == "the other run's"
