"""``--engine spark``: the same build as the local engine, on Spark in ``local[2]`` (no network).

Today's local build is the oracle: every config and split of a Spark build holds a table equal to the local
build's (``pyarrow.Table.equals``, rows concatenated in file order, with the schema's metadata), and the card is
the same but for the byte figures, which follow how the rows are cut into files.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import convhub.cli  # noqa: F401  what the command sets before a build starts Spark (Arrow's allocator)
from convhub import registry
from convhub.build import build_source
from convhub.engine.runners.local import LocalEngine
from convhub.engine.runners.memory import ARROW_POOL_VARIABLE, JEMALLOC_CONF_VARIABLE
from convhub.errors import SourceError
from convhub.export.exporter import export_source
from tests.support.data_files import shared_data

pytest.importorskip("pyspark", reason='PySpark is the "spark" extra: pip install ".[spark]"')
import oracle

from convhub.engine.runners import spark as spark_module
from convhub.engine.runners.spark import SparkEngine

#: One worker (``--dist loadfile``; the group for ``loadgroup``) starts the local[2] session and runs every test here.
pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark-local")]


@pytest.fixture(scope="module")
def spark():
    engine = SparkEngine("local[2]")
    yield engine
    engine.stop()


def test_spark_python_workers_take_arrow_memory_as_the_command_does(spark):
    """The command chooses the allocator of Arrow's memory (``convhub.engine.runners.memory``); Spark's Python workers
    are told through the executors' environment, on a cluster as locally."""
    conf = spark.session.sparkContext.getConf()
    told = [conf.get(f"spark.executorEnv.{name}") for name in (ARROW_POOL_VARIABLE, JEMALLOC_CONF_VARIABLE)]
    used = spark.session.sparkContext.parallelize([0], 1).map(
        lambda _: (
            __import__("pyarrow").default_memory_pool().backend_name,
            __import__("os").environ.get("JE_ARROW_MALLOC_CONF"),
        )
    )
    assert told == [os.environ[ARROW_POOL_VARIABLE], os.environ.get(JEMALLOC_CONF_VARIABLE)]
    assert used.collect() == [tuple(told)]


def assert_same_build(local: Path, spark: Path) -> None:
    """Every config and split equal as tables, and the cards but for their byte figures (``benchmarks/oracle.py``)."""
    compared = oracle.compare(local, spark)
    assert len(compared) > 1 and all(same for _, _, same in compared), compared


@pytest.mark.parametrize("source", registry.names())
def test_every_sample_builds_on_spark_as_it_builds_locally(source, spark, sample_builds, tmp_path):
    result = build_source(source, tmp_path / source, registry.get(source).sample_dir(), engine=spark)
    assert_same_build(sample_builds[source].output, result.output)
    assert result.statistics.sorted() == sample_builds[source].statistics.sorted()
    assert result.notes == sample_builds[source].notes


def test_mnbvc_conversations_spread_over_many_partitions_come_out_in_the_local_order(
    spark, tmp_path, monkeypatch
):
    """Partitions of 300 bytes: the sample's multi-turn rows go to several partitions, moved by Spark's shuffle."""
    from convhub.builders.mnbvc.builder import MnbvcBuilder

    monkeypatch.setattr(MnbvcBuilder, "PARTITION_BYTES", 300, raising=False)
    monkeypatch.setattr(MnbvcBuilder, "SLICE_BYTES", 300, raising=False)
    sample = MnbvcBuilder.sample_dir()
    local = build_source("mnbvc", tmp_path / "local", sample, configs=["sessions"])
    on_spark = build_source("mnbvc", tmp_path / "spark", sample, configs=["sessions"], engine=spark)
    assert len(on_spark.configs["sessions"].files["train"]) > 3  # a file per partition that has rows
    assert_same_build(local.output, on_spark.output)


