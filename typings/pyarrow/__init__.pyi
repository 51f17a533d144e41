"""pyarrow's compiled core, typed by the one rule of docs/layout.md ("Types"): every attribute is `Any`.

`pyarrow/__init__.py` re-exports names from the compiled `pyarrow.lib`, which pyright cannot read, and a stub for
`pyarrow.compute` (see compute.pyi beside this file) needs a package stub beside it. Submodules written in Python
(`pyarrow.parquet`, `pyarrow.fs`, ...) have no stub here, so pyright still reads them from the installed package.
"""

from typing import Any

def __getattr__(name: str) -> Any: ...
