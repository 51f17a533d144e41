"""Scaled benchmark inputs in each source's own format: a source's folder declares its generator in
``builders/<name>/scaled.py`` and this module finds it (a source without one has no scaled input, and ``bench.py``
skips it with a line).

A source's ``scaled.py`` holds ``scaled_input(folder, scale, real) -> (data_dir, files, notes)``: it writes its input
at ``scale`` into ``folder`` (scale 1 is the full run of issue 6: LoCoMo's real file replicated to 1,000
conversations, ~1 GB of GigaMemory records, a MultiWOZ-sized ConvLab dataset, ~2 GB of MNBVC shards), made from
``real`` (``REAL_FILE``, a path under the shared data folder) where that exists, else from its packaged sample;
``data_dir`` is what the builder reads (``--data-dir``), ``files`` what ``json.loads`` and ``load_dataset("json")``
read (the same bytes, except where the generic loader cannot open the source's files, e.g. ConvLab's ``data.zip``).
With ``--workdir``, an input already generated at the same scale is reused.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import harness

from convhub import registry

#: The module of a source's folder that makes its scaled input.
SCALED_MODULE = "scaled"


@dataclass
class ScaledInput:
    data_dir: Path  # what the builder reads (``--data-dir``)
    files: list[Path]  # what the parse floor and the generic loader read
    notes: list[str] = field(default_factory=list)

    @property
    def megabytes(self) -> float:
        return sum(os.path.getsize(path) for path in self.files) / 2**20


def generator(source: str) -> ModuleType | None:
    """``builders/<source>/scaled.py``, or None where the source has none."""
    name = f"{registry.module_name(source)}.{SCALED_MODULE}"
    return importlib.import_module(name) if importlib.util.find_spec(name) else None


def sources() -> list[str]:
    """The sources with a scaled input, in ``registry.names()``'s order."""
    return [source for source in registry.names() if generator(source) is not None]


def real_file(source: str) -> Path | None:
    """The real file ``source``'s scaled input is made from (its ``REAL_FILE`` under ``harness.SHARED_DATA``, read at
    each call); None where it declares none."""
    module = generator(source)
    relative = getattr(module, "REAL_FILE", None)
    return None if relative is None else harness.SHARED_DATA / relative


def existing_real_file(source: str) -> Path | None:
    """``real_file``, where it exists: what a generator is given (without it, it uses the packaged sample)."""
    real = real_file(source)
    return real if real is not None and real.exists() else None


def packaged_sample_note(source: str) -> list[str]:
    """A note when the real file is absent and the input was made from convhub's packaged sample instead: its
    records are not the real ones' size (a GigaMemory line of ~1 KB, not ~650 KB), so its figures are not README's."""
    real = real_file(source)
    if real is None or real.exists():
        return []
    return [
        f"{source}: {real} is absent (set CONVHUB_SHARED_DATA), so the input is made from convhub's packaged "
        "sample: its records are not the real ones' size and its figures do not compare with README's"
    ]


def make(source: str, folder: Path, scale: float) -> ScaledInput:
    """Generate ``source``'s input at ``scale`` in ``folder`` (reused when ``folder`` already holds it)."""
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder.parent / f"{folder.name}.scaled-input.json"  # beside: the builder reads every *.json
    if marker.exists():
        saved = json.loads(marker.read_text(encoding="utf-8"))
        if saved["scale"] == scale and all(Path(path).exists() for path in saved["files"]):
            return ScaledInput(Path(saved["data_dir"]), [Path(p) for p in saved["files"]], saved["notes"])
    module = generator(source)
    if module is None:
        raise KeyError(f"{source} has no scaled input (builders/{source}/{SCALED_MODULE}.py)")
    data_dir, files, notes = module.scaled_input(folder, scale, existing_real_file(source))
    made = ScaledInput(data_dir, files, [*notes, *packaged_sample_note(source)])
    saved = {"scale": scale, "data_dir": str(made.data_dir), "files": [str(p) for p in made.files]}
    marker.write_text(json.dumps({**saved, "notes": made.notes}), encoding="utf-8")
    return made
