"""Write a folder all at once: a build, a mixture and an export never leave partial output."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def staged_folder(output: Path) -> Iterator[Path]:
    """A hidden folder beside ``output`` to write into. When the block ends normally it replaces
    ``output``; on any error it is removed and ``output`` (an earlier build, say) stays as it was."""
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}.partial-", dir=output.parent))
    try:
        yield staging
        if output.exists():
            shutil.rmtree(output)
        os.replace(staging, output)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
