"""A build folder at a URL (``--output hdfs://...``, ``s3a://...``): the same files as a local build, and the same
rules for what convhub may write or replace.

The builds go to a real S3 API (moto's server on 127.0.0.1, the ``bucket`` fixture), reached through s3fs: its
paths are no local paths (``os.fspath`` refuses them), so any step that still reached for the local disk fails
here. How two spellings of one URL compare is tested on ``memory://`` URLs too, which need no server.
``tests/engine/test_spark.py`` has Spark's tasks write to a ``file://`` URL.
"""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pyarrow.parquet as pq
import pytest

from convhub import mix, registry
from convhub.build import ENGINE_WORK, build_source
from convhub.cli import main as cli
from convhub.engine.checks import quarantine
from convhub.errors import SourceError
from convhub.export.exporter import export_source
from convhub.storage import staging
from convhub.storage.folders import folder_at, read_parquet, text_of
from convhub.storage.staging import MARKER, OutputError, check_output
from tests.support.hostile_sources import SOURCES, hostile_mix
from tests.support.mix_sources import numbered, write_source
from tests.support.mix_sources import recipe as mix_recipe


def files_under(folder) -> list[str]:
    return sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file())


@pytest.mark.slow
@pytest.mark.parametrize("source", registry.names())
def test_a_build_at_a_url_holds_the_local_builds_files_tables_and_card(source, bucket, sample_builds):
    local = sample_builds[source].output
    result = build_source(source, str(bucket / "out"), registry.get(source).sample_dir(), num_proc=1)
    remote = bucket / "out"
    assert str(result.output) == str(remote)
    assert files_under(remote) == sorted(
        path.relative_to(local).as_posix() for path in local.rglob("*") if path.is_file()
    )
    for relative in files_under(remote):
        if relative.endswith(".parquet"):
            assert read_parquet(remote / relative).equals(pq.read_table(local / relative)), relative
    assert (remote / "README.md").read_text(encoding="utf-8") == (local / "README.md").read_text(
        encoding="utf-8"
    )
    assert [path.name for path in bucket.iterdir()] == ["out"]  # no staging folder left beside it


@pytest.mark.slow
def test_a_rebuild_at_a_url_replaces_convhubs_folder_and_refuses_a_users(bucket):
    sample = registry.get("locomo").sample_dir()
    output = bucket / "out"
    build_source("locomo", str(output), sample, configs=["sessions"])
    build_source("locomo", str(output), sample, configs=["turns"])  # convhub's own folder: replaced
    assert sorted(path.name for path in output.iterdir()) == sorted([MARKER, "README.md", "turns"])
    assert [path.name for path in bucket.iterdir()] == ["out"]
    assert not (output / ENGINE_WORK).exists()

    users = bucket / "users"
    users.mkdir()
    (users / "notes.txt").write_text("mine")
    with pytest.raises(OutputError, match="holds files convhub did not write"):
        build_source("locomo", str(users), sample)
    assert files_under(users) == ["notes.txt"]
    build_source("locomo", str(users), sample, configs=["sessions"], overwrite=True)
    assert "notes.txt" not in files_under(users) and (users / MARKER).is_file()


def test_a_failed_build_at_a_url_leaves_the_earlier_build_and_no_staging(bucket, tmp_path):
    output = bucket / "out"
    build_source("locomo", str(output), registry.get("locomo").sample_dir(), configs=["sessions"])
    before = {relative: (output / relative).read_bytes() for relative in files_under(output)}
    broken = tmp_path / "broken.json"
    broken.write_text('[{"sample_id": "x", "conversation": 3}]', encoding="utf-8")
    with pytest.raises(SourceError):
        build_source("locomo", str(output), str(broken))
    assert {relative: (output / relative).read_bytes() for relative in files_under(output)} == before
    assert [path.name for path in bucket.iterdir()] == ["out"]


