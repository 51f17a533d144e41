"""Builds on a Spark standalone cluster (a master and two workers on 127.0.0.1, ``tests/support/spark_cluster.py``), equal
to the local build: every config and split as a table (``pyarrow.Table.equals``), the cards but for byte figures
(``benchmarks/oracle.py``).

Every build runs in one driver process against the cluster (one application, so the JVMs start once); its
tasks run in the workers' executors, other JVMs than the driver's, as on a real cluster.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from convhub import registry
from convhub.engine.build import build_source
from tests.support.spark_cluster import cluster_env, standalone_cluster

pytest.importorskip("pyspark", reason='PySpark is the "spark" extra: pip install ".[spark]"')
import mnbvc_synthetic
import oracle

#: One worker (``--dist loadfile``; the group for ``loadgroup``) starts the cluster and runs every build on it, once.
#: Its time limit is the cluster's own (a start of up to 120 s per daemon, 1200 s for the driver), not pyproject's.
pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.xdist_group("spark-cluster"),
    pytest.mark.timeout(1800),
]

#: The driver: every (source, data dir, output) of argv[2] built on the master of argv[1] by one SparkEngine.
DRIVER = """
import json, sys
from convhub.engine.build import build_source
from convhub.engine.runners.spark import SparkEngine
engine = SparkEngine(sys.argv[1])
try:
    for source, data_dir, output in json.loads(sys.argv[2]):
        build_source(source, output, data_dir, engine=engine)
finally:
    engine.stop()
"""


@pytest.fixture(scope="module")
def real_shaped_mnbvc(tmp_path_factory) -> Path:
    """Multi-turn shards with each conversation's rows spread over them: the regrouping moves rows between the
    workers' executors."""
    folder = tmp_path_factory.mktemp("mnbvc-in")
    mnbvc_synthetic.generate(folder / "multiturn", 3, 4, use_gzip=False, seed=7)
    return folder


@pytest.fixture(scope="module")
def cluster_builds(tmp_path_factory, real_shaped_mnbvc) -> dict[str, Path]:
    """Name → the folder the cluster built: every source's sample, and the real-shaped MNBVC shards."""
    root = tmp_path_factory.mktemp("cluster-builds")
    jobs = [(name, registry.get(name).sample_dir(), str(root / name)) for name in registry.names()]
    jobs.append(("mnbvc", str(real_shaped_mnbvc), str(root / "mnbvc-real-shaped")))
    with standalone_cluster(tmp_path_factory.mktemp("spark-cluster")) as master:
        run = subprocess.run(
            [sys.executable, "-c", DRIVER, master, json.dumps(jobs)],
            env=cluster_env(),
            capture_output=True,
            text=True,
            timeout=1200,
        )
    assert run.returncode == 0, run.stderr[-3000:]
    return {Path(output).name: Path(output) for _, _, output in jobs}


def assert_built_alike(local: Path, cluster: Path) -> None:
    compared = oracle.compare(local, cluster)
    assert len(compared) > 1 and [key for key, _, same in compared if not same] == []


def test_real_shaped_mnbvc_shards_build_equal_rows_on_a_master_and_two_workers(
    cluster_builds, real_shaped_mnbvc, tmp_path
):
    local = build_source("mnbvc", tmp_path / "local", str(real_shaped_mnbvc))
    assert sum(info.num_examples for info in local.configs["sessions"].splits.values()) > 10
    assert_built_alike(local.output, cluster_builds["mnbvc-real-shaped"])


@pytest.mark.parametrize("source", registry.names())
def test_every_sample_builds_on_the_cluster_as_it_builds_locally(source, cluster_builds, sample_builds):
    assert_built_alike(sample_builds[source].output, cluster_builds[source])
