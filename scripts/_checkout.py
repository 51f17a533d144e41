"""Run a script from a checkout without installing convhub: the checkout's ``builders/`` is imported as ``convhub``.

An installed convhub is used as it is. Else ``builders/`` is loaded under the package name ``convhub`` (the name the
installed package has, see pyproject.toml), so ``from convhub import ...`` finds the checkout's modules. Worker
processes started by ``fork`` inherit it; Spark's workers need convhub installed.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent


def use_checkout() -> None:
    if "convhub" in sys.modules or importlib.util.find_spec("convhub") is not None:
        return
    package = CHECKOUT / "builders"
    spec = importlib.util.spec_from_file_location(
        "convhub", package / "__init__.py", submodule_search_locations=[str(package)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["convhub"] = module
    spec.loader.exec_module(module)
