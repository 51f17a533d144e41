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

#: The real source files the inputs are made from, as for the tests: ``CONVHUB_SHARED_DATA``, else ``../shared/data``
#: beside the checkout. Read at each use (``harness.SHARED_DATA``), so that one assignment moves every generator.
SHARED_DATA = Path(
    os.environ.get("CONVHUB_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)


#: ``load_dataset("json")`` on the files, the baseline the benchmarks compare with. Files of different shapes
#: (MNBVC's multi-turn and forum shards) cannot share one schema, not even as splits of one load: one
#: load_dataset per folder, as a user would load them.
GENERIC_LOADER = """
import os, sys, tempfile, datasets
datasets.disable_progress_bars()
by_folder = {}
for path in sys.argv[1:]:
    by_folder.setdefault(os.path.dirname(path), []).append(path)
rows = 0
with tempfile.TemporaryDirectory() as cache:
    for files in by_folder.values():
        rows += datasets.load_dataset("json", data_files=files, cache_dir=cache, split="train").num_rows
print(rows)
"""

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
import sys, tempfile, json
import convhub.cli  # first, as the command does: what it sets before pyarrow is imported (its allocator)
import datasets
datasets.disable_progress_bars()
from convhub.engine.build import build_source
source, data_dir, configs, num_proc = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
engine = sys.argv[5] if len(sys.argv) > 5 else "local"  # "local", or "spark:<master>"
engine, _, master = engine.partition(":")
with tempfile.TemporaryDirectory() as out:
    result = build_source(
        source, out + "/folder", data_dir, configs, num_proc or None, engine=engine, spark_master=master or None
    )
    print(sum(info.num_examples for built in result.configs.values() for info in built.splits.values()))
import gc
gc.freeze()  # as the command exits (convhub.cli.main.console_main): no last collection over what is left
"""


class TreeMemory:
    """Peak memory of a case's whole process tree (the case and its worker processes), in MiB.

    Not ``wait4``'s ``ru_maxrss``: Linux carries a process's high-water mark across ``exec``, so a case started
    from this process read at least this process's own size (every case printed the same 359 MiB, and the
    memory ratio read 1.00x whatever happened). Two figures, the larger is the peak:
    - the tree's footprint, sampled: the sum of the proportional set sizes (``Pss`` of ``/proc/PID/smaps_rollup``:
      pages shared by forked workers split between them) of every process under the case, counting a process
      only once it has exec'd (its command line is no longer this process's);
    - each process's own high-water mark since its exec (``VmHWM`` of ``/proc/PID/status``, kept by the
      kernel), read at every sample: a spike between two samples in one process is not missed.

    The same two figures for the tree's Python processes alone (``python_peak_mib``: a Spark build's driver and
    workers, not its JVM), which the issue's memory target is about.

    Reading ``smaps_rollup`` walks the process's page tables under its memory lock: 26 ms for a 1 GiB process.
    Sampled every 20 ms it took 40% of a core from the case it measured (and stalled its page faults), so the
    wait after a sample is at least ``COST_RATIO`` times what the sample took: at most a tenth of a core.
    """

    #: The wait after a sample, as a multiple of the sample's own time (its floor is ``interval``).
    COST_RATIO = 9

    def __init__(self, root: int, interval: float = 0.02):
        import threading

        self.root, self.interval, self.peak_kib, self.python_peak_kib = root, interval, 0, 0
        self.high_water_kib: dict[int, int] = {}  # pid -> its VmHWM at the last sample
        self.pythons: dict[int, bool] = {}  # pid -> whether it ran a Python interpreter at the last sample
        self._own_cmdline = Path("/proc/self/cmdline").read_bytes()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def stop(self) -> float:
        self._done.set()
        self._thread.join()
        return max(self.peak_kib, *self.high_water_kib.values(), 0) / 1024

    @property
    def python_peak_mib(self) -> float:
        """The peak of the tree's Python processes alone (after ``stop``)."""
        pythons = [kib for pid, kib in self.high_water_kib.items() if self.pythons.get(pid)]
        return max(self.python_peak_kib, *pythons, 0) / 1024

    def _sample(self) -> None:
        while not self._done.is_set():
            started = time.perf_counter()
            total = python_total = 0
            for pid in self._tree():
                pss, high_water = self._memory_kib(pid)
                total += pss
                if high_water:
                    self.high_water_kib[pid] = max(self.high_water_kib.get(pid, 0), high_water)
                    # asked at every sample: a process forked by Python runs Python until it execs (the JVM);
                    # one that ended since its memory was read keeps what it ran (a worker at its exit)
                    runs_python = _runs_python(pid)
                    if runs_python is not None:
                        self.pythons[pid] = runs_python
                    python_total += pss if self.pythons.get(pid) else 0
            self.peak_kib = max(self.peak_kib, total)
            self.python_peak_kib = max(self.python_peak_kib, python_total)
            cost = time.perf_counter() - started
            self._done.wait(max(self.interval, self.COST_RATIO * cost))

    def _tree(self) -> list[int]:
        pids, found = [self.root], []
        while pids:
            pid = pids.pop()
            found.append(pid)
            try:
                tasks = list(Path(f"/proc/{pid}/task").glob("*/children"))
            except OSError:  # the process ended after its parent listed it: the sampling thread goes on
                continue
            for children in tasks:
                with contextlib.suppress(OSError):  # the task ended
                    pids += [int(child) for child in children.read_text().split()]
        return found

    def _memory_kib(self, pid: int) -> tuple[int, int]:
        """(Pss, VmHWM) of one process in KiB; (0, 0) before its exec or once it ended."""
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes() == self._own_cmdline:
                return 0, 0  # forked, not yet exec'd: still this process's pages
            high_water = next(
                int(line.split()[1])
                for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                if line.startswith("VmHWM:")
            )
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    return int(line.split()[1]), high_water
        except (OSError, ValueError, StopIteration):
            pass  # the process ended between the listing and the read
        return 0, 0


