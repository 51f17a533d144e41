"""A Spark standalone cluster on 127.0.0.1 for the tests: a master and two workers started from PySpark's own
``spark-class``, each worker with its own work folder, so that tasks run in executors of other JVMs than the
driver's, as on a real cluster (``local[N]`` runs every task inside the driver's JVM)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: Seconds a master or a worker may take to start on a busy 2-core machine.
START_SECONDS = 120


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def cluster_env() -> dict[str, str]:
    """The environment of the cluster's JVMs and of a driver that uses it: everything on the loopback address,
    the executors' Python workers run by this interpreter (the one with convhub)."""
    import pyspark

    return {
        **os.environ,
        "SPARK_HOME": str(Path(pyspark.__file__).parent),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }


def _wait_for(port: int, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"a Spark daemon exited ({process.returncode}): {log.read_text()[-2000:]}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise RuntimeError(
        f"a Spark daemon did not listen on {port} within {START_SECONDS} s: {log.read_text()[-2000:]}"
    )


def _registered_workers(web_port: int) -> int:
    """The master's alive workers, from its web UI's JSON (0 while the UI is not up yet)."""
    import json
    import urllib.request

    no_proxy = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with no_proxy.open(f"http://127.0.0.1:{web_port}/json/", timeout=5) as answer:
            return len([w for w in json.load(answer).get("workers", []) if w.get("state") == "ALIVE"])
    except OSError:
        return 0


@contextmanager
def standalone_cluster(folder: Path, workers: int = 2) -> Iterator[str]:
    """``spark://127.0.0.1:PORT`` of a master with ``workers`` workers (one core, 1 GiB each), stopped on exit."""
    env = cluster_env()
    spark_class = str(Path(env["SPARK_HOME"]) / "bin" / "spark-class")
    port, web_port = free_port(), free_port()
    processes: list[subprocess.Popen] = []

    def start(name: str, *args: str) -> tuple[subprocess.Popen, Path]:
        log = folder / f"{name}.log"
        with open(log, "wb") as out:
            process = subprocess.Popen([spark_class, *args], env=env, stdout=out, stderr=subprocess.STDOUT)
        processes.append(process)
        return process, log

    try:
        master, log = start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(web_port),
        )
        _wait_for(port, master, log)
        for index in range(workers):
            work = folder / f"worker-{index}"
            work.mkdir()
            start(
                f"worker-{index}",
                "org.apache.spark.deploy.worker.Worker",
                f"spark://127.0.0.1:{port}",
                "--host",
                "127.0.0.1",
                "--cores",
                "1",
                "--memory",
                "1g",
                "--work-dir",
                str(work),
                "--webui-port",
                str(free_port()),
            )
        deadline = time.monotonic() + START_SECONDS
        while _registered_workers(web_port) < workers:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{workers} workers did not register within {START_SECONDS} s")
            time.sleep(0.5)
        yield f"spark://127.0.0.1:{port}"
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
