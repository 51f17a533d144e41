"""The one rule for `pyarrow.compute` (see docs/layout.md, "Types").

pyarrow makes most of `pyarrow.compute` at import time (`_make_global_functions()` wraps every kernel of the C++
function registry), so no source file declares `pc.equal`, `pc.if_else` or `pc.list_flatten` and pyright reports
each use as an unknown attribute. This stub, found through pyright's default stubPath `typings/`, gives every
attribute of the module the type `Any`: calls into pyarrow's kernels are unchecked, everything else of pyarrow keeps
its own types.
"""

from typing import Any

def __getattr__(name: str) -> Any: ...
