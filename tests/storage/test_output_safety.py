"""Output folders: convhub replaces only what it wrote, never shows a reader a missing folder, and refuses
a folder it may not touch with one line, before any work."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import datasets
import pytest

from convhub import registry
from convhub.build import build_source
from convhub.cli.errors import USAGE
from convhub.cli.main import main
from convhub.export.exporter import export_source
from convhub.mix import load_recipe, write_mixture
from convhub.publish.push import local_files
from convhub.storage import staging
from convhub.storage.staging import MARKER, OutputError, _exchange, check_output, made_by_convhub

LOCOMO_SAMPLE = Path(registry.get("locomo").sample_dir())
#: An output refused: the command line cannot run as given, whichever command refuses it.
REFUSED = USAGE


def _users_folder(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "thesis.tex").write_text("years of work", encoding="utf-8")
    (path / "figures").mkdir()
    (path / "figures" / "plot.png").write_bytes(b"\x89PNG")
    return path


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    return err


def test_a_build_refuses_a_folder_of_the_users_files_and_leaves_it_alone(tmp_path, capsys):
    folder = _users_folder(tmp_path / "mine")
    code = main(["build", "locomo", "--sample", "--output", str(folder)])
    assert code == REFUSED
    assert "convhub did not write" in _one_error_line(capsys)
    assert (folder / "thesis.tex").read_text(encoding="utf-8") == "years of work"
    assert (folder / "figures" / "plot.png").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["mine"]  # no staging folder was even made


def test_overwrite_replaces_a_foreign_folder(tmp_path):
    folder = _users_folder(tmp_path / "old-output")
    build_source("locomo", folder, data_dir=LOCOMO_SAMPLE, configs=["sessions"], overwrite=True)
    assert not (folder / "thesis.tex").exists()
    assert made_by_convhub(folder)
    assert (folder / "README.md").is_file()


def test_a_rebuild_replaces_its_own_earlier_output_and_an_empty_folder_is_used(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    build_source("locomo", folder, data_dir=LOCOMO_SAMPLE, configs=["sessions"])
    build_source("locomo", folder, data_dir=LOCOMO_SAMPLE, configs=["sessions", "turns"])
    assert sorted(p.name for p in folder.iterdir()) == [MARKER, "README.md", "sessions", "turns"]
    assert MARKER not in local_files(folder)  # the marker is never pushed


@pytest.mark.parametrize("where", ["cwd", "home", "root", "parent of cwd"])
def test_never_the_working_folder_home_or_root_even_with_overwrite(tmp_path, monkeypatch, capsys, where):
    work = _users_folder(tmp_path / "work" / "here")
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    _users_folder(tmp_path / "home")
    output = {"cwd": ".", "home": str(tmp_path / "home"), "root": "/", "parent of cwd": ".."}[where]
    code = main(["build", "locomo", "--sample", "--output", output, "--overwrite"])
    assert code == REFUSED
    assert "even with --overwrite" in _one_error_line(capsys)
    assert (work / "thesis.tex").exists() and (tmp_path / "home" / "thesis.tex").exists()


def test_never_the_data_folder_or_a_folder_holding_it(tmp_path, capsys):
    data = tmp_path / "project" / "data"
    data.mkdir(parents=True)
    source = data / "locomo10.json"
    source.write_bytes((LOCOMO_SAMPLE / "locomo_sample.json").read_bytes())
    for output in (data, tmp_path / "project"):
        code = main(["build", "locomo", "--data-dir", str(data), "--output", str(output), "--overwrite"])
        assert code == REFUSED
        assert "holds the input" in _one_error_line(capsys)
    assert source.read_bytes() == (LOCOMO_SAMPLE / "locomo_sample.json").read_bytes()


def test_an_output_inside_the_data_folder_is_refused_so_it_is_never_read_back(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    (data / "locomo10.json").write_bytes((LOCOMO_SAMPLE / "locomo_sample.json").read_bytes())
    code = main(["build", "locomo", "--data-dir", str(data), "--output", str(data / "out")])
    assert code == REFUSED
    assert "read it as input" in _one_error_line(capsys)
    assert [p.name for p in data.iterdir()] == ["locomo10.json"]


def test_a_chained_url_naming_a_local_folder_is_checked_as_that_folder(tmp_path, monkeypatch, capsys):
    """``simplecache::file:///x`` writes the local folder ``/x``: its input, the working folder and the folders
    holding them are refused as they are for ``/x`` itself, even with ``--overwrite``."""
    data = tmp_path / "work" / "data"
    data.mkdir(parents=True)
    source = data / "locomo10.json"
    source.write_bytes((LOCOMO_SAMPLE / "locomo_sample.json").read_bytes())
    for output, problem in ((data, "holds the input"), (data / "out", "read it as input")):
        url = f"simplecache::{output.as_uri()}"
        code = main(["build", "locomo", "--data-dir", str(data), "--output", url, "--overwrite"])
        assert code == REFUSED
        assert problem in _one_error_line(capsys)
    monkeypatch.chdir(data)
    code = main(
        ["build", "locomo", "--sample", "--output", f"simplecache::{data.parent.as_uri()}", "--overwrite"]
    )
    assert code == REFUSED
    assert "even with --overwrite" in _one_error_line(capsys)
    assert [p.name for p in data.iterdir()] == ["locomo10.json"]
    assert source.read_bytes() == (LOCOMO_SAMPLE / "locomo_sample.json").read_bytes()


def test_a_symlink_or_a_file_as_output_is_one_line_before_any_work(tmp_path, capsys):
    target = _users_folder(tmp_path / "target")
    (tmp_path / "link").symlink_to(target)
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    assert main(["build", "locomo", "--sample", "--output", str(tmp_path / "link"), "--overwrite"]) == REFUSED
    assert "symbolic link" in _one_error_line(capsys)
    assert main(["build", "locomo", "--sample", "--output", str(tmp_path / "afile")]) == REFUSED
    assert "is a file" in _one_error_line(capsys)
    assert (target / "thesis.tex").exists() and (tmp_path / "afile").read_text(encoding="utf-8") == "x"


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_folders_follow_the_users_umask(tmp_path, umask):
    previous = os.umask(umask)
    try:
        build_source("locomo", tmp_path / "out", data_dir=LOCOMO_SAMPLE, configs=["sessions"])
    finally:
        os.umask(previous)
    assert (tmp_path / "out").stat().st_mode & 0o777 == 0o777 & ~umask


@pytest.mark.slow
def test_a_reader_polling_during_a_rebuild_never_sees_the_folder_missing_or_half_removed(tmp_path):
    if not _exchange_supported(tmp_path):
        pytest.skip("this system cannot exchange two folders in one step (renameat2); the fallback has a gap")
    folder = tmp_path / "out"
    build_source("locomo", folder, data_dir=LOCOMO_SAMPLE)
    seen = {"polls": 0, "bad": 0}
    done = threading.Event()

    def poll():
        while not done.is_set():
            seen["polls"] += 1
            if not (folder / "README.md").is_file() or not (folder / "turns").is_dir():
                seen["bad"] += 1

    reader = threading.Thread(target=poll)
    reader.start()
    try:
        for _ in range(3):
            build_source("locomo", folder, data_dir=LOCOMO_SAMPLE)
    finally:
        done.set()
        reader.join()
    assert seen["polls"] > 100
    assert seen["bad"] == 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # nothing left aside


def test_without_an_exchange_a_rebuild_moves_the_old_folder_aside_and_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(staging, "_exchange", lambda first, second: False)  # a system without renameat2
    folder = tmp_path / "out"
    build_source("locomo", folder, data_dir=LOCOMO_SAMPLE, configs=["sessions"])
    build_source("locomo", folder, data_dir=LOCOMO_SAMPLE, configs=["turns"])
    assert sorted(p.name for p in folder.iterdir()) == [MARKER, "README.md", "turns"]
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_when_the_new_folder_cannot_be_moved_in_the_old_one_is_put_back(tmp_path, monkeypatch):
    folder = tmp_path / "out"
    build_source("locomo", folder, data_dir=LOCOMO_SAMPLE, configs=["sessions"])
    before = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    monkeypatch.setattr(staging, "_exchange", lambda first, second: False)
    replace = os.replace

    def failing_move_in(source, target):
        if Path(target) == folder and (Path(source) / "turns").is_dir():  # the new build moved in
            raise OSError(28, "No space left on device")
        return replace(source, target)

    monkeypatch.setattr(os, "replace", failing_move_in)
    with pytest.raises(OSError, match="No space left"):
        build_source("locomo", folder, data_dir=LOCOMO_SAMPLE, configs=["turns"])
    monkeypatch.setattr(os, "replace", replace)
    assert {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    } == before
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def _exchange_supported(tmp_path: Path) -> bool:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "x").touch()
    exchanged = _exchange(tmp_path / "a", tmp_path / "b")
    for name in ("a", "b"):
        for child in (tmp_path / name).iterdir():
            child.unlink()
        (tmp_path / name).rmdir()
    return exchanged


def test_a_rebuild_forgets_only_this_folders_cached_copies(tmp_path, monkeypatch):
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "cache"))
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"a": 1}\n', encoding="utf-8")
    datasets.load_dataset("json", data_files=str(rows), cache_dir=str(tmp_path / "cache"))
    generic = [p for p in (tmp_path / "cache" / "json").iterdir() if p.is_dir()]
    assert generic  # load_dataset("json")'s cache, under the name "json"

    folder = tmp_path / "x" / "json"  # a build folder that shares the packaged module's name
    build_source("locomo", folder, data_dir=LOCOMO_SAMPLE, configs=["sessions", "turns"])
    datasets.load_dataset(str(folder), "turns", cache_dir=str(tmp_path / "cache"))
    assert (tmp_path / "cache" / "json" / "turns").is_dir()

    build_source("locomo", folder, data_dir=LOCOMO_SAMPLE, configs=["sessions", "turns"])
    assert not (tmp_path / "cache" / "json" / "turns").exists()  # the folder's own cached copy is gone
    assert all(path.is_dir() for path in generic)  # load_dataset("json")'s cache is untouched


def test_export_and_mix_refuse_a_foreign_folder_too(sample_builds, tmp_path):
    folder = _users_folder(tmp_path / "mine")
    with pytest.raises(OutputError, match="convhub did not write"):
        export_source("locomo", sample_builds["locomo"].output, folder)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        json.dumps({"name": "m", "sources": [{"path": str(sample_builds["locomo"].output)}]}),
        encoding="utf-8",
    )
    with pytest.raises(OutputError, match="convhub did not write"):
        write_mixture(load_recipe(recipe), folder)
    with pytest.raises(OutputError, match="holds the input"):
        write_mixture(load_recipe(recipe), sample_builds["locomo"].output, overwrite=True)
    assert (folder / "thesis.tex").read_text(encoding="utf-8") == "years of work"
    exported = export_source("locomo", sample_builds["locomo"].output, tmp_path / "export")
    export_source("locomo", sample_builds["locomo"].output, exported.output)  # its own output: replaced
    assert made_by_convhub(exported.output)


def test_check_output_accepts_a_new_path(tmp_path):
    check_output(tmp_path / "new" / "folder")
    check_output(tmp_path / "new" / "folder", inputs=["hf://datasets/liwu/MNBVC", None])
