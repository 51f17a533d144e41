"""Where a build's memory comes from (``convhub.engine.runners.memory``): on Linux the command takes Arrow's memory from
pyarrow's jemalloc with a short decay, elsewhere from the C library's allocator, in its process and the ones it
starts, unless the user named another pool or other jemalloc settings."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from convhub.engine.runners.memory import (
    ARROW_POOL_VARIABLE,
    ARROW_VARIABLES,
    JEMALLOC_CONF,
    JEMALLOC_CONF_VARIABLE,
)

#: Which pool pyarrow uses and the jemalloc settings, in the command's process once its package is imported and in
#: a child process it starts.
REPORT = """
import os, sys, convhub.cli, pyarrow
child = "import os, pyarrow; print(pyarrow.default_memory_pool().backend_name, os.environ.get('JE_ARROW_MALLOC_CONF'))"
print(pyarrow.default_memory_pool().backend_name, os.environ.get("JE_ARROW_MALLOC_CONF"))
import subprocess
print(subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True).stdout.strip())
"""


def pools(**environment: str) -> list[str]:
    env = {name: value for name, value in os.environ.items() if name not in ARROW_VARIABLES}
    done = subprocess.run(
        [sys.executable, "-c", REPORT], env={**env, **environment}, capture_output=True, text=True, check=True
    )
    assert done.stderr == ""  # pyarrow says nothing of an unknown pool
    return done.stdout.split()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="jemalloc is chosen on Linux only")
def test_the_command_and_its_children_take_arrow_memory_from_jemalloc_with_a_short_decay():
    assert pools() == ["jemalloc", JEMALLOC_CONF] * 2


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="jemalloc is chosen on Linux only")
def test_jemalloc_settings_the_user_names_are_kept():
    assert pools(**{JEMALLOC_CONF_VARIABLE: "dirty_decay_ms:0"}) == ["jemalloc", "dirty_decay_ms:0"] * 2


def test_a_pool_the_user_names_is_kept():
    assert pools(**{ARROW_POOL_VARIABLE: "system"})[::2] == ["system", "system"]
