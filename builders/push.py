"""Publish a built folder to the Hub in one commit, then load every config back and compare row counts.

The plan compares each local file with the remote listing (sha256 for LFS files, git blob sha otherwise):
only new or changed files are uploaded, and files an earlier build produced that this build no longer does
(a ``README.md`` aside, the shards ``<config>/<split>-NNNNN-of-NNNNN.parquet``) are deleted in the same
commit; anything else in the repo (``.gitattributes``, files added by hand) is left alone. The commit names
the head the plan was made against (``parent_commit``), so a concurrent commit makes it fail instead of
silently mixing two builds. Nothing changed → no commit.

The token comes from ``--token`` or wherever ``huggingface_hub`` finds one (``HF_TOKEN``, the stored login);
it is handed to the client and never printed, logged or written.
"""

from __future__ import annotations

import hashlib
import logging
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from huggingface_hub import CommitOperationAdd, CommitOperationDelete, DatasetCard, HfApi, get_token
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

from builders import registry

logger = logging.getLogger("convhub.push")

CARD = "README.md"
SHARD = re.compile(r"^[^/]+/(?:[^/]+/)?[^/]+-\d{5}-of-\d{5}\.parquet$")  # <config>/[<subset>/]<split>-…
NON_COMMERCIAL = re.compile(r"(^|-)nc(-|$)", re.IGNORECASE)


class PushError(Exception):
    """The push could not be made or did not verify (the message says what to do)."""


@dataclass
class RemoteFile:
    size: int
    blob_id: str  # git oid (of the LFS pointer for an LFS file)
    sha256: str | None  # LFS files only


@dataclass
class RemoteState:
    exists: bool
    head: str | None  # commit the plan compares against (of `revision`, or of the branch it will start from)
    revision_exists: bool
    files: dict[str, RemoteFile] = field(default_factory=dict)


@dataclass
class PushPlan:
    uploads: list[str]
    deletions: list[str]
    unchanged: list[str]
    remote: RemoteState
    upload_bytes: int = 0

    @property
    def changes(self) -> bool:
        return bool(self.uploads or self.deletions)


@dataclass
class PushResult:
    repo_id: str
    revision: str
    plan: PushPlan
    dry_run: bool
    commit: str | None = None  # the new commit, or the unchanged head when nothing changed
    created_commit: bool = False
    created_repo: bool = False
    commit_url: str | None = None
    pr_url: str | None = None
    verified: dict[str, dict[str, int]] = field(default_factory=dict)  # config → split → rows loaded back
    warnings: list[str] = field(default_factory=list)


# -- the local side ------------------------------------------------------------------------------------------
def local_files(folder: Path) -> dict[str, Path]:
    """Every file the build wrote (path in the repo → local path); hidden files and folders are skipped."""
    files = {}
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder).as_posix()
        if path.is_file() and not any(part.startswith(".") for part in relative.split("/")):
            files[relative] = path
    if CARD not in files:
        raise PushError(f"{folder} has no {CARD}: is it a folder written by `convhub build`?")
    return files


def expected_rows(card: DatasetCard) -> dict[str, dict[str, int]]:
    """Rows per split of every config the card offers, as the build wrote them into its ``dataset_info``."""
    infos = card.data.get("dataset_info") or []
    infos = [infos] if isinstance(infos, dict) else infos
    rows = {
        info.get("config_name", "default"): {
            split["name"]: split["num_examples"] for split in info.get("splits", [])
        }
        for info in infos
    }
    expected = {}
    for config in card.data.get("configs") or []:
        name = config["config_name"]
        if name not in rows:
            raise PushError(f"the card offers config {name} but gives no row counts for it (dataset_info)")
        expected[name] = rows[name]
    return expected


def license_warnings(card: DatasetCard) -> list[str]:
    """Warn on a card with no license or a non-commercial one (a later issue refuses the former)."""
    license_id = card.data.get("license")
    if not license_id:
        return ["the card names no license: say under which terms the data may be used before publishing"]
    ids = license_id if isinstance(license_id, list) else [license_id]
    return [
        f"license {name} is non-commercial: the dataset may not be used for commercial purposes"
        for name in ids
        if NON_COMMERCIAL.search(str(name))
    ]