def _runs_python(pid: int) -> bool | None:
    """Whether a process (past its exec) runs a Python interpreter: its executable is ``python*``; None once it
    ended (its executable can no longer be read)."""
    with contextlib.suppress(OSError):
        return Path(os.readlink(f"/proc/{pid}/exe")).name.startswith("python")
    return None


def run_case(
    code: str, args: list[str], code_root: str | None = None, peaks: dict | None = None
) -> tuple[float, float, int | dict]:
    """Seconds, peak memory in MiB (the case's whole process tree, see ``TreeMemory``) and the rows printed
    (or, for a streaming case, the JSON it printed). ``code_root``: a checkout whose convhub the case imports
    instead of the installed one (``bench.py --baseline-code``: yesterday's code, measured in the same run).
    ``peaks``, when given, gets ``python``: the peak of the tree's Python processes alone."""
    with tempfile.TemporaryDirectory(prefix="convhub-bench-cache-") as cache:
        # a cold datasets cache per case: no case reuses what an earlier one left (e.g. GigaMemory's index)
        env = {
            **os.environ,
            "HF_DATASETS_OFFLINE": "1",
            "HF_DATASETS_CACHE": cache,
        }
        if code_root is not None:
            env["PYTHONPATH"] = os.pathsep.join([code_root, *filter(None, [os.environ.get("PYTHONPATH")])])
        start = time.perf_counter()
        # in the cache folder: ``python -c`` puts its working folder first on sys.path, so a case started in a
        # checkout would import that checkout's convhub, whatever ``code_root`` says
        process = subprocess.Popen(
            [sys.executable, "-c", code, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
            cwd=cache,
        )
        memory = TreeMemory(process.pid)
        stdout, stderr = process.communicate()
        seconds = time.perf_counter() - start
        peak_mib = memory.stop()
        if peaks is not None:
            peaks["python"] = memory.python_peak_mib
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
