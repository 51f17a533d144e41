"""Files the tests read or hand over: the real source files beside the checkout, a build's Parquet tables, and a
folder copied into an object-store bucket (for the ``--data-dir URL`` tests)."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

#: ``../shared/data`` beside the checkout (``CONVHUB_SHARED_DATA`` overrides it): read-only, never copied in.
SHARED_DATA = Path(
    os.environ.get("CONVHUB_SHARED_DATA", Path(__file__).resolve().parents[3] / "shared" / "data")
)


def shared_data(*parts: str) -> Path:
    """A real source file under ../shared/data, or skip the test (with the reason) when it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(
            f"real source data not available: {path} is absent (../shared/data is not beside this checkout)"
        )
    return path


def uploaded(folder: str | Path, bucket, name: str = "data") -> str:
    """The files of a local folder and its subfolders, copied under ``bucket / name``: their URL."""
    target = bucket / name
    for path in sorted(Path(folder).rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            copied = target / path.relative_to(folder).as_posix()
            copied.parent.mkdir(parents=True, exist_ok=True)
            copied.write_bytes(path.read_bytes())
    return str(target)


def tables(output: Path) -> dict[str, object]:
    """Every Parquet file of a build folder as a table, by its path in the folder."""
    return {
        path.relative_to(output).as_posix(): pq.read_table(path) for path in sorted(output.rglob("*.parquet"))
    }
