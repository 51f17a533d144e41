"""The `convhub` command: options, one-line errors, exit codes."""