@pytest.mark.slow
def test_skipped_records_are_quarantined_beside_a_folder_at_a_url(bucket, tmp_path):
    data_dir = tmp_path / "data"
    bad = hostile_mix(SOURCES["mnbvc"], data_dir)
    result = build_source("mnbvc", str(bucket / "out"), str(data_dir), on_bad_record="skip")
    assert str(result.quarantine) == str(bucket / f"out{quarantine.SUFFIX}")
    entries = [json.loads(line) for line in result.quarantine.read_text(encoding="utf-8").splitlines()]
    assert len(entries) == bad == result.skipped
    assert sorted(path.name for path in bucket.iterdir()) == ["out", f"out{quarantine.SUFFIX}"]
    # a clean rebuild removes the quarantine file an earlier build left
    build_source("mnbvc", str(bucket / "out"), registry.get("mnbvc").sample_dir())
    assert [path.name for path in bucket.iterdir()] == ["out"]


@pytest.mark.parametrize(
    ("output", "inputs", "problem"),
    [
        ("memory://b/data/out", ["memory://b/data"], "inside the input"),
        ("memory://b/data", ["memory://b/data/mnbvc"], "holds the input"),
        ("memory://b/data/", ["memory://b/data"], "holds the input"),
        ("memory://", [], "root of its file system"),
        (
            "s3a://bucket/data/out",
            ["s3://bucket/data"],
            "inside the input",
        ),  # one store, Hadoop's name for it
        ("s3://bucket/data", ["s3a://bucket/data/mnbvc"], "holds the input"),
        ("hdfs://nn:8020/data/out", ["hdfs://nn:8020/data"], "inside the input"),
        ("hdfs:///data/out", ["hdfs://nn:8020/data"], "inside the input"),  # the default namenode may be nn
        ("hdfs://nn:8020/data", ["hdfs:///data/in"], "holds the input"),
        ("hdfs://nn/data", ["hdfs://nn:8020/data/in"], "holds the input"),  # nn's default port
        # one folder for fsspec, written with or without a host: what the file system opens is compared
        ("memory://d/in", ["memory:///d/in"], "holds the input"),
        ("memory:///d/in", ["memory://d/in"], "holds the input"),
        ("memory:///d/in/out", ["memory://d/in"], "inside the input"),
        ("s3://b/data", ["s3:///b/data/x"], "holds the input"),
        ("simplecache::memory://d/in", ["memory:///d/in"], "holds the input"),  # a chain ends on memory
    ],
)
def test_a_url_output_that_would_delete_or_reread_an_input_is_refused(output, inputs, problem):
    with pytest.raises(OutputError, match=problem):
        check_output(folder_at(output), inputs=inputs)


@pytest.mark.parametrize(
    ("folder", "url"),
    [
        ("s3://a/x", "s3://b/x/in"),  # another bucket
        ("hdfs://nn1/x", "hdfs://nn2/x/in"),  # another namenode
        ("s3://b/data", "s3://b/database"),  # a longer name, not a folder inside
        ("memory://b/x", "s3://b/x/in"),  # another file system
    ],
)
def test_urls_of_other_stores_or_folders_are_not_taken_for_one(folder, url):
    assert not staging._holds(folder, url) and not staging._holds(url, folder)