def file_digests(path: Path) -> tuple[str, str]:
    """(sha256, git blob sha1) of a file, read once in blocks."""
    sha256, blob = hashlib.sha256(), hashlib.sha1(b"blob %d\0" % path.stat().st_size)
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            sha256.update(block)
            blob.update(block)
    return sha256.hexdigest(), blob.hexdigest()


def is_unchanged(local: Path, remote: RemoteFile | None) -> bool:
    if remote is None or remote.size != local.stat().st_size:
        return False
    sha256, blob_id = file_digests(local)
    return sha256 == remote.sha256 if remote.sha256 else blob_id == remote.blob_id


# -- the remote side -----------------------------------------------------------------------------------------
def remote_state(api: HfApi, repo_id: str, revision: str) -> RemoteState:
    """The head of ``revision`` (or of ``main`` when that branch is yet to be made) and its files."""
    try:
        info = api.repo_info(repo_id, repo_type="dataset", revision=revision)
        revision_exists = True
    except RepositoryNotFoundError:
        return RemoteState(exists=False, head=None, revision_exists=False)
    except RevisionNotFoundError:
        info = api.repo_info(repo_id, repo_type="dataset")
        revision_exists = False
    files = {}
    for entry in api.list_repo_tree(repo_id, repo_type="dataset", revision=info.sha, recursive=True):
        if hasattr(entry, "blob_id"):  # a RepoFile (folders have a tree_id)
            sha256 = entry.lfs.sha256 if entry.lfs else None
            files[entry.path] = RemoteFile(entry.size, entry.blob_id, sha256)
    return RemoteState(exists=True, head=info.sha, revision_exists=revision_exists, files=files)


def is_managed(path: str) -> bool:
    """A remote file convhub writes (and so may delete): the card and the shards of a config."""
    return path == CARD or bool(SHARD.match(path))


def plan_push(local: dict[str, Path], remote: RemoteState) -> PushPlan:
    uploads, unchanged = [], []
    for path, local_path in local.items():
        (unchanged if is_unchanged(local_path, remote.files.get(path)) else uploads).append(path)
    deletions = sorted(path for path in remote.files if is_managed(path) and path not in local)
    upload_bytes = sum(local[path].stat().st_size for path in uploads)
    return PushPlan(uploads, deletions, unchanged, remote, upload_bytes)


# -- the push ------------------------------------------------------------------------------------------------
def push_folder(
    folder,
    repo_id: str,
    *,
    token: str | None = None,
    endpoint: str | None = None,
    private: bool = False,
    revision: str | None = None,
    create_pr: bool = False,
    dry_run: bool = False,
    verify: bool = True,
) -> PushResult:
    """Push ``folder`` (a ``convhub build`` output) to the dataset repo ``repo_id`` in one commit.

    ``endpoint`` defaults to ``HF_ENDPOINT``; the verification loads the configs with ``datasets``, which only
    knows ``HF_ENDPOINT``, so another endpoint is refused unless ``verify=False``.
    """
    folder = Path(folder)
    revision = revision or "main"
    files = local_files(folder)
    card = DatasetCard.load(files[CARD])
    api = HfApi(endpoint=endpoint, token=token or get_token() or False)
    _check_endpoint(api.endpoint, verify)
    result = PushResult(repo_id, revision, plan_push(files, remote_state(api, repo_id, revision)), dry_run)
    result.warnings = license_warnings(card)
    for warning in result.warnings:
        logger.warning("%s: %s", repo_id, warning)
    if dry_run:
        return result
    if api.token is False:
        raise PushError("no Hugging Face token: pass --token, set HF_TOKEN, or run `hf auth login`")
    if _prepare_repo(api, result, private):  # plan again against the new repo's or branch's head
        result.plan = plan_push(files, remote_state(api, repo_id, revision))
    _commit(api, result, files, create_pr)
    if verify:
        result.verified = verify_push(repo_id, result.commit, expected_rows(card), api.token)
    return result


def _check_endpoint(endpoint: str, verify: bool) -> None:
    import datasets.config

    if verify and endpoint.rstrip("/") != datasets.config.HF_ENDPOINT.rstrip("/"):
        raise PushError(
            f"the push goes to {endpoint} but datasets loads from {datasets.config.HF_ENDPOINT}: "
            "set HF_ENDPOINT instead (before the libraries are imported) so the check reads what was pushed"
        )