def test_a_split_past_the_file_limit_is_written_in_fewer_bigger_files(spark, tmp_path, monkeypatch):
    """Past ``MAX_FILES`` files for a split (the Hub advises under 10,000 entries per folder: a 60 TB build),
    consecutive shards share a task, a group shard has fewer partitions, and each task writes one file: every
    config holds the same rows as the local build (the regrouped conversations in their new partitions' order)."""
    from convhub.builders.mnbvc.builder import MnbvcBuilder

    monkeypatch.setattr(MnbvcBuilder, "PARTITION_BYTES", 300, raising=False)  # 5 partitions and 2 row files
    sample = MnbvcBuilder.sample_dir()
    local = build_source("mnbvc", tmp_path / "local", sample, configs=["sessions", "turns"])
    monkeypatch.setattr(spark_module, "MAX_FILES", 3)
    on_spark = build_source("mnbvc", tmp_path / "spark", sample, configs=["sessions", "turns"], engine=spark)
    for config, order in (("sessions", ["conversation_id"]), ("turns", ["conversation_id", "turn_index"])):
        assert 1 < len(on_spark.configs[config].files["train"]) <= 3
        keys = [(name, "ascending") for name in order]
        tables = [pq.read_table(build.output / config).sort_by(keys) for build in (local, on_spark)]
        assert tables[0].num_rows > 10 and tables[0].equals(tables[1])


def test_the_file_limit_keeps_each_part_of_a_split_its_share():
    group = spark_module.GroupShard(files=[("a", "")], sizes=[0], partitions=20_000)
    share = spark_module.file_share([group, "one file", "another"])
    assert share == spark_module.MAX_FILES / 20_002
    assert spark_module._shared(20_000, share) + spark_module._shared(2, share) <= spark_module.MAX_FILES
    assert spark_module.file_share([group.__class__(files=[], sizes=[], partitions=10), "x"]) is None


