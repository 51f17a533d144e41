"""A ``--quarantine`` path that is no regular file (a device, a FIFO) or a huge file without a newline is refused
after a bounded read at most: ``check_replaceable`` once read its whole first line, which on ``/dev/zero`` has no
end (24 GB resident, then killed) and on a FIFO waits for a writer that never comes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from convhub.engine.checks import quarantine
from convhub.storage.staging import OutputError

#: The child's address space: far above a check's needs, far below an unbounded read of /dev/zero.
CHILD_MEMORY = 1536 * 2**20


def _check_in_child(quarantine_path: str, tmp_path) -> subprocess.CompletedProcess:
    """``convhub check mnbvc --sample --on-bad-record skip --quarantine PATH`` in a child with bounded memory and
    time: an unbounded read fails it by MemoryError or by the timeout instead of taking the machine down."""
    code = textwrap.dedent(
        f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_AS, ({CHILD_MEMORY}, {CHILD_MEMORY}))
        from convhub.cli import main as cli
        sys.exit(cli.main(["check", "mnbvc", "--sample", "--on-bad-record", "skip", "--quarantine", {quarantine_path!r}]))
        """
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_a_device_as_the_quarantine_file_is_refused_unread(tmp_path):
    done = _check_in_child("/dev/zero", tmp_path)
    assert done.returncode == 2, done.stderr  # an output refused: exit 2, as in every command
    lines = done.stderr.strip().splitlines()
    assert lines == [
        "convhub check: error: /dev/zero is not a quarantine file convhub wrote: refusing to replace it"
    ]


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_as_the_quarantine_file_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "bad.jsonl"
    os.mkfifo(fifo)
    try:
        done = _check_in_child(str(fifo), tmp_path)
    except subprocess.TimeoutExpired:
        pytest.fail("the check waited on the FIFO")
    assert done.returncode == 2, done.stderr  # an output refused: exit 2, as in every command
    assert done.stderr.strip().splitlines() == [
        f"convhub check: error: {fifo} is not a quarantine file convhub wrote: refusing to replace it"
    ]
    assert fifo.exists()


@pytest.mark.slow
def test_a_link_to_a_device_is_refused_before_it_is_followed(tmp_path):
    link = tmp_path / "out.quarantine.jsonl"
    link.symlink_to("/dev/zero")
    done = _check_in_child(str(link), tmp_path)
    assert done.returncode == 2, done.stderr  # an output refused: exit 2, as in every command
    assert done.stderr.strip().splitlines() == [
        f"convhub check: error: {link} is not a quarantine file convhub wrote: refusing to replace it"
    ]


def test_a_first_line_past_the_limit_is_not_read_whole_and_not_taken_for_ours(tmp_path, monkeypatch):
    """A first line that would parse as an entry, but longer than any convhub writes: read up to the limit only,
    and refused (it is no file convhub wrote); the user's file stays."""
    monkeypatch.setattr(quarantine, "FIRST_LINE_LIMIT", 1000)
    entry = {"file": "f", "reason": "x" * 5000, "kind": "k", "scope": "record"}
    target = tmp_path / "big.quarantine.jsonl"
    target.write_text(json.dumps(entry), encoding="utf-8")
    with pytest.raises(OutputError, match="not a quarantine file convhub wrote"):
        quarantine.check_replaceable(target)
    assert json.loads(target.read_text("utf-8")) == entry


def test_a_quarantine_file_convhub_wrote_is_still_replaceable(tmp_path):
    target = tmp_path / "ours.quarantine.jsonl"
    quarantine.save(
        [{"file": "f", "record": 1, "reason": "r" * 70_000, "kind": "k", "scope": "record"}], target
    )
    quarantine.check_replaceable(target)  # no error: convhub wrote it
