"""``convhub push``: its options, its run, and what it prints."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from huggingface_hub.errors import HfHubHTTPError

from convhub import registry
from convhub.errors import UsageError
from convhub.publish.hub_errors import report
from convhub.publish.local_files import CARD
from convhub.publish.session import PushError
from convhub.storage.folders import folder_at, read_card

if TYPE_CHECKING:
    from convhub.publish.push import PushResult


def add_arguments(parser) -> None:
    parser.add_argument(
        "source",
        nargs="?",
        choices=registry.names(),
        help="the registered source the folder was built from; leave out for a mixture (give --folder)",
    )
    parser.add_argument("--repo-id", required=True, help="the dataset repo, ORG/NAME")
    parser.add_argument(
        "--folder",
        type=folder_at,
        help="the built folder (default: out/<hub name of SOURCE>); a URL too (hdfs://, s3a://: a build Spark wrote)",
    )
    parser.add_argument("--token", help="a Hugging Face token (default: HF_TOKEN or the stored login)")
    parser.add_argument("--private", action="store_true", help="create the repo private (when it is new)")
    parser.add_argument("--revision", help="push to this branch (created from main when absent)")
    parser.add_argument("--create-pr", action="store_true", help="open a pull request instead of committing")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print what would be uploaded and deleted; change nothing (it still asks the Hub for the repo's files, "
        "which the plan is made against: the Hub must be reachable)",
    )


def run(args) -> int:
    if args.folder is not None:
        folder = args.folder
    elif args.source is not None:
        folder = Path("out") / registry.get(args.source).HUB_NAME
    else:
        raise UsageError("give a SOURCE, or --folder for a mixture (convhub mix)")
    from convhub.publish.push import push_folder  # (push imports this module to export its names)

    _check_source(folder, args.source)
    try:
        result = push_folder(
            folder,
            args.repo_id,
            token=args.token,
            private=args.private,
            revision=args.revision,
            create_pr=args.create_pr,
            dry_run=args.dry_run,
        )
    except (PushError, HfHubHTTPError) as error:
        return report("push", error, args.token)
    print_result(result)
    return 0


def _check_source(folder: Path, source: str | None) -> None:
    """The folder holds a card, and one built from ``source`` when a source is named."""
    card_path = folder / CARD
    if not card_path.is_file():
        command = f"convhub build {source} --output {folder}" if source else "convhub build or convhub mix"
        raise FileNotFoundError(f"{card_path} does not exist: run `{command}` first")
    tags = read_card(card_path).data.get("tags") or []
    if source is not None and source not in tags:
        raise ValueError(f"{folder} was not built from {source} (its card is tagged {tags})")


def print_result(result: PushResult) -> None:
    plan, target = result.plan, f"{result.repo_id}@{result.revision}"
    upload, delete = ("would upload", "would delete") if result.dry_run else ("uploaded", "deleted")
    if result.dry_run and not plan.remote.exists:
        print(f"{result.repo_id}: does not exist; would be created")
    print(
        f"{target}: {len(plan.uploads)} to upload ({plan.upload_bytes / 1e6:.2f} MB), {len(plan.deletions)} to delete"
    )
    for path in plan.uploads:
        print(f"  {upload}  {path}")
    for path in plan.deletions:
        print(f"  {delete}  {path}")
    if result.dry_run:
        return
    if result.created_commit:
        print(f"commit {result.commit}: {result.pr_url or result.commit_url}")
    else:
        print(f"nothing changed: no commit (head {result.commit})")
    for config, splits in result.verified.items():
        counts = ", ".join(
            f"{split} {rows:,} row{'' if rows == 1 else 's'}" for split, rows in splits.items()
        )
        print(f"  verified {config:<14} {counts}")
