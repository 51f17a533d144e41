"""What ``convhub build`` prints on stderr: each message once, bars that name what they build, and a sample
build's deliberate quirks summed up in one line per source.

The CLI runs in a subprocess, as a user runs it: logging handlers and progress bars are set up exactly as in a
terminal session (stderr is a pipe, so bars are written line by line and every redraw is kept).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from convhub import registry

ROOT = Path(__file__).resolve().parents[2]
SUMMARY_LINE = re.compile(r"^  (?P<config>\S+) ")
QUIRK_SUMMARY = re.compile(r"^(?P<source>\w+): the sample holds (?P<count>\d+) deliberate quirks? ")


def convhub(*arguments: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        [sys.executable, "-m", "convhub.cli.main", *arguments],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done


def built_configs(stdout: str) -> dict[str, list[str]]:
    """source → configs, from the build's summary on stdout (``locomo: OUT`` then ``  sessions  test 2 rows``)."""
    found: dict[str, list[str]] = {}
    source = None
    for line in stdout.splitlines():
        if not line.startswith(" "):
            source = line.split(":")[0]
            found[source] = []
        elif match := SUMMARY_LINE.match(line):
            found[source].append(match["config"])
    return found


def repeated(stderr: str) -> list[str]:
    lines = [line for line in stderr.split("\n") if line.strip()]
    return sorted({line for line in lines if lines.count(line) > 1})


@pytest.fixture(scope="module")
def sample_build(tmp_path_factory) -> subprocess.CompletedProcess:
    return convhub("build", "--all", "--sample", "--output", str(tmp_path_factory.mktemp("out") / "all"))


@pytest.mark.slow
def test_more_processes_than_shards_is_one_line_of_convhubs_not_a_datasets_warning(tmp_path):
    """A one-file source printed ``datasets``' "Setting num_proc from 2 back to 1" for every config, and the
    default (one process per core) then was not what ran: convhub gives ``datasets`` no more processes than
    a split has shards, and says so once where the user asked for more."""
    done = convhub(
        "build", "locomo", "--data-dir", "builders/locomo/sample", "--num-proc", "2",
        "--output", str(tmp_path / "out"),
    )  # fmt: skip
    assert "num_proc" not in done.stderr and "WARNING" not in done.stderr, done.stderr
    notes = [line for line in done.stderr.splitlines() if line.startswith("note: ")]
    assert notes == [
        "note: locomo: built in 1 process, not the 2 asked for (--num-proc): no split of this input has more "
        "than 1 shard, and a shard is one process's work"
    ], done.stderr
    assert not repeated(done.stderr)


@pytest.mark.slow
def test_the_default_processes_say_nothing_of_a_one_file_source(tmp_path):
    """Without ``--num-proc`` (one process per core) a one-file source prints no note and no warning."""
    done = convhub(
        "build", "locomo", "--data-dir", "builders/locomo/sample", "--output", str(tmp_path / "out")
    )
    assert "num_proc" not in done.stderr and "note:" not in done.stderr and "WARNING" not in done.stderr


@pytest.mark.slow
def test_the_sample_build_prints_no_line_twice(sample_build):
    assert not repeated(sample_build.stderr), sample_build.stderr


@pytest.mark.slow
def test_progress_names_source_and_each_built_config_with_a_total(sample_build):
    configs = built_configs(sample_build.stdout)
    assert set(configs) == set(registry.names())
    bars = [segment for segment in re.split(r"[\r\n]", sample_build.stderr) if "|" in segment]
    for source, names in configs.items():
        for name in names:
            named = [bar for bar in bars if bar.startswith(f"{source} ") and re.search(rf"\b{name}\b", bar)]
            assert named, f"no progress bar names {source} {name}:\n{sample_build.stderr}"
            assert all(re.search(r"\| \d+/\d+ ", bar) for bar in named), named  # done/total
    assert "Generating train split" not in sample_build.stderr


@pytest.mark.slow
def test_a_sample_build_sums_up_its_quirks_in_one_line_per_source(sample_build):
    stderr = sample_build.stderr
    summaries = [match for line in stderr.splitlines() if (match := QUIRK_SUMMARY.match(line))]
    assert [match["source"] for match in summaries] == ["mnbvc"], stderr  # the only sample with warnings
    assert "`convhub check mnbvc --sample` lists them" in stderr
    assert "WARNING" not in stderr and "unreadable" not in stderr, stderr
    # the command the line gives works, and lists as many warnings as the line counted
    check = convhub("check", "mnbvc", "--sample")
    listed = [
        line for line in check.stderr.splitlines() if line.startswith("WARNING convhub.builders.mnbvc.")
    ]
    assert len(listed) == int(summaries[0]["count"]) == 2, check.stderr


@pytest.mark.slow
def test_a_data_dir_build_prints_a_quirk_warning_once_on_its_own_line(tmp_path):
    """Outside ``--sample`` each warning stays, once, on a line of its own (not glued to a progress bar)."""
    replies = [
        {"楼ID": "1", "回复": "+1", "扩展字段": "{回复人: 'Dave'"},  # not JSON, not even loose: kept raw
        {"楼ID": "2", "回复": "同去", "扩展字段": '{"回复人": "Erin"}'},
    ]
    thread = {"ID": 7, "主题": "图书馆自习", "来源": "北大树洞", "回复": replies, "元数据": {"扩展字段": ""}}
    (tmp_path / "data" / "forum").mkdir(parents=True)
    (tmp_path / "data" / "forum" / "treehole.jsonl").write_text(
        json.dumps(thread, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    done = convhub(
        "build", "mnbvc", "--data-dir", str(tmp_path / "data"), "--num-proc", "1",
        "--output", str(tmp_path / "out"),
    )  # fmt: skip
    assert done.stderr.count("unreadable") == 1, done.stderr
    warned = [line for line in done.stderr.split("\n") if "unreadable" in line]
    assert warned[0].startswith(
        "WARNING convhub.builders.mnbvc.parse: forum/treehole.jsonl, line 1, 回复.扩展字段: "
    )
    assert not QUIRK_SUMMARY.search(done.stderr)
    assert not repeated(done.stderr)