def test_a_file_url_output_is_checked_as_the_local_folder_it_is(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    with pytest.raises(OutputError, match="inside the input"):
        check_output(folder_at((data / "out").as_uri()), inputs=[str(data)])
    with pytest.raises(OutputError, match="inside the input"):
        check_output(folder_at((data / "out").as_uri()), inputs=[data.as_uri()])
    check_output(folder_at((tmp_path / "out").as_uri()), inputs=[str(data), "hf://datasets/liwu/MNBVC"])


def test_a_build_from_one_spelling_of_an_s3_folder_into_the_other_is_refused(bucket, capsys):
    """``s3://b/in`` and ``s3a://b/in`` (Hadoop's name for S3) are one folder: ``--overwrite`` must not replace
    its own input."""
    data = bucket / "in"
    uploaded = {
        path.name: path.read_bytes()
        for path in Path(registry.get("locomo").sample_dir()).iterdir()
        if path.is_file()
    }
    data.mkdir(parents=True)
    for name, content in uploaded.items():
        (data / name).write_bytes(content)
    spellings = f"s3://{data.path.strip('/')}", f"s3a://{data.path.strip('/')}"
    for data_dir, output in (spellings, spellings[::-1]):
        code = cli.main(["build", "locomo", "--data-dir", data_dir, "--output", output, "--overwrite"])
        assert code == 2  # an output refused: exit 2, as in every command
        assert "holds the input" in capsys.readouterr().err
    assert {path.name: path.read_bytes() for path in data.iterdir()} == uploaded


def test_the_cli_takes_a_url_output_as_a_url(tmp_path, monkeypatch, capsys):
    """``--output file:///...`` is that folder, not a relative ``file:/...`` under the working folder."""
    monkeypatch.chdir(tmp_path)
    output = tmp_path / "built"
    code = cli.main(["build", "locomo", "--sample", "--config", "sessions", "--output", output.as_uri()])
    assert code == 0
    assert sorted(path.name for path in tmp_path.iterdir()) == ["built"]
    assert pq.read_table(output / "sessions" / "test-00000-of-00001.parquet").num_rows > 0
    assert capsys.readouterr().out.startswith(f"locomo: {output.as_uri()}\n")


def test_a_local_path_stays_a_local_path():
    assert isinstance(folder_at("out/locomo"), Path) and isinstance(folder_at(Path("/tmp/x")), Path)


@pytest.mark.parametrize("command", [["mix", "recipe.yaml"], ["export", "locomo", "--from", "built"]])
def test_mix_and_export_refuse_a_url_output_instead_of_writing_a_folder_named_after_it(
    command, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:
        cli.main([*command, "--output", "s3a://bucket/out"])
    assert exited.value.code == 2
    assert "s3a://bucket/out is a URL: give a local folder" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("hdfs://nn:8020/convhub/x", "hdfs://nn:8020/convhub/x/sessions"),  # the namenode is kept
        ("hdfs://nn/convhub/x", "hdfs://nn/convhub/x/sessions"),
        ("hdfs:///convhub/x", "hdfs:///convhub/x/sessions"),  # the default namenode
        ("s3a://bucket/x", "s3a://bucket/x/sessions"),
    ],
)
def test_the_url_handed_to_tasks_names_the_same_file_system(url, expected):
    """Spark's tasks and ``datasets``' writer get a string: it must name the namenode the user named."""
    assert text_of(folder_at(url) / "sessions") == expected
    assert text_of(folder_at(expected)) == expected


@pytest.mark.slow
@pytest.mark.parametrize("source", registry.names())
def test_a_build_at_a_url_exports_the_local_builds_files(source, bucket, sample_builds, tmp_path):
    """``convhub export --from URL`` reads a build Spark wrote where it lies: the same files, byte for byte."""
    remote = bucket / "built"
    remote.fs.put(str(sample_builds[source].output), remote.path, recursive=True)
    from_url = export_source(source, str(remote), tmp_path / "from-url")
    local = export_source(source, sample_builds[source].output, tmp_path / "local")
    assert from_url.location == str(remote) and from_url.files == local.files and local.files
    for relative in local.files:
        assert (tmp_path / "from-url" / relative).read_bytes() == (tmp_path / "local" / relative).read_bytes()


def test_a_mix_recipe_reads_a_source_folder_at_a_url(bucket, tmp_path):
    """A recipe's ``path`` may be a build at a URL: the same mixture as from the local folders, named by its URL."""
    write_source(tmp_path / "a", numbered("a", 20))
    write_source(tmp_path / "b", numbered("b", 20, words=1))
    remote = bucket / "b"
    remote.fs.put(str(tmp_path / "b"), remote.path, recursive=True)
    local = mix_recipe(
        tmp_path, "seed: 5\nsources: [{path: a, probability: 0.5}, {path: b, probability: 0.5}]"
    )
    at_url = mix_recipe(
        tmp_path, f"seed: 5\nsources: [{{path: a, probability: 0.5}}, {{path: '{remote}', probability: 0.5}}]"
    )
    assert at_url.sources[1].location == str(remote) and at_url.sources[1].name == "b"
    from_local = mix.write_mixture(local, tmp_path / "from-local")
    from_url = mix.write_mixture(at_url, tmp_path / "from-url")
    assert from_url.rows == from_local.rows > 0
    local_rows, url_rows = (
        datasets.load_dataset(str(folder), split="train").to_list()
        for folder in (from_local.output, from_url.output)
    )
    assert url_rows == local_rows
    assert f"| b | `{remote}` |" in (tmp_path / "from-url" / "README.md").read_text(encoding="utf-8")
