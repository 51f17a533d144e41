"""A MultiWOZ-sized ConvLab dataset (10k dialogues, ~140k turns, 200+ MB of JSON) and how the builder copes.

    python benchmarks/convlab_multiwoz_like.py                    # data.zip, as ConvLab publishes it
    python benchmarks/convlab_multiwoz_like.py --layout folder    # an extracted data/ folder

The dialogues are ``convhub.builders.convlab.scaled``'s (copies of the real MultiWOZ 2.1 ``dummy_data.json``).
Nothing is written into the project: the files go to a temporary folder (or ``--workdir``). Prints seconds and peak RSS (largest single process, workers included) per case.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scaled_inputs

from convhub.builders.convlab.scaled import SPLITS, TURNS, write_dataset


def main(argv: list[str] | None = None) -> int:
    import harness  # each case in a fresh process, with its process tree's peak memory

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layout", choices=("zip", "folder"), default="zip")
    parser.add_argument("--workdir", type=Path, help="keep the generated files here (default: a temp folder)")
    parser.add_argument("--num-proc", type=int, default=2)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="convlab-multiwoz-like-") as temp:
        folder = args.workdir or Path(temp)
        dialogues = write_dataset(
            folder, "multiwoz_like", args.layout, real=scaled_inputs.existing_real_file("convlab")
        )
        size = os.path.getsize(dialogues) / 2**20
        if args.layout == "zip":
            os.remove(dialogues)  # the build must read the archive, not this file
            os.remove(dialogues.parent / "ontology.json")
            os.rmdir(dialogues.parent)
            print(f"data.zip: {os.path.getsize(folder / 'multiwoz_like' / 'data.zip') / 2**20:,.1f} MiB")
        turns = sum(count for _, count in SPLITS) * TURNS
        print(f"dialogues.json: {sum(c for _, c in SPLITS):,} dialogues, {turns:,} turns, {size:,.1f} MiB")
        every = json.dumps(["sessions", "turns", "messages", "dialogues", "ontology"])
        data_dir = str(folder)
        cases = [
            ("build sessions", harness.BUILD, ["convlab", data_dir, '["sessions"]', "1"]),
            (
                f"build sessions, num_proc={args.num_proc}",
                harness.BUILD,
                ["convlab", data_dir, '["sessions"]', str(args.num_proc)],
            ),
            (
                f"build all configs, num_proc={args.num_proc}",
                harness.BUILD,
                ["convlab", data_dir, every, str(args.num_proc)],
            ),
        ]
        if args.layout == "folder":
            cases.insert(0, ("json.load (parse floor)", harness.PARSE_FLOOR, [str(dialogues)]))
        harness.print_cases(cases, size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
