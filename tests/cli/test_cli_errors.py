"""Every error of the command is one line, ``convhub COMMAND: error: ...``, with the exit status of its kind:
2 for a command line that cannot run as given, 1 for data or a machine that stopped it (issue 33).

Each case here printed a traceback, a quoted Python list, ``[Errno 2]``, a line without ``error:`` or the
wrong status before; the text and the status are checked, and that nothing was left behind.
"""

from __future__ import annotations

import errno
import os

import pytest

from convhub import registry
from convhub.cli import main as cli
from convhub.engine.writers import parquet_writer


def fails(capsys, arguments: list[str], status: int) -> str:
    """Run ``convhub ARGUMENTS``, which must fail with ``status`` and one error line on stderr: its text
    after ``error: ``."""
    try:
        code = cli.main(arguments)
    except SystemExit as exited:  # argparse's own errors
        code = exited.code
    err = capsys.readouterr().err
    lines = [line for line in err.replace("\r", "\n").splitlines() if line.strip()]
    assert code == status, err
    assert "Traceback" not in err and "usage:" not in err, err
    assert lines and lines[-1].startswith(f"convhub {arguments[0]}: error: "), err
    return lines[-1].split(": error: ", 1)[1]


# -- usage errors: status 2 ------------------------------------------------------------------------------


def test_a_config_a_source_lacks_names_the_configs_without_python_quoting(tmp_path, capsys):
    text = fails(
        capsys, ["build", "locomo", "--sample", "--config", "turn", "--output", str(tmp_path / "o")], 2
    )
    assert text == (
        "argument --config: locomo has no config 'turn' (choose from sessions, turns, qa, messages, observations, "
        "events)"
    )
    assert not (tmp_path / "o").exists()


def test_a_config_of_one_source_only_is_refused_with_all_naming_the_source(tmp_path, capsys):
    text = fails(
        capsys, ["build", "--all", "--sample", "--config", "observations", "--output", str(tmp_path)], 2
    )
    first = next(
        name
        for name in registry.names()
        if "observations" not in [view.name for view in registry.get(name).views()]
    )
    assert text.startswith(f"argument --config: {first} has no config 'observations' (choose from sessions, ")
    assert list(tmp_path.iterdir()) == []


def test_neither_source_nor_all_is_a_usage_error(tmp_path, capsys):
    assert fails(capsys, ["build", "--sample", "--output", str(tmp_path / "o")], 2) == (
        "give a SOURCE or --all (not both)"
    )


def test_an_argparse_error_is_one_line_too(tmp_path, capsys):
    text = fails(
        capsys, ["build", "mnbvc", "--sample", "--format", "csv", "--output", str(tmp_path / "o")], 2
    )
    assert text == (
        "argument --format: invalid choice: 'csv' (choose from 'multiturn', 'qa', 'forum') (see convhub build --help)"
    )


def test_a_missing_recipe_is_named_without_errno(tmp_path, capsys):
    text = fails(capsys, ["mix", str(tmp_path / "nothere.yaml"), "--output", str(tmp_path / "o")], 2)
    assert text == f"recipe {tmp_path / 'nothere.yaml'} does not exist"
    assert not (tmp_path / "o").exists()


def test_an_output_name_too_long_for_the_file_system_is_refused_before_any_work(tmp_path, capsys):
    limit = os.pathconf(tmp_path, "PC_NAME_MAX")
    name = "x" * (limit - 17)  # fits alone, not with its staging folder's 18 more bytes
    text = fails(capsys, ["build", "locomo", "--sample", "--output", str(tmp_path / name)], 2)
    assert text == (
        f"--output: the folder name is {limit - 17} bytes long; here it can be at most {limit - 18} bytes "
        f"(the file system's {limit}, less 18 for the staging folder convhub makes beside it)"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("master", "problem"),
    [
        (
            "bogus",
            "'bogus' is not a Spark master URL: give local, local[N], local[*], spark://HOST:PORT, yarn or ",
        ),
        ("local[0]", "'local[0]': N in local[N] must be 1 to "),
        ("local[-1]", "'local[-1]': N in local[N] must be 1 to "),
        ("local[100000]", "'local[100000]': N in local[N] must be 1 to "),
        ("local[x]", "'local[x]': N in local[N] must be a number or *"),
    ],
)
def test_a_spark_master_spark_cannot_run_is_a_usage_error(master, problem, tmp_path, capsys):
    arguments = ["build", "locomo", "--sample", "--engine", "spark", "--spark-master", master]
    text = fails(capsys, [*arguments, "--output", str(tmp_path / "o")], 2)
    assert text.startswith(f"argument --spark-master: {problem}"), text
    if "must be 1 to" in problem:
        assert f"must be 1 to {4 * os.cpu_count()} (4 per core" in text
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("master", ["local", "local[*]", "local[2]", "local[2,3]", "spark://h:7077", "yarn"])
def test_spark_masters_spark_takes_are_taken(master):
    assert (
        cli.build_parser()
        .parse_args(["build", "locomo", "--output", "o", "--spark-master", master])
        .spark_master
    )


