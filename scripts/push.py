"""Push a built folder from a checkout, without installing convhub: ``convhub push`` with the same arguments.

python scripts/push.py locomo --repo-id ORG/locomo-unified --dry-run
python scripts/push.py locomo --repo-id ORG/locomo-unified --folder out/locomo-unified --create-pr
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _checkout import use_checkout

use_checkout()  # the checkout's builders/ as convhub, when convhub is not installed

from convhub.cli.main import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["push", *sys.argv[1:]]))
