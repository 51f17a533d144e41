"""``python -m convhub.cli``: the ``convhub`` command, as its installed script runs it (``cli.entry``)."""

from convhub.cli.entry import console_main

if __name__ == "__main__":  # not when a tool imports every module of the package (pkgutil.walk_packages)
    console_main()
