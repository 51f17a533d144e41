"""Where a build's memory comes from (``convhub.engine.memory``): the command takes Arrow's memory from the C
library's allocator, in its process and the ones it starts, unless the user named another pool."""

from __future__ import annotations

import os
import subprocess
import sys

from convhub.engine.memory import ARROW_POOL_VARIABLE

#: Which pool pyarrow uses, and what a child process is told, once the command's package is imported.
REPORT = """
import os, sys, convhub.cli, pyarrow
child = "import pyarrow; print(pyarrow.default_memory_pool().backend_name)"
print(pyarrow.default_memory_pool().backend_name, os.environ["ARROW_DEFAULT_MEMORY_POOL"])
import subprocess
print(subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True).stdout.strip())
"""


def pools(**environment: str) -> list[str]:
    env = {name: value for name, value in os.environ.items() if name != ARROW_POOL_VARIABLE}
    done = subprocess.run(
        [sys.executable, "-c", REPORT], env={**env, **environment}, capture_output=True, text=True, check=True
    )
    return done.stdout.split()


def test_the_command_and_its_children_take_arrow_memory_from_the_c_library():
    assert pools() == ["system", "system", "system"]


def test_a_pool_the_user_names_is_kept():
    assert pools(**{ARROW_POOL_VARIABLE: "mimalloc"}) == ["mimalloc", "mimalloc", "mimalloc"]
