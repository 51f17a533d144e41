"""Push a built folder from a checkout, without installing convhub: ``convhub push`` with the same arguments.

python scripts/push.py locomo --repo-id ORG/locomo-unified --dry-run
python scripts/push.py locomo --repo-id ORG/locomo-unified --folder out/locomo-unified --create-pr
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout's `builders`, not an install

from builders.cli import main

if __name__ == "__main__":
    sys.exit(main(["push", *sys.argv[1:]]))
