"""The house rules a newcomer relies on: imports resolve for tools as they do for Python, modules stay short, and
the wheel installs one import package, ``convhub``, whatever files a source's sample holds."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The one import package the wheel installs.
PACKAGE = "convhub"
#: The checkout's folders of code: convhub, and the two it links to (``convhub/builders -> ../builders``,
#: ``convhub/dataset_cards -> ../dataset_cards``), which install as ``convhub.builders`` and ``convhub.dataset_cards``.
PACKAGES = (PACKAGE, "builders", "dataset_cards")
LINKED = {"builders": "../builders", "dataset_cards": "../dataset_cards"}
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
    own = {PACKAGE, "tests"} | {path.stem for folder in NEIGHBOURS for path in (ROOT / folder).rglob("*.py")}
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


#: The most lines the engine (``convhub/engine``, every module's lines) may hold: issue 52's line, kept.
ENGINE_MOST_LINES = 4_500


def test_the_engine_stays_under_its_line():
    """The engine is what every source shares, so it stays small enough to read whole: a change that needs more
    lines makes something else in it simpler (or moves one source's machinery to ``builders/<name>/``), never
    denser (docs/layout.md)."""
    lines = sum(
        len(path.read_text(encoding="utf-8").splitlines())
        for path in (ROOT / PACKAGE / "engine").rglob("*.py")
    )
    assert 3_000 < lines < ENGINE_MOST_LINES


def test_the_packages_sit_in_folders_of_their_names():
    """What makes the editable install a plain path entry: convhub is the folder of its name, and its builders and
    dataset_cards are the checkout's top-level folders, reached through links inside it."""
    import convhub
    from convhub import builders, dataset_cards

    assert Path(convhub.__file__).parent == ROOT / PACKAGE
    assert {name: os.readlink(ROOT / PACKAGE / name) for name in LINKED} == LINKED
    assert [Path(module.__file__).resolve().parent for module in (builders, dataset_cards)] == [
        ROOT / "builders",
        ROOT / "dataset_cards",
    ]


@pytest.mark.slow
def test_nothing_imports_the_linked_folders_as_packages_of_their_own():
    """``builders`` and ``dataset_cards`` are not installed under those names: an ``import builders.x`` works in the
    checkout (its root is on the path) and fails in the wheel. Every import goes through ``convhub.``."""
    found = []
    for folder in (*PACKAGES, *NEIGHBOURS):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = (
                    [node.module]
                    if isinstance(node, ast.ImportFrom) and node.module and not node.level
                    else []
                )
                names += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
                found += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in LINKED]
    assert found == []


@pytest.mark.slow
def test_no_test_module_imports_another():
    """Shared fixtures live in helper modules (``tests.support.*``, a source's own ``tests.<source>.<helper>``), never
    in a test module another one imports: a test module can move or be deleted alone."""
    import ast

    test_modules = {path.stem for path in (ROOT / "tests").rglob("test_*.py")}
    imports = {}
    for path in (ROOT / "tests").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            names += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            imports.update(
                {str(path.relative_to(ROOT)): n for n in names if n.split(".")[-1] in test_modules}
            )
    assert imports == {}


#: What a copy of the checkout leaves out: what git ignores, and the history.
NOT_COPIED = shutil.ignore_patterns(
    ".git", "build", "dist", "*.egg-info", "__pycache__", ".venv*", "venv", "out", ".*_cache", "*.whl"
)


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A copy of this checkout (links kept as links, as a clone has them) whose LoCoMo sample holds two files
    no pattern names: a ``.txt`` and a file without extension in a subfolder."""
    copy = tmp_path / "checkout"
    shutil.copytree(ROOT, copy, symlinks=True, ignore=NOT_COPIED)
    sample = copy / "builders" / "locomo" / "sample"
    (sample / "notes.txt").write_text("a sample file of any name ships too\n", encoding="utf-8")
    (sample / "nested").mkdir()
    (sample / "nested" / "no_extension").write_text("{}", encoding="utf-8")
    return copy


def built(checkout: Path, hook: str, target: Path) -> zipfile.ZipFile:
    """The wheel setuptools' PEP 517 ``hook`` (``build_wheel``, ``build_editable``) makes of ``checkout``, as pip
    runs it, without pip's network (the venv's setuptools, which pyproject's build-system asks for)."""
    target.mkdir()
    code = f"import setuptools.build_meta as b; print(b.{hook}({str(target)!r}))"
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=checkout, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return zipfile.ZipFile(target / run.stdout.split()[-1])


def files_under(folder: Path) -> set[str]:
    """The files under ``folder``, by path relative to it, as a wheel lists them."""
    return {
        path.relative_to(folder).as_posix()
        for path in folder.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }


@pytest.mark.slow
def test_the_wheel_holds_only_convhub_with_every_sample_file_and_card(checkout, tmp_path):
    wheel = built(checkout, "build_wheel", tmp_path / "wheel")
    names = set(wheel.namelist())
    assert {name.split("/")[0] for name in names} == {PACKAGE, "convhub-0.1.0.dist-info"}
    for folder in LINKED:
        shipped = {
            name.removeprefix(f"{PACKAGE}/{folder}/")
            for name in names
            if name.startswith(f"{PACKAGE}/{folder}/")
        }
        assert files_under(checkout / folder) == shipped
    assert {
        "convhub/builders/locomo/sample/notes.txt",
        "convhub/builders/locomo/sample/nested/no_extension",
    } <= names


@pytest.mark.slow
def test_the_editable_install_is_the_checkout_on_the_path_and_finds_a_new_source(checkout, tmp_path):
    """``pip install -e .`` puts the checkout's root on the path (a ``.pth`` line, no import hook: pyright and editors
    follow it), so a source folder added after the install is a source at once: discovery, no registry line."""
    wheel = built(checkout, "build_editable", tmp_path / "editable")
    [pth] = [name for name in wheel.namelist() if name.endswith(".pth")]
    assert wheel.read(pth).decode().split() == [str(checkout)]
    assert not [name for name in wheel.namelist() if name.endswith(".py")]  # no finder module
    shutil.copytree(checkout / "builders" / "longmemeval", checkout / "builders" / "newsource")
    builder = checkout / "builders" / "newsource" / "builder.py"
    builder.write_text(
        builder.read_text(encoding="utf-8").replace('SOURCE = "longmemeval"', 'SOURCE = "newsource"'),
        encoding="utf-8",
    )
    code = "import json; from convhub import registry; print(json.dumps([registry.names(), registry.get('newsource').SOURCE]))"
    env = {**os.environ, "PYTHONPATH": str(checkout)}  # what the .pth line does
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-3000:]
    names, found = json.loads(run.stdout)
    folders = sorted(path.parent.name for path in (checkout / "builders").glob("*/builder.py"))
    assert names == folders and "newsource" in names
    assert found == "newsource"
