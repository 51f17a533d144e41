"""pyright, with the project's own settings (pyproject's ``[tool.pyright]``), reports no error in ``convhub/`` and
``builders/``: the code's types are checked, not only written. pyarrow's generated functions are typed as Any
by the stubs in ``typings/pyarrow`` (docs/layout.md), not by ignores scattered through the code."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Errors pyright still reports, (file, pyright's rule) → how many: none since issue #52 fixed the last ten. A new
#: error fails the test at once.
KNOWN_ERRORS: Counter[tuple[str, str]] = Counter()


@pytest.mark.slow
def test_pyright_reports_no_error_in_the_package_and_the_sources():
    pyright = shutil.which("pyright")
    if pyright is None:
        pytest.skip("pyright is not installed (the dev extra has it)")
    run = subprocess.run(
        [pyright, "--outputjson", "convhub", "builders"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    report = json.loads(run.stdout)
    errors = [item for item in report["generalDiagnostics"] if item["severity"] == "error"]
    found = Counter((Path(item["file"]).relative_to(ROOT).as_posix(), item.get("rule")) for item in errors)
    shown = "\n".join(
        f"{item['file']}:{item['range']['start']['line'] + 1}: {item['message'].splitlines()[0]}"
        for item in errors
    )
    assert report["summary"]["filesAnalyzed"] > 100
    assert found == KNOWN_ERRORS, f"{len(errors)} pyright errors:\n{shown}"