def _mnbvc_with_bad_rows(folder: Path) -> Path:
    """The MNBVC sample plus a multi-turn file with a line that is not JSON and a row of neither 问 nor 答."""
    from convhub.builders.mnbvc.builder import MnbvcBuilder

    shutil.copytree(MnbvcBuilder.sample_dir(), folder)
    good = {"问": "你好", "答": "你好！", "来源": "bad-test", "元数据": {"会话": "c1", "多轮序号": 1}}
    rows = [json.dumps(good, ensure_ascii=False), "{not json", json.dumps({"来源": "bad-test"})]
    (folder / "multiturn" / "bad.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return folder


def test_a_bad_row_stops_the_spark_build_with_the_local_builds_error(spark, tmp_path):
    data = _mnbvc_with_bad_rows(tmp_path / "data")
    with pytest.raises(SourceError) as local:
        build_source("mnbvc", tmp_path / "local", str(data), configs=["sessions"])
    with pytest.raises(SourceError) as on_spark:
        build_source("mnbvc", tmp_path / "spark", str(data), configs=["sessions"], engine=spark)
    assert str(on_spark.value) == str(local.value)
    assert "bad.jsonl" in str(on_spark.value) and "line 2" in str(on_spark.value)
    assert not (tmp_path / "spark").exists()


def test_skipped_rows_are_quarantined_and_counted_as_locally(spark, tmp_path):
    data = _mnbvc_with_bad_rows(tmp_path / "data")
    local = build_source("mnbvc", tmp_path / "local", str(data), on_bad_record="skip")
    on_spark = build_source("mnbvc", tmp_path / "spark", str(data), on_bad_record="skip", engine=spark)
    assert_same_build(local.output, on_spark.output)
    assert on_spark.skipped == local.skipped == 2
    assert on_spark.quarantine.read_text(encoding="utf-8") == local.quarantine.read_text(encoding="utf-8")


def test_multi_turn_files_of_rejected_rows_alone_build_on_spark_as_locally(spark, tmp_path):
    """Every multi-turn row bad, under skip (the forum file's rows are the build's): Spark's shuffle moves only
    rejected rows (the partition past the last), which come back in file and line order, as locally."""
    from convhub.builders.mnbvc.builder import MnbvcBuilder

    folder = tmp_path / "data" / "multiturn"
    folder.mkdir(parents=True)
    shutil.copytree(Path(MnbvcBuilder.sample_dir()) / "forum", tmp_path / "data" / "forum")
    for name in ("a.jsonl", "b.jsonl", "c.jsonl"):
        lines = ["{not json", json.dumps({"来源": name}), "[1, 2]"]
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    data = tmp_path / "data"
    local = build_source("mnbvc", tmp_path / "local", str(data), on_bad_record="skip")
    on_spark = build_source("mnbvc", tmp_path / "spark", str(data), on_bad_record="skip", engine=spark)
    assert_same_build(local.output, on_spark.output)
    assert on_spark.skipped == local.skipped == 9
    quarantined = on_spark.quarantine.read_text(encoding="utf-8")
    assert quarantined == local.quarantine.read_text(encoding="utf-8")
    assert [json.loads(line)["file"] for line in quarantined.splitlines()] == ["multiturn/a.jsonl"] * 3 + [
        "multiturn/b.jsonl"
    ] * 3 + ["multiturn/c.jsonl"] * 3


@pytest.mark.parametrize("source", registry.names())
def test_a_spark_build_exports_the_same_source_files(source, spark, sample_builds, tmp_path):
    result = build_source(source, tmp_path / "build", registry.get(source).sample_dir(), engine=spark)
    local = export_source(source, sample_builds[source].output, tmp_path / "local").output
    exported = export_source(source, result.output, tmp_path / "spark").output
    files = sorted(path.relative_to(local) for path in local.rglob("*") if path.is_file())
    assert files and files == sorted(
        path.relative_to(exported) for path in exported.rglob("*") if path.is_file()
    )
    for relative in files:
        assert (exported / relative).read_bytes() == (local / relative).read_bytes(), relative


@pytest.mark.parametrize(
    ("source", "parts"), [("locomo", ("locomo",)), ("gigamemory", ("gigamemory",)), ("convlab", ("convlab",))]
)
def test_real_files_build_on_spark_as_they_build_locally(source, parts, spark, tmp_path):
    data = str(shared_data(*parts))
    local = build_source(source, tmp_path / "local", data)
    on_spark = build_source(source, tmp_path / "spark", data, engine=spark)
    assert_same_build(local.output, on_spark.output)
    assert on_spark.statistics.sorted() == local.statistics.sorted()


@pytest.mark.slow
def test_the_cli_builds_on_spark_and_says_what_it_needs(tmp_path):
    convhub = [sys.executable, "-m", "convhub.cli.main"]
    wrong = subprocess.run(
        [
            *convhub,
            "build",
            "locomo",
            "--sample",
            "--output",
            str(tmp_path / "x"),
            "--spark-master",
            "local[1]",
        ],
        capture_output=True,
        text=True,
    )
    assert wrong.returncode != 0
    assert "--spark-master needs --engine spark" in wrong.stderr
    assert "Traceback" not in wrong.stderr
    built = subprocess.run(
        [
            *convhub,
            "build",
            "locomo",
            "--sample",
            "--output",
            str(tmp_path / "out"),
            "--engine",
            "spark",
            "--spark-master",
            "local[1]",
            "--config",
            "sessions",
        ],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    assert "sessions" in built.stdout
    assert pq.read_table(tmp_path / "out" / "sessions" / "test-00000-of-00001.parquet").num_rows == 2


def test_a_duplicate_conversation_id_is_found_by_spark_as_locally(spark, tmp_path, monkeypatch):
    """Spark counts the ids and finds the rows of repeated ones (the driver reads no file's ids): the same error,
    the same drop."""
    from tests.support.hostile_sources import SOURCES, convlab_record

    data = tmp_path / "data"
    source = SOURCES["convlab"]
    source.write(
        data, [convlab_record(0, subset="toy"), convlab_record(1, subset="toy")], "toy/data/dialogues.json"
    )
    clash = convlab_record(0, text="another dialogue", subset="toy") | {"dataset": "zzz"}
    source.write(data, [clash], "zzz/data/dialogues.json")
    with pytest.raises(SourceError) as local:
        build_source("convlab", tmp_path / "local-raise", str(data))
    kept = build_source("convlab", tmp_path / "local", str(data), on_bad_record="skip")

    def read_on_the_driver(*args):
        raise AssertionError("the driver read every sessions file's ids")

    monkeypatch.setattr(LocalEngine, "repeated_rows", read_on_the_driver)
    with pytest.raises(SourceError) as on_spark:
        build_source("convlab", tmp_path / "spark-raise", str(data), engine=spark)
    # the places name files, which are cut differently (one per Spark task): the rest is the same
    places = re.compile(r"sessions/train-\d{5}-of-\d{5}\.parquet|row \d+")
    assert places.sub("PLACE", str(on_spark.value)) == places.sub("PLACE", str(local.value))
    assert "duplicate conversation_id 'toy-train-0'" in str(on_spark.value)
    assert on_spark.value.field == "conversation_id"
    on_spark = build_source("convlab", tmp_path / "spark", str(data), on_bad_record="skip", engine=spark)
    assert_same_build(kept.output, on_spark.output)
    quarantined = [
        places.sub("PLACE", result.quarantine.read_text(encoding="utf-8")) for result in (kept, on_spark)
    ]
    assert quarantined[0] == quarantined[1] and "another dialogue" in quarantined[1]


def test_a_file_spark_names_its_own_way_is_found_in_the_list_it_was_given():
    """Spark qualifies and URL-encodes the paths it reads (``_metadata.file_path``)."""
    paths = ["out/.b.partial-1/sessions/a b/train-0.parquet", "out/.b.partial-1/sessions/train-0.parquet"]
    assert spark_module._place_in(paths, "file:/home/u/out/.b.partial-1/sessions/train-0.parquet") == 1
    assert spark_module._place_in(paths, "file:/home/u/out/.b.partial-1/sessions/a%20b/train-0.parquet") == 0
    assert spark_module._place_in(["hdfs:///d/x.parquet"], "hdfs://nn:8020/d/x.parquet") == 0
    with pytest.raises(RuntimeError, match="none of the files"):
        spark_module._place_in(paths, "file:/elsewhere/x.parquet")


def test_mnbvc_files_under_a_url_are_read_by_the_tasks_where_they_are(spark, sample_builds, tmp_path):
    """``--data-dir`` a URL (here ``file://``; ``hdfs://``, ``s3a://`` alike through fsspec): the driver lists it,
    each task opens its file there, nothing is downloaded first, and the rows are the local build's."""
    sample = Path(registry.get("mnbvc").sample_dir())
    result = build_source("mnbvc", tmp_path / "from-url", sample.as_uri(), engine=spark)
    assert_same_build(sample_builds["mnbvc"].output, result.output)
    assert result.notes == sample_builds["mnbvc"].notes
    from convhub.storage.folders import fsspec_url as _fsspec_url

    assert (
        _fsspec_url("s3a://bucket/dialogue/a.jsonl") == "s3://bucket/dialogue/a.jsonl"
    )  # Hadoop's name for S3


@pytest.mark.parametrize("source", ["mnbvc", "convlab"])
def test_a_spark_build_writes_straight_to_a_url(source, spark, sample_builds, tmp_path, monkeypatch):
    """``--output`` a URL (here ``file://``; ``hdfs://``, ``s3a://`` alike through fsspec): the tasks write in the
    staging folder at the URL, not in a local work folder, and the rows are the local build's. MNBVC's rows go
    through Spark's shuffle; ConvLab's files are then split by subset on the driver."""
    from convhub.engine.runners.spark import SparkEngine

    works = []
    write_config = SparkEngine.write_config
    monkeypatch.setattr(
        SparkEngine,
        "write_config",
        lambda self, builder, work, *rest: (
            works.append(str(work)) or write_config(self, builder, work, *rest)
        ),
    )
    monkeypatch.chdir(tmp_path)
    output = tmp_path / "out" / source
    result = build_source(source, output.as_uri(), registry.get(source).sample_dir(), engine=spark)
    assert str(result.output) == output.as_uri()
    assert works and all(
        work.startswith(f"{(tmp_path / 'out').as_uri()}/.{source}.partial-") for work in works
    )
    assert_same_build(sample_builds[source].output, output)
    assert [path.name for path in tmp_path.iterdir()] == ["out"]  # nothing under the working folder
    assert [path.name for path in (tmp_path / "out").iterdir()] == [source]  # no staging left beside it
    assert not (output / ".convhub-work").exists()


def test_a_spark_build_of_derived_views_alone_reads_its_sessions_at_the_url(spark, sample_builds, tmp_path):
    """Without ``sessions`` in the build, its shards still go where the tasks that derive ``turns`` can read them."""
    output = tmp_path / "turns-only"
    build_source(
        "locomo", output.as_uri(), registry.get("locomo").sample_dir(), configs=["turns"], engine=spark
    )
    assert sorted(path.name for path in output.iterdir()) == [".convhub", "README.md", "turns"]
    built, local = (
        pq.read_table(sorted((folder / "turns").glob("test-*.parquet")))
        for folder in (output, sample_builds["locomo"].output)
    )
    assert built.equals(local)


@pytest.mark.parametrize("source", ["locomo", "gigamemory", "convlab"])
def test_files_under_a_url_are_read_by_spark_tasks(source, spark, sample_builds, tmp_path):
    """``--data-dir`` a URL for LoCoMo (each task opens its file there), GigaMemory (pass 1 on the driver, the
    parsing tasks read the file at the URL) and ConvLab (a task reads the driver's copy, or makes its own): the
    rows of the local build."""
    sample = Path(registry.get(source).sample_dir())
    result = build_source(source, tmp_path / "from-url", sample.as_uri(), engine=spark)
    assert_same_build(sample_builds[source].output, result.output)
    assert result.notes == sample_builds[source].notes


@pytest.mark.slow
def test_the_oracle_script_compares_a_scaled_input_built_by_both_engines(capsys):
    assert oracle.main(["--scale", "0.002", "--source", "locomo", "--engine", "spark:local[2]"]) == 0
    output = capsys.readouterr().out
    assert "| locomo | sessions/test | 4 | equal |" in output
    assert "| locomo | card (but byte figures) | 0 | equal |" in output
    assert "0 difference(s)" in output


@pytest.mark.slow
def test_the_oracle_compares_a_gigamemory_build_of_both_engines(capsys):
    assert oracle.main(["--scale", "0.002", "--source", "gigamemory", "--engine", "spark:local[2]"]) == 0
    assert "| gigamemory | sessions/test | 1 | equal |" in capsys.readouterr().out


def test_the_oracle_names_what_differs(sample_builds):
    compared = dict(
        (name, same)
        for name, _, same in oracle.compare(
            sample_builds["locomo"].output, sample_builds["gigamemory"].output
        )
    )
    assert compared["sessions/test"] is False and compared["card (but byte figures)"] is False
    assert compared["observations/test"] is False  # LoCoMo's own config, absent from the other build


def _locomo_with_a_bad_record(folder: Path) -> Path:
    """The LoCoMo sample with a speaker that is a number: its task fails on an executor."""
    from convhub.builders.locomo.builder import LocomoBuilder

    samples = json.loads(
        (Path(LocomoBuilder.sample_dir()) / "locomo_sample.json").read_text(encoding="utf-8")
    )
    samples[0]["conversation"]["speaker_a"] = 5
    folder.mkdir()
    (folder / "locomo_sample.json").write_text(json.dumps(samples), encoding="utf-8")
    return folder


@pytest.mark.slow
def test_a_bad_record_on_spark_is_convhubs_line_alone_unless_verbose(tmp_path):
    """Spark's own output (JVM start-up notes, the executor's ERROR log with the task's traceback) came before
    convhub's line; it is silenced, and ``--verbose`` shows it again."""
    data = _locomo_with_a_bad_record(tmp_path / "data")
    command = [sys.executable, "-m", "convhub.cli.main", "build", "locomo", "--data-dir", str(data), "--config",
               "sessions", "--engine", "spark", "--spark-master", "local[1]", "--output", str(tmp_path / "out")]  # fmt: skip
    quiet = subprocess.run(command, capture_output=True, text=True, check=False)
    line = (
        f"convhub build: error: {data}/locomo_sample.json, record conv-s1, field 'conversation.speaker_a': "
        "expected str, got int"
    )
    assert quiet.returncode == 1, quiet.stderr
    assert quiet.stderr.splitlines() == ["locomo sessions test: 1 shard on Spark", line], quiet.stderr
    assert quiet.stdout == ""
    verbose = subprocess.run([*command, "--verbose"], capture_output=True, text=True, check=False)
    assert verbose.returncode == 1 and verbose.stderr.splitlines()[-1] == line
    assert "ERROR Executor" in verbose.stderr, verbose.stderr
    assert not (tmp_path / "out").exists()