# -- data errors: status 1 -------------------------------------------------------------------------------


def test_a_config_given_twice_is_built_once(tmp_path, capsys):
    """It failed with ``FileExistsError`` (the second build of the config found the first one's folder)."""
    output = tmp_path / "o"
    assert (
        cli.main(["build", "locomo", "--sample", "--config", "qa", "--config", "qa", "--output", str(output)])
        == 0
    )
    assert "  qa " in capsys.readouterr().out
    assert sorted(path.name for path in output.iterdir() if not path.name.startswith(".")) == [
        "README.md",
        "qa",
    ]
    assert [path.name for path in (output / "qa").iterdir()] == ["test-00000-of-00001.parquet"]


@pytest.mark.parametrize(
    ("strerror", "filename", "where"),
    [
        (os.strerror(errno.ENOSPC), "sessions-test.parquet", ": sessions-test.parquet"),
        ("Error writing bytes to file. Detail: [errno 28] No space left on device", None, ""),  # pyarrow's
    ],
)
def test_a_full_disk_says_so_and_leaves_nothing(strerror, filename, where, tmp_path, capsys, monkeypatch):
    """``datasets`` wrapped the writer's ``OSError`` in a ``DatasetGenerationError`` (a 78-line traceback whose
    last line did not say the disk was full)."""

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, strerror, filename)

    monkeypatch.setattr(parquet_writer.ParquetWriter, "write_table", full)
    output = tmp_path / "o"
    text = fails(capsys, ["build", "locomo", "--sample", "--config", "sessions", "--output", str(output)], 1)
    assert text == f"no space left on device{where} (the disk is full); nothing was written"
    assert list(tmp_path.iterdir()) == []  # no output, no staging folder, no quarantine


def test_an_unreachable_spark_master_fails_at_once(tmp_path, capsys):
    """Spark retried for over a minute before it failed; nothing listens on port 1 of the loopback address."""
    pytest.importorskip("pyspark")
    arguments = ["build", "locomo", "--sample", "--engine", "spark", "--spark-master", "spark://127.0.0.1:1"]
    text = fails(capsys, [*arguments, "--output", str(tmp_path / "o")], 1)
    assert (
        text
        == "--spark-master spark://127.0.0.1:1: the cluster could not be reached: no Spark master answers "
        "(127.0.0.1:1: Connection refused)"
    )
    assert list(tmp_path.iterdir()) == []


# -- Hub requests time out ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "calls"),
    [
        (["mix", "nothere.yaml", "--output", "o"], 1),
        (["export", "locomo", "--from", "nothere", "--output", "o"], 1),
        (["push", "locomo", "--repo-id", "org/x", "--folder", "nothere", "--dry-run"], 1),
        (["check", "locomo", "--sample"], 0),
    ],
)
def test_commands_that_talk_to_the_hub_give_its_requests_timeouts(arguments, calls, tmp_path, monkeypatch):
    from convhub.publish import hub_client

    called = []
    monkeypatch.setattr(hub_client, "use_timeouts", lambda: called.append(True))
    monkeypatch.chdir(tmp_path)
    cli.main(arguments)  # each fails, after the timeouts are set where they are
    assert len(called) == calls


def test_push_without_a_source_or_folder_is_a_usage_error(capsys):
    assert "give a SOURCE, or --folder for a mixture" in fails(capsys, ["push", "--repo-id", "org/x"], 2)


def test_push_of_a_folder_built_from_another_source_is_one_line_before_the_hub_is_asked(tmp_path, capsys):
    assert cli.main(["build", "locomo", "--sample", "--output", str(tmp_path / "lu")]) == 0
    capsys.readouterr()
    text = fails(capsys, ["push", "gigamemory", "--repo-id", "org/x", "--folder", str(tmp_path / "lu")], 1)
    assert text.startswith(f"{tmp_path / 'lu'} was not built from gigamemory")
