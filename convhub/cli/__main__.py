"""``python -m convhub.cli``: the ``convhub`` command, as its installed script runs it (``cli.entry``)."""

from convhub.cli.entry import console_main

console_main()
