"""The command line's rough edges (issue #54), each held here: a misspelt option named with the close one, Ctrl-C
in the command's first second, Spark cluster masters without a cluster, ``build --all`` stopped after some sources,
``--output file:/abs``, and ``scripts/local_hub.py``'s ``export`` line with a hostile token."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from convhub import registry
from convhub.cli import errors as cli_errors
from convhub.cli import main as cli
from convhub.cli.parsing import Parser

ROOT = Path(__file__).resolve().parents[2]


def usage_error(capsys, argv: list[str]) -> str:
    """``convhub ARGV``'s one usage error line (exit status 2)."""
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == cli_errors.USAGE
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    return err.strip()


# -- a misspelt option ------------------------------------------------------------------------------------------


def test_a_misspelt_required_option_is_named_not_reported_missing(tmp_path, capsys):
    line = usage_error(capsys, ["build", "locomo", "--sample", "--ouput", str(tmp_path / "out")])
    assert line == (
        "convhub build: error: unrecognized option --ouput (did you mean --output?) (see convhub build --help)"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_misspelt_option_beside_every_required_one_is_named_too(tmp_path, capsys):
    line = usage_error(capsys, ["build", "locomo", "--sample", "--output", "out", "--num-porc=2"])
    assert "unrecognized option --num-porc (did you mean --num-proc?)" in line
    line = usage_error(capsys, ["export", "locomo", "--form", "x", "--output", "y", "--streamng"])
    assert (
        "unrecognized options --form (did you mean --from?), --streamng (did you mean --streaming?)" in line
    )


def test_an_unknown_option_far_from_any_is_named_without_a_guess(capsys):
    line = usage_error(capsys, ["check", "locomo", "--sample", "--zzzzzz"])
    assert line.startswith("convhub check: error: unrecognized option --zzzzzz (see")


def test_an_abbreviation_argparse_takes_is_no_typo():
    args = cli.build_parser().parse_args(["check", "locomo", "--samp", "--on-bad", "skip"])
    assert args.sample is True and args.on_bad_record == "skip"


# -- Ctrl-C while the command starts ----------------------------------------------------------------------------


def test_the_command_word_is_found_before_parsing():
    assert cli_errors.command_in(["--version"]) is None
    assert cli_errors.command_in(["build", "--all"]) == "build"


@pytest.mark.slow
@pytest.mark.skipif(
    not Path("/proc/self/maps").exists(), reason="finds the imports under way in /proc/PID/maps"
)
def test_ctrl_c_during_the_imports_is_one_line_and_130(tmp_path):
    """SIGINT once numpy's extension is mapped (``datasets`` and pyarrow are being imported, before ``main``)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "convhub.cli", "build", "locomo", "--sample", "--output", "out"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env,
    )  # fmt: skip
    maps = Path(f"/proc/{process.pid}/maps")
    while "_multiarray_umath" not in maps.read_text(errors="replace"):
        assert process.poll() is None, process.communicate()
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert (process.returncode, stderr.strip()) == (130, "convhub build: interrupted; nothing was written")
    assert not (tmp_path / "out").exists()


# -- Spark cluster masters without a cluster ---------------------------------------------------------------------


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # closed when the block ends: nothing listens there


@pytest.mark.parametrize("master", ["yarn", "k8s://https://127.0.0.1:{port}", "k8s://127.0.0.1:{port}"])
def test_a_cluster_master_without_its_cluster_is_one_line(master, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    monkeypatch.delenv("YARN_CONF_DIR", raising=False)
    master = master.format(port=closed_port())
    argv = ["build", "locomo", "--sample", "--output", str(tmp_path / "out"), "--engine", "spark"]
    assert cli.main([*argv, "--spark-master", master]) == cli_errors.DATA
    err = capsys.readouterr().err
    expected = (
        "HADOOP_CONF_DIR or YARN_CONF_DIR"
        if master == "yarn"
        else "the Kubernetes API server does not answer"
    )
    assert err.startswith(f"convhub build: error: --spark-master {master}: ") and expected in err, err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_an_error_spark_raises_is_its_first_line(capsys):
    """PySpark's and py4j's own errors (a JVM that exited, a Java stack) end as their first line."""
    failure = type("Py4JJavaError", (Exception,), {"__module__": "py4j.protocol"})
    error = failure(
        "An error occurred while calling o1.start.\n: java.lang.Exception: boom\n\tat x.y(Z.java:1)"
    )
    assert cli_errors.exit_status("build", error) == cli_errors.DATA
    assert capsys.readouterr().err == (
        "convhub build: error: Spark failed: An error occurred while calling o1.start. "
        "(--verbose shows Spark's own log)\n"
    )


# -- build --all stopped after some sources -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("failure", "status", "said"), [(KeyboardInterrupt, 130, "interrupted"), (ValueError, 1, "error: bad")]
)
def test_build_all_stopped_names_the_sources_it_wrote(failure, status, said, tmp_path, capsys, monkeypatch):
    from convhub import build

    first, second = registry.names()[:2]
    real = build.build_source

    def stopped_at_the_second(source, *args, **kwargs):
        if source == second:
            raise failure("bad")
        return real(source, *args, **kwargs)

    monkeypatch.setattr(build, "build_source", stopped_at_the_second)
    code = cli.main(["build", "--all", "--sample", "--output", str(tmp_path), "--config", "sessions"])
    written = tmp_path / registry.get(first).HUB_NAME
    assert code == status
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"convhub build: {said}; written before it: {written} (nothing of the source that was building)"
    )
    assert pq.read_table(written / "sessions").num_rows > 0
    assert sorted(path.name for path in tmp_path.iterdir()) == [written.name]


# -- --output file:/abs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("spelling", ["file:{path}", "file://{path}", "file://localhost{path}"])
def test_a_file_url_output_is_its_path_for_build_export_and_mix(spelling, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    built, restored, mixed = tmp_path / "built", tmp_path / "restored", tmp_path / "mixed"
    argv = ["build", "locomo", "--sample", "--output", spelling.format(path=built)]
    assert cli.main(argv) == 0, capsys.readouterr().err
    assert pq.read_table(built / "sessions").num_rows == 2
    assert (
        cli.main(["export", "locomo", "--from", str(built), "--output", spelling.format(path=restored)]) == 0
    )
    assert [path.name for path in restored.iterdir() if not path.name.startswith(".")] == [
        "locomo_sample.json"
    ]
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        f"name: m\nsources:\n  - name: locomo\n    path: {built}\n    split: test\n", encoding="utf-8"
    )
    assert cli.main(["mix", str(recipe), "--output", spelling.format(path=mixed)]) == 0, (
        capsys.readouterr().err
    )
    assert (mixed / "README.md").is_file()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["built", "mixed", "recipe.yaml", "restored"]


def test_a_file_url_on_another_host_is_refused(tmp_path, capsys):
    line = usage_error(capsys, ["export", "locomo", "--from", "x", "--output", "file://elsewhere/out"])
    assert "file://elsewhere/out: a file: URL names an absolute local path" in line


# -- scripts/local_hub.py's export line ---------------------------------------------------------------------------


def test_the_local_hub_export_line_sets_a_hostile_token_and_runs_nothing(tmp_path):
    token = "hf_x$(touch ran-dollar); touch ran-semicolon; `touch ran-backtick` 'q\" end"
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "local_hub.py"), "--port", "0", "--token", token],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        lines = [process.stdout.readline() for _ in range(3)]
        [export] = [line for line in lines if line.startswith("export ")]
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)
    shell = subprocess.run(
        ["bash", "-c", export + 'printf "%s\\n%s" "$HF_TOKEN" "$HF_HUB_DISABLE_XET"'],
        capture_output=True, text=True, cwd=tmp_path, check=True,
    )  # fmt: skip
    assert shell.stdout == f"{token}\n1"
    assert list(tmp_path.iterdir()) == []


def test_push_dry_run_says_it_asks_the_hub(capsys):
    with pytest.raises(SystemExit):
        cli.main(["push", "--help"])
    assert "the Hub must be reachable" in " ".join(capsys.readouterr().out.split())


# -- a stalled Hub ------------------------------------------------------------------------------------------------


def test_a_stalled_hub_is_said_to_have_stalled(capsys, monkeypatch):
    import httpx2
    from huggingface_hub import constants

    monkeypatch.setenv("CONVHUB_HUB_TIMEOUT", "7")
    try:  # datasets' own wrapping of a Hub that did not answer
        raise ConnectionError(
            "Couldn't reach 'ORG/locomo-unified' on the Hub (ReadTimeout)"
        ) from httpx2.ReadTimeout("timed out")
    except ConnectionError as error:
        assert cli_errors.exit_status("export", error) == cli_errors.DATA
    assert capsys.readouterr().err == (
        "convhub export: error: Couldn't reach 'ORG/locomo-unified' on the Hub (ReadTimeout): the Hub stalled, no "
        "answer within 7 s (timed out; CONVHUB_HUB_TIMEOUT sets the limit)\n"
    )
    request = httpx2.Request("GET", f"{constants.ENDPOINT}/datasets/ORG/x/resolve/main/a.parquet")
    assert cli_errors.exit_status("mix", httpx2.ReadTimeout("timed out", request=request)) == cli_errors.DATA
    assert capsys.readouterr().err == (
        f"convhub mix: error: the Hub at {constants.ENDPOINT} (HF_ENDPOINT) stalled while reading "
        "/datasets/ORG/x/resolve/main/a.parquet: no answer within 7 s (timed out; CONVHUB_HUB_TIMEOUT sets the "
        "limit), on every try\n"
    )


def test_an_option_of_an_argument_group_is_known_and_suggested(capsys):
    """Options added through ``add_argument_group`` and ``add_mutually_exclusive_group`` (nested too) are the
    parser's as much as any: given right they parse, misspelt they are named with the close one."""
    parser = Parser(prog="convhub try")
    parser.add_argument("--output", required=True)
    group = parser.add_argument_group("judging")
    group.add_argument("--judge-model")
    exclusive = group.add_mutually_exclusive_group()
    exclusive.add_argument("--streaming", action="store_true")
    parser.add_mutually_exclusive_group().add_argument("--revision")
    args = parser.parse_args(["--output", "o", "--judge-model", "m", "--streaming", "--revision", "v"])
    assert (args.judge_model, args.streaming, args.revision) == ("m", True, "v")
    for typo, meant in (
        ("--judge-modle", "--judge-model"),
        ("--streamng", "--streaming"),
        ("--revison", "--revision"),
    ):
        with pytest.raises(SystemExit) as exited:
            parser.parse_args([typo, "x"])
        assert exited.value.code == cli_errors.USAGE
        assert capsys.readouterr().err.strip() == (
            f"convhub try: error: unrecognized option {typo} (did you mean {meant}?) (see convhub try --help)"
        )


def _yarn_site(folder: Path, *properties: tuple[str, str]) -> Path:
    folder.mkdir()
    lines = "".join(
        f"<property><name>{name}</name><value>{value}</value></property>" for name, value in properties
    )
    (folder / "yarn-site.xml").write_text(f'<?xml version="1.0"?><configuration>{lines}</configuration>')
    return folder


@pytest.mark.slow
def test_yarn_whose_resourcemanager_does_not_answer_ends_in_one_line(tmp_path, monkeypatch, capsys):
    """``HADOOP_CONF_DIR`` names a cluster that is down: the command hung (YARN's client retries for many minutes);
    now one line naming the place and the setting, exit 1, in seconds: a real ``convhub`` process, and
    ``YARN_CONF_DIR`` alike through ``main``."""
    port = closed_port()
    conf = _yarn_site(tmp_path / "conf", ("yarn.resourcemanager.address", f"127.0.0.1:{port}"))
    env = {
        name: value for name, value in os.environ.items() if name not in ("HADOOP_CONF_DIR", "YARN_CONF_DIR")
    }
    env.update(PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    argv = ["build", "locomo", "--sample", "--output", str(tmp_path / "out"), "--engine", "spark"]
    argv += ["--spark-master", "yarn"]

    def line(variable: str) -> list[str]:
        return [
            "convhub build: error: --spark-master yarn: the cluster could not be reached: no YARN ResourceManager "
            f"answers (127.0.0.1:{port}: Connection refused); named by yarn.resourcemanager.address in "
            f"{conf / 'yarn-site.xml'} (${variable})"
        ]

    done = subprocess.run(
        [sys.executable, "-m", "convhub.cli", *argv],
        capture_output=True, text=True, env={**env, "HADOOP_CONF_DIR": str(conf)}, timeout=60,
    )  # fmt: skip
    assert done.returncode == cli_errors.DATA, done.stderr
    assert done.stderr.splitlines() == line("HADOOP_CONF_DIR")
    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    monkeypatch.setenv("YARN_CONF_DIR", str(conf))
    assert cli.main(argv) == cli_errors.DATA
    assert capsys.readouterr().err.splitlines() == line("YARN_CONF_DIR")
    assert not (tmp_path / "out").exists()


def test_the_resourcemanagers_yarn_site_names(tmp_path, monkeypatch):
    """High availability (each ``rm-id``), a host without its port (Hadoop's 8032), a ``${name}`` expanded."""
    from convhub.engine.runners.cluster_masters import contact

    conf = _yarn_site(
        tmp_path / "conf",
        ("yarn.resourcemanager.ha.enabled", "true"),
        ("yarn.resourcemanager.ha.rm-ids", "rm1, rm2"),
        ("yarn.resourcemanager.hostname.rm1", "first.example"),
        ("cluster.host", "second.example"),
        ("yarn.resourcemanager.address.rm2", "${cluster.host}:9032"),
    )
    monkeypatch.delenv("YARN_CONF_DIR", raising=False)
    monkeypatch.setenv("HADOOP_CONF_DIR", str(conf))
    found = contact("yarn")
    assert found is not None and found.places == [("first.example", 8032), ("second.example", 9032)]
    assert found.named_by.startswith(
        "yarn.resourcemanager.hostname.rm1, yarn.resourcemanager.address.rm2 in "
    )
    (conf / "yarn-site.xml").unlink()
    found = contact("yarn")
    assert found is not None and found.places == [("0.0.0.0", 8032)] and "Hadoop's default" in found.named_by
