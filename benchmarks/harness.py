"""The benchmarks' shared harness: each case in a fresh process, timed, with its process tree's peak memory.

``bench.py``, the single-source input generators (``gigamemory_scaled.py``, ``convlab_multiwoz_like.py``) and
``engine_bakeoff.py`` all run their cases through :func:`run_case`; this module imports none of them, so no
benchmark module imports another in a circle.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PARSE_FLOOR = """
import gzip, json, sys
for path in sys.argv[1:]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        if path.endswith(".json"):
            json.load(handle)
        else:
            for line in handle:
                json.loads(line)
print(-1)
"""

BUILD = """
import sys, tempfile, json, datasets
datasets.disable_progress_bars()
from convhub.build import build_source
source, data_dir, configs, num_proc = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
engine = sys.argv[5] if len(sys.argv) > 5 else "local"  # "local", or "spark:<master>"
engine, _, master = engine.partition(":")
with tempfile.TemporaryDirectory() as out:
    result = build_source(
        source, out + "/folder", data_dir, configs, num_proc or None, engine=engine, spark_master=master or None
    )
    print(sum(info.num_examples for built in result.configs.values() for info in built.splits.values()))
"""


class TreeMemory:
    """Peak memory of a case's whole process tree (the case and its worker processes), in MiB.

    Not ``wait4``'s ``ru_maxrss``: Linux carries a process's high-water mark across ``exec``, so a case started
    from this process read at least this process's own size (every case printed the same 359 MiB, and the
    memory ratio read 1.00x whatever happened). Instead a thread samples, every ``interval`` seconds, the
    proportional set size (``Pss`` of ``/proc/PID/smaps_rollup``: pages shared by forked workers split between
    them, so the sum is the tree's real footprint) of every process under the case, counting a process only
    once it has exec'd (its command line is no longer this process's). The peak of the sums is the figure.
    A process that lives less than ``interval`` can be missed; the builds' workers live for seconds.
    """

    def __init__(self, root: int, interval: float = 0.02):
        import threading

        self.root, self.interval, self.peak_kib = root, interval, 0
        self._own_cmdline = Path("/proc/self/cmdline").read_bytes()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def stop(self) -> float:
        self._done.set()
        self._thread.join()
        return self.peak_kib / 1024

    def _sample(self) -> None:
        while not self._done.is_set():
            self.peak_kib = max(self.peak_kib, sum(self._pss_kib(pid) for pid in self._tree()))
            self._done.wait(self.interval)

    def _tree(self) -> list[int]:
        pids, found = [self.root], []
        while pids:
            pid = pids.pop()
            found.append(pid)
            for children in Path(f"/proc/{pid}/task").glob("*/children"):
                with contextlib.suppress(OSError):  # the task ended
                    pids += [int(child) for child in children.read_text().split()]
        return found

    def _pss_kib(self, pid: int) -> int:
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes() == self._own_cmdline:
                return 0  # forked, not yet exec'd: still this process's pages
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    return int(line.split()[1])
        except (OSError, ValueError):
            pass  # the process ended between the listing and the read
        return 0


def run_case(code: str, args: list[str]) -> tuple[float, float, int | dict]:
    """Seconds, peak memory in MiB (the case's whole process tree, see ``TreeMemory``) and the rows printed
    (or, for a streaming case, the JSON it printed)."""
    with tempfile.TemporaryDirectory(prefix="convhub-bench-cache-") as cache:
        # a cold datasets cache per case: no case reuses what an earlier one left (e.g. GigaMemory's index)
        env = {
            **os.environ,
            "HF_DATASETS_OFFLINE": "1",
            "HF_DATASETS_CACHE": cache,
        }
        start = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-c", code, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        memory = TreeMemory(process.pid)
        stdout, stderr = process.communicate()
        seconds = time.perf_counter() - start
        peak_mib = memory.stop()
    if process.returncode != 0:
        raise RuntimeError(f"benchmark case failed:\n{stderr[-3000:]}")
    last = stdout.strip().splitlines()[-1]
    return seconds, peak_mib, json.loads(last) if last.startswith("{") else int(last)


def print_cases(cases: list[tuple[str, str, list[str]]], size_mib: float) -> None:
    """Run (name, code, args) cases one by one, each in a fresh process, printing a table row as each ends
    (the single-source scripts use it: one input, no baselines)."""
    print("| case | seconds | MiB/s | peak MiB (tree) | rows |")
    print("|---|---|---|---|---|")
    for name, code, case_args in cases:
        seconds, rss, rows = run_case(code, case_args)
        print(f"| {name} | {seconds:.1f} | {size_mib / seconds:.1f} | {rss:.0f} | {rows:,} |", flush=True)
