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


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports free on 127.0.0.1 now: their sockets are held together while they are picked, so no
    two daemons of one cluster are handed the same port (a port picked after the master started could be the one
    its web UI had yet to bind)."""
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [probe.getsockname()[1] for probe in probes]
    finally:
        for probe in probes:
            probe.close()


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


def _registered_workers(web_port: int, master_url: str) -> int:
    """The master's alive workers, from its web UI's JSON; 0 while the UI is not up yet, while it still answers
    ``/json/`` with an HTML page (seen once in CI, on a loaded machine) or an answer cut or malformed as its server
    starts (``http.client.HTTPException``: ``IncompleteRead``, ``BadStatusLine``, neither an OSError nor a
    ValueError), or while the port answers for some other daemon than this master."""
    import http.client
    import json
    import urllib.request

    no_proxy = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with no_proxy.open(f"http://127.0.0.1:{web_port}/json/", timeout=5) as answer:
            state = json.load(answer)
    except (OSError, ValueError, http.client.HTTPException):
        return 0
    if not isinstance(state, dict) or state.get("url") != master_url:
        return 0
    return len([w for w in state.get("workers", []) if w.get("state") == "ALIVE"])


@contextmanager
def standalone_cluster(folder: Path, workers: int = 2) -> Iterator[str]:
    """``spark://127.0.0.1:PORT`` of a master with ``workers`` workers (one core, 1 GiB each), stopped on exit."""
    env = cluster_env()
    spark_class = str(Path(env["SPARK_HOME"]) / "bin" / "spark-class")
    port, web_port, *worker_web_ports = free_ports(2 + workers)
    master_url = f"spark://127.0.0.1:{port}"
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
                master_url,
                "--host",
                "127.0.0.1",
                "--cores",
                "1",
                "--memory",
                "1g",
                "--work-dir",
                str(work),
                "--webui-port",
                str(worker_web_ports[index]),
            )
        deadline = time.monotonic() + START_SECONDS
        while _registered_workers(web_port, master_url) < workers:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{workers} workers did not register within {START_SECONDS} s: {log.read_text()[-2000:]}"
                )
            time.sleep(0.5)
        yield master_url
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
