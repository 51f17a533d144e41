"""The `convhub` command: options, one-line errors, exit codes.

Importing it chooses the allocator of Arrow's memory (``engine.memory``), before any of the command's modules
imports pyarrow, which reads the choice once."""

from convhub.engine.runners.memory import choose_the_allocator

choose_the_allocator()