def _prepare_repo(api: HfApi, result: PushResult, private: bool) -> bool:
    """Create the repo and the branch ``revision`` when absent; True when something was created."""
    remote = result.plan.remote
    if not remote.exists:
        # private=None (not False) so an organization whose repos default to private keeps its default
        api.create_repo(result.repo_id, repo_type="dataset", private=private or None, exist_ok=True)
        result.created_repo = True
    elif private:
        logger.info("%s exists: --private only applies to a new repo", result.repo_id)
    if not remote.revision_exists and not result.revision.startswith("refs/"):
        api.create_branch(result.repo_id, branch=result.revision, repo_type="dataset", exist_ok=True)
    return not (remote.exists and remote.revision_exists)


def _commit(api: HfApi, result: PushResult, files: dict[str, Path], create_pr: bool) -> None:
    plan = result.plan
    if not plan.changes:
        result.commit = plan.remote.head
        return
    operations = [CommitOperationAdd(path, str(files[path])) for path in plan.uploads]
    operations += [CommitOperationDelete(path) for path in plan.deletions]
    info = api.create_commit(
        result.repo_id,
        operations,
        commit_message=f"convhub push: {len(plan.uploads)} files uploaded, {len(plan.deletions)} deleted",
        commit_description=_commit_description(plan),
        repo_type="dataset",
        revision=result.revision,
        create_pr=create_pr,
        parent_commit=plan.remote.head,
    )
    result.commit, result.commit_url, result.pr_url = info.oid, info.commit_url, info.pr_url
    result.created_commit = True


def _commit_description(plan: PushPlan) -> str:
    lines = [f"upload {path}" for path in plan.uploads] + [f"delete {path}" for path in plan.deletions]
    return "\n".join(lines)


def verify_push(
    repo_id: str, commit: str, expected: dict[str, dict[str, int]], token
) -> dict[str, dict[str, int]]:
    """Load every config of the card from the Hub at ``commit`` and compare its row counts with the build."""
    loaded = {}
    with tempfile.TemporaryDirectory(prefix="convhub-verify-") as cache_dir:
        for config, splits in expected.items():
            loaded[config] = _load_back(repo_id, config, commit, token, cache_dir)
            if loaded[config] != splits:
                raise PushError(
                    f"{repo_id}@{commit} config {config}: loaded {loaded[config]}, built {splits}"
                )
    return loaded


def _load_back(repo_id: str, config: str, commit: str, token, cache_dir: str) -> dict[str, int]:
    import datasets

    try:
        dataset = datasets.load_dataset(repo_id, config, revision=commit, token=token, cache_dir=cache_dir)
    except Exception as error:  # whatever stops a user loading what was pushed fails the push
        raise PushError(f"{repo_id}@{commit} config {config} does not load back: {error}") from error
    return {split: dataset[split].num_rows for split in dataset}


# -- the command ---------------------------------------------------------------------------------------------
def add_arguments(parser) -> None:
    parser.add_argument(
        "source", choices=registry.names(), help="the registered source the folder was built from"
    )
    parser.add_argument("--repo-id", required=True, help="the dataset repo, ORG/NAME")
    parser.add_argument("--folder", type=Path, help="the built folder (default: out/<hub name of SOURCE>)")
    parser.add_argument("--token", help="a Hugging Face token (default: HF_TOKEN or the stored login)")
    parser.add_argument("--private", action="store_true", help="create the repo private (when it is new)")
    parser.add_argument("--revision", help="push to this branch (created from main when absent)")
    parser.add_argument("--create-pr", action="store_true", help="open a pull request instead of committing")
    parser.add_argument(
        "--dry-run", action="store_true", help="print what would be uploaded and deleted; change nothing"
    )


def run(args) -> int:
    folder = args.folder or Path("out") / registry.get(args.source).HUB_NAME
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
        print(f"convhub push: error: {str(error).strip()}", file=sys.stderr)
        return 1
    print_result(result)
    return 0


def _check_source(folder: Path, source: str) -> None:
    card_path = folder / CARD
    if not card_path.is_file():
        raise FileNotFoundError(
            f"{card_path} does not exist: run `convhub build {source} --output {folder}` first"
        )
    tags = DatasetCard.load(card_path).data.get("tags") or []
    if source not in tags:
        raise SystemExit(f"convhub push: {folder} was not built from {source} (its card is tagged {tags})")


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
        counts = ", ".join(f"{split} {rows:,} rows" for split, rows in splits.items())
        print(f"  verified {config:<14} {counts}")
