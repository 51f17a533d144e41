"""Build a source from a checkout, without installing convhub: ``convhub build`` with the same arguments.

python scripts/build.py locomo --data-dir ../shared/data/locomo --output out/locomo-unified
python scripts/build.py --all --sample --output out
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _checkout import use_checkout

use_checkout()  # the checkout's builders/ as convhub, when convhub is not installed

from convhub.cli.main import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["build", *sys.argv[1:]]))
