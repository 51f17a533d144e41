"""The house rules a newcomer relies on: imports resolve for tools as they do for Python, modules stay short."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("convhub", "builders", "dataset_cards")
#: Folders whose modules import their neighbours by path (pyproject.toml's ``[tool.pyright] extraPaths``).
NEIGHBOURS = ("tests", "benchmarks", "scripts")


@pytest.mark.slow
def test_every_import_resolves_for_pyright():
    """With the editable install, pyright finds every module the code imports (convhub's, the builders', the
    tests' neighbours): go-to-definition works in an editor."""
    if shutil.which("pyright") is None:
        pytest.skip("pyright is not installed (pip install -e '.[dev]' installs it)")
    run = subprocess.run(["pyright", "--outputjson"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    found = json.loads(run.stdout)
    # the project's own modules; a third-party one an extra brings (polars, for the benchmarks) may be absent
    own = set(PACKAGES) | {path.stem for folder in NEIGHBOURS for path in (ROOT / folder).rglob("*.py")}
    unresolved = [
        f"{Path(item['file']).relative_to(ROOT)}:{item['range']['start']['line'] + 1}: {item['message']}"
        for item in found["generalDiagnostics"]
        if item.get("rule") in ("reportMissingImports", "reportMissingModuleSource")
        and item["message"].split('"')[1].split(".")[0] in own
    ]
    assert found["summary"]["filesAnalyzed"] > 100
    assert unresolved == []


def test_no_module_is_over_500_lines():
    long = {
        str(path.relative_to(ROOT)): lines
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > 500
    }
    assert long == {}


def test_the_packages_sit_in_folders_of_their_names():
    """What makes the editable install a plain path entry: each import package is the folder of its name."""
    import convhub
    from convhub import builders, dataset_cards

    assert [Path(module.__file__).parent.name for module in (convhub, builders, dataset_cards)] == list(
        PACKAGES
    )


def test_no_test_module_imports_another():
    """Shared fixtures live in helper modules (``tests/*_sources.py``, ``hub_double.py``...), never in a test module
    another one imports: a test module can move or be deleted alone."""
    import ast

    test_modules = {path.stem for path in (ROOT / "tests").rglob("test_*.py")}
    imports = {}
    for path in (ROOT / "tests").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            names += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            imports.update({str(path.relative_to(ROOT)): n for n in names if n.split(".")[0] in test_modules})
    assert imports == {}
