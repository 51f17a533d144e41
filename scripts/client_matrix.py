"""Check that every client users have reads every config of convhub's folders, with the same values.

    python scripts/client_matrix.py                    # build the samples, check every client
    python scripts/client_matrix.py --folder out       # check folders already built (e.g. from real data)
    python scripts/client_matrix.py --client polars-2.1.0 --keep-venvs /tmp/venvs

Each client gets a throwaway virtual environment of its own, holding that client and nothing of convhub's, and
runs ``scripts/client_probe.py`` there. The values each reports (a digest per config and split, and what its JSON
functions find inside the JSON-text columns) must equal what pyarrow reads in this environment. It exits 1 and
names each config, split and client that differs or fails; CI runs it after the tests (``.ci/run``).

Why these clients: ``datasets`` 3.6.0 (the last 3.x, still pinned by many training stacks), the newest 4.x and
the 5.x convhub builds with, each map-style and streaming; pandas on pyarrow 17 (the oldest pyarrow that still
reads our files, where Parquet's JSON type came back as ``bytes``) and on the newest; polars; DuckDB. The Hub's
viewer runs ``datasets`` 5 and DuckDB, so it is covered by these (``../shared/notes/clients-and-viewer.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import yaml

PROBE = Path(__file__).resolve().with_name("client_probe.py")
#: How many ``$.key`` probes per JSON-text column and split: enough to show the client's JSON functions work.
JSON_PROBES_PER_COLUMN = 3
JSON_TEXT_FIELDS = ("extra", "entity", "evidence")


@dataclass(frozen=True)
class Client:
    """One client version: what its environment installs, and how the probe reads with it."""

    name: str
    requirements: tuple[str, ...]
    kinds: tuple[str, ...]


CLIENTS = (
    Client("datasets-3.6.0", ("datasets==3.6.0",), ("datasets", "datasets-streaming")),
    Client("datasets-4.8.5", ("datasets==4.8.5",), ("datasets", "datasets-streaming")),
    Client("datasets-5.2.0", ("datasets==5.2.0",), ("datasets", "datasets-streaming")),
    Client("pandas-2.2.3-pyarrow-17", ("pandas==2.2.3", "pyarrow==17.0.0", "numpy<2.3"), ("pandas",)),
    Client("pandas-3.1.1-pyarrow-26", ("pandas==3.1.1", "pyarrow==26.0.1"), ("pandas",)),
    Client("polars-2.1.0", ("polars==2.1.0",), ("polars",)),
    Client("duckdb-2.0.0", ("duckdb==2.0.0",), ("duckdb",)),
)


# --- the plan: what each folder holds, read from its card --------------------------------------------------


def card_configs(folder: Path) -> list[dict[str, Any]]:
    text = (folder / "README.md").read_text(encoding="utf-8")
    header = text.split("---", 2)[1]
    return yaml.safe_load(header)["configs"]


def split_files(folder: Path, patterns: str | list[str]) -> list[str]:
    """The Parquet files a ``data_files`` entry names (paths or glob patterns), as absolute paths."""
    files: list[str] = []
    for pattern in [patterns] if isinstance(patterns, str) else patterns:
        matches = sorted(folder.glob(pattern))
        if not matches:
            raise SystemExit(f"client_matrix: {folder}: data_files {pattern!r} matches no file")
        files.extend(str(path) for path in matches)
    return files


def json_probes(files: list[str]) -> list[dict[str, Any]]:
    """A few (row, column, key) places whose JSON text holds a string at ``$.key``, with that string."""
    table = pq.ParquetDataset(files).read() if len(files) > 1 else pq.read_table(files[0])
    probes = []
    for column in JSON_TEXT_FIELDS:
        if column not in table.column_names:
            continue
        found = 0
        for row, cell in enumerate(table.column(column).to_pylist()):
            if cell is None or found == JSON_PROBES_PER_COLUMN:
                continue
            value = json.loads(cell)
            if not isinstance(value, dict):
                continue
            key = next(
                (k for k, v in value.items() if k.isidentifier() and k.isascii() and isinstance(v, str)), None
            )
            if key is not None:
                probes.append({"row": row, "column": column, "key": key, "value": value[key]})
                found += 1
    return probes


def make_plan(folders: list[Path]) -> dict[str, Any]:
    plan: dict[str, Any] = {"folders": {}}
    for folder in folders:
        configs = {}
        for config in card_configs(folder):
            splits = {}
            for entry in config["data_files"]:
                files = split_files(folder, entry["path"])
                splits[entry["split"]] = {"files": files, "json_probes": json_probes(files)}
            configs[config["config_name"]] = splits
        plan["folders"][folder.name] = {"path": str(folder), "configs": configs}
    return plan


# --- running the clients -----------------------------------------------------------------------------------


def run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)


def make_venv(client: Client, root: Path) -> Path:
    """A fresh virtual environment with only ``client.requirements``; its python."""
    venv = root / client.name
    shutil.rmtree(venv, ignore_errors=True)
    created = run([sys.executable, "-m", "venv", str(venv)])
    if created.returncode != 0:
        raise RuntimeError(f"venv for {client.name}: {created.stderr.strip()}")
    python = venv / "bin" / "python"
    command = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    installed = run([*command, *client.requirements])
    if installed.returncode != 0:
        raise RuntimeError(f"pip install {' '.join(client.requirements)}: {installed.stderr.strip()[-2000:]}")
    return python


def probe(python: Path, kind: str, plan_path: Path, cache: Path) -> dict[str, Any]:
    """The probe's report for one kind of read; the environment is offline and its caches are private."""
    env = {
        **os.environ,
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(cache / "hf"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.pop("PYTHONPATH", None)
    done = run([str(python), str(PROBE), kind, str(plan_path)], env=env, cwd=cache)
    if done.returncode != 0:
        raise RuntimeError(f"{kind} probe failed: {done.stderr.strip()[-3000:]}")
    return json.loads(done.stdout)


def check_client(client: Client, plan_path: Path, root: Path) -> dict[str, dict[str, Any]]:
    """``{kind: report}`` for one client, or ``{"install": {"error": ...}}`` when it cannot be set up."""
    try:
        python = make_venv(client, root)
    except RuntimeError as error:
        return {"install": {"error": str(error)}}
    reports = {}
    for kind in client.kinds:
        cache = root / f"{client.name}-{kind}-cache"
        cache.mkdir(parents=True, exist_ok=True)
        try:
            reports[kind] = probe(python, kind, plan_path, cache)
        except RuntimeError as error:
            reports[kind] = {"error": str(error)}
    return reports


# --- comparing ---------------------------------------------------------------------------------------------


def compare(expected: dict[str, Any], plan: dict[str, Any], got: dict[str, Any]) -> list[str]:
    """One line per config and split whose values differ from ``expected`` or that failed to load."""
    if "error" in got:
        return [got["error"]]
    problems = []
    for folder, configs in expected.items():
        for config, splits in configs.items():
            seen = got.get(folder, {}).get(config)
            if seen is None:
                problems.append(f"{folder} {config}: not read")
                continue
            if "error" in seen:
                problems.append(f"{folder} {config}: {seen['error'].splitlines()[-1]}")
                continue
            for split, want in splits.items():
                have = seen.get(split)
                problems.extend(
                    f"{folder} {config} {split}: {line}" for line in differences(want, have, plan)
                )
    return problems


def differences(want: dict[str, Any], have: dict[str, Any] | None, plan: dict[str, Any]) -> list[str]:
    if have is None:
        return ["split missing"]
    lines = []
    if have["rows"] != want["rows"]:
        lines.append(f"{have['rows']} rows, expected {want['rows']}")
    if have["columns"] != want["columns"]:
        lines.append(f"columns {have['columns']}, expected {want['columns']}")
    if have["sha256"] != want["sha256"]:
        lines.append("values differ (sha256 of the normalized rows)")
    if have["json_paths"] != want["json_paths"]:
        lines.append(
            f"JSON functions found {have['json_paths']!r:.200}, expected {want['json_paths']!r:.200}"
        )
    return lines


def reference(plan: dict[str, Any]) -> dict[str, Any]:
    """What pyarrow reads here: the values every client must see."""
    sys.path.insert(0, str(PROBE.parent))
    import client_probe

    report = {name: client_probe.probe_folder("pyarrow", folder) for name, folder in plan["folders"].items()}
    for folder, configs in report.items():
        for config, splits in configs.items():
            if "error" in splits:
                raise SystemExit(f"client_matrix: pyarrow cannot read {folder} {config}: {splits['error']}")
            for split, seen in splits.items():
                probes = plan["folders"][folder]["configs"][config][split]["json_probes"]
                if seen["json_paths"] != [probe["value"] for probe in probes]:
                    raise SystemExit(
                        f"client_matrix: {folder} {config} {split}: JSON probes disagree with json.loads"
                    )
    return report


def build_samples(output: Path) -> list[Path]:
    """``convhub build --all --sample`` into ``output``: the folders a newcomer's first command makes."""
    done = run(
        [sys.executable, "-m", "convhub.cli.main", "build", "--all", "--sample", "--output", str(output)]
    )
    if done.returncode != 0:
        raise SystemExit(f"client_matrix: the sample build failed:\n{done.stderr}")
    return sorted(path for path in output.iterdir() if (path / "README.md").is_file())


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--folder", type=Path, help="check the built folders under FOLDER instead of the samples"
    )
    names = [client.name for client in CLIENTS]
    parser.add_argument(
        "--client", action="append", choices=names, help="check only this client (repeatable)"
    )
    parser.add_argument(
        "--keep-venvs", type=Path, help="make the environments here and keep them (else a temp dir)"
    )
    parser.add_argument("--jobs", type=int, default=2, help="environments set up at once (default: 2)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    clients = [client for client in CLIENTS if not args.client or client.name in args.client]
    with tempfile.TemporaryDirectory(prefix="convhub-clients-") as scratch:
        scratch_path = Path(scratch)
        if args.folder:
            folders = sorted(path for path in args.folder.iterdir() if (path / "README.md").is_file())
        else:
            folders = build_samples(scratch_path / "built")
        plan = make_plan(folders)
        plan_path = scratch_path / "plan.json"
        plan_path.write_text(json.dumps(plan), encoding="utf-8")
        expected = reference(plan)
        venvs = args.keep_venvs or scratch_path / "venvs"
        venvs.mkdir(parents=True, exist_ok=True)
        configs = sum(len(folder["configs"]) for folder in plan["folders"].values())
        print(f"client_matrix: {len(folders)} folders, {configs} configs, {len(clients)} clients", flush=True)
        failed = 0
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            started = time.monotonic()
            futures = {client: pool.submit(check_client, client, plan_path, venvs) for client in clients}
            for client, future in futures.items():
                for kind, report in future.result().items():
                    problems = compare(expected, plan, report)
                    status = "ok" if not problems else f"FAILED ({len(problems)})"
                    print(f"  {client.name:<26} {kind:<19} {status}", flush=True)
                    for line in problems[:20]:
                        print(f"      {line}")
                    failed += bool(problems)
            print(f"client_matrix: {failed} failed, in {time.monotonic() - started:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
