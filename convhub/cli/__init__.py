"""The `convhub` command: options, one-line errors, exit codes.

Importing it chooses the allocator of Arrow's memory (``engine.memory``), before any of the command's modules
imports pyarrow, which reads the choice once."""

from convhub.cli.startup import interrupt_quietly_while_starting
from convhub.engine.memory import choose_the_allocator

interrupt_quietly_while_starting()  # before cli.main's imports, which take seconds
choose_the_allocator()
