"""The ``convhub`` command: build, check, push, export, mix and score conversation datasets.

Every subcommand is a thin layer over functions in ``builders`` so that scripts and tests call the same
code the command runs. A failure is one line, ``convhub COMMAND: error: ...``, with exit status 2 for a usage
error, 1 for a data error and 130 for Ctrl-C (``cli_errors``); options are checked before any work
(``cli_checks``).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
import tempfile
from pathlib import Path

from convhub import console, registry
from convhub.cli import checks as cli_checks
from convhub.cli import errors as cli_errors
from convhub.cli.help_text import DESCRIPTION, EPILOG, EXAMPLES
from convhub.cli.parsing import Parser
from convhub.errors import EngineError, UsageError, kind_in_chain
from convhub.publish import hub_errors
from convhub.stats import markdown_table
from convhub.storage.folders import folder_at, local_output, text_of


def rows(count: int) -> str:
    """ "1 row", "2,000 rows"."""
    return f"{count:,} row{'' if count == 1 else 's'}"


def _add_source_options(parser: argparse.ArgumentParser, bad_records_go: str) -> None:
    parser.add_argument(
        "--data-dir",
        help="read the source from this folder or file, not the download: a local path, or a URL (hdfs://, s3a://, "
        "any fsspec URL); without it the source's published files are downloaded (CONVHUB_SOURCE_MIRROR serves "
        "them from a copy: docs/sources.md)",
    )
    parser.add_argument("--subset", action="append", dest="subsets", help="only this subset (repeatable)")
    parser.add_argument(
        "--format",
        dest="source_format",
        choices=cli_checks.formats(),
        help="the file format, where a source has several (MNBVC; default: found from each file)",
    )
    parser.add_argument(
        "--on-bad-record",
        choices=("raise", "skip"),
        default="raise",
        help="a bad source record stops with an error naming it (raise, the default), or is left out and "
        f"listed with its reason in {bad_records_go} (skip)",
    )


def _add_overwrite_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace OUTPUT even if convhub did not write it (never '.', '/', the home folder or an input); "
        "without it, only a new or empty folder or an earlier convhub output is replaced",
    )


def _positive_int(text: str) -> int:
    """``--num-proc``: 0 or fewer processes would fail deep inside ``datasets``; say so at parse time."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {value}")
    return value


def _command(commands, name: str, help: str) -> argparse.ArgumentParser:
    return commands.add_parser(
        name,
        help=help,
        description=help[0].upper() + help[1:] + ".",
        epilog=EXAMPLES[name],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("convhub")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="convhub",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"convhub {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")

    build = _command(commands, "build", "build a source into a Hub-ready folder (Parquet + card)")
    build.add_argument(
        "source", nargs="?", choices=registry.names(), help="the source to build (or --all for every one)"
    )
    build.add_argument("--all", action="store_true", help="build every registered source into OUTPUT/<name>")
    build.add_argument("--sample", action="store_true", help="use the sample files that ship with convhub")
    build.add_argument(
        "--output",
        required=True,
        type=folder_at,
        help="the folder to write (with --all: one folder per source in it); a URL too (hdfs://, s3a://, any "
        "fsspec URL), which --engine spark's tasks write to directly",
    )
    _add_overwrite_option(build)
    build.add_argument(
        "--repo-id",
        help="the Hub repo the card's code loads (default ORG/<the source's name>, e.g. ORG/locomo-unified; "
        "push writes the card for the repo it pushes to)",
    )
    build.add_argument("--config", action="append", dest="configs", help=cli_checks.config_help())
    build.add_argument(
        "--num-proc",
        type=_positive_int,
        default=None,
        help=f"build shards in N processes (default: one per core, here {os.cpu_count()}; 1 with --sample; never "
        "more than a split has shards, e.g. 1 for a one-file source); the rows do not depend on N, the split of "
        "a config into Parquet files does",
    )
    build.add_argument(
        "--engine",
        choices=["local", "spark"],
        default="local",
        help="what runs the build: local (datasets, --num-proc processes) or spark (Apache Spark; pip install "
        '"convhub[spark]"); the rows are the same',
    )
    build.add_argument(
        "--spark-master",
        type=cli_checks.spark_master,
        help=f"with --engine spark: the Spark master URL, {cli_checks.MASTER_FORMS} (default: Spark's own "
        f"configuration, else local[*]); local[N] takes 1 to {cli_checks.max_local_threads()} here",
    )
    build.add_argument(
        "--verbose",
        action="store_true",
        help="with --engine spark: show Spark's own log (its driver's and executors' output), which is "
        "silenced by default so that an error is convhub's one line",
    )
    build.add_argument(
        "--errata",
        help="locomo: an audit of its labels to carry in the build, dial481/locomo-audit's errors.json or its "
        "folder of errors_conv_<i>.json files (see docs/sources.md, LoCoMo)",
    )
    _add_source_options(build, "OUTPUT.quarantine.jsonl beside the output folder")

    check = _command(commands, "check", "validate a source and print its statistics and normalizations")
    check.add_argument("source", choices=registry.names(), help="the source to check")
    check.add_argument("--sample", action="store_true", help="check the sample files that ship with convhub")
    _add_source_options(check, "--quarantine")
    check.add_argument(
        "--quarantine",
        type=Path,
        help="with --on-bad-record skip: write the rejected records here "
        "(default: SOURCE.quarantine.jsonl in the current folder)",
    )

    mix = _command(commands, "mix", "mix built sources by a recipe into one Hub-ready training folder")
    mix.add_argument("recipe", type=Path, help="the recipe YAML (see examples/recipe.yaml)")
    mix.add_argument(
        "--output", required=True, type=local_output, help="the folder to write the mixture into"
    )
    _add_overwrite_option(mix)
    mix.add_argument(
        "--streaming", action="store_true", help="stream the sources instead of downloading them"
    )
    mix.add_argument("--max-shard-size", default="500MB", help="largest Parquet shard (default 500MB)")
    mix.add_argument(
        "--repo-id", help="the Hub repo the card's loading code names (default ORG/<recipe name>)"
    )
    mix.add_argument(
        "--push", action="store_true", help="then publish the folder to --repo-id (as convhub push)"
    )
    mix.add_argument(
        "--token", help="a Hugging Face token for --push (default: HF_TOKEN or the stored login)"
    )

    from convhub.publish import push  # registers its own options

    push.add_arguments(_command(commands, "push", "publish a built folder to the Hub in one commit"))
    from convhub.export import exporter as export  # registers its own options

    export.add_arguments(
        _command(commands, "export", "rebuild a source's own files from a build folder or Hub repo")
    )
    from convhub.score import command as score  # registers its own options

    score.add_arguments(
        _command(commands, "score", "score a system's answers with a memory benchmark's own evaluation")
    )
    return parser


def run_build(args) -> int:
    if args.all == bool(args.source):
        raise UsageError("give a SOURCE or --all (not both)")
    if args.all and args.repo_id:
        raise UsageError("--repo-id names one repo: give it with one SOURCE, not --all")
    if args.spark_master and args.engine != "spark":
        raise UsageError("--spark-master needs --engine spark")
    if args.errata and (args.all or not registry.get(args.source).TAKES_ERRATA):
        raise UsageError(
            f"--errata applies to {', '.join(n for n in registry.names() if registry.get(n).TAKES_ERRATA)} only"
        )
    if args.errata and "://" not in args.errata and not os.path.exists(args.errata):
        raise UsageError(f"--errata {args.errata} does not exist")
    cluster = cli_checks.cluster_master_error(args.spark_master)
    if cluster:  # as a spark:// master that does not answer: the machine's state, exit status 1
        raise EngineError(cluster)
    sources = registry.names() if args.all else [args.source]
    problem = cli_checks.config_error(sources, args.configs) or cli_checks.output_name_error(args.output)
    if problem:
        raise UsageError(problem)
    args.written = []
    with contextlib.ExitStack() as stack:
        from convhub.engine.runners.engine import engine_named

        # one engine for every source (one Spark session, quiet unless --verbose)
        engine = engine_named(args.engine, args.spark_master, _num_proc(args), verbose=args.verbose)
        stack.callback(engine.stop)
        for source in sources:
            built = _build_one(args, source, engine)
            args.written.append(text_of(built))  # stays if a later source fails: its error line names it
    return 0


def _num_proc(args) -> int | None:
    """The local engine's processes: ``--num-proc``, else one for the sample files, else one per CPU."""
    return args.num_proc or (1 if args.sample else os.cpu_count())


def _build_one(args, source: str, engine):
    """Build one source as the arguments say, print what was made; the folder it wrote."""
    from convhub.build import build_source

    builder_cls = registry.get(source)
    data_dir = builder_cls.sample_dir() if args.sample else args.data_dir
    output = args.output / builder_cls.HUB_NAME if args.all else args.output
    # the sample files hold odd records on purpose: one line for them, `check --sample` has the details
    quirks = console.quirks_counted(source) if args.sample else contextlib.nullcontext()
    with quirks as counted:
        result = build_source(
            source,
            output,
            data_dir,
            args.configs,
            _num_proc(args),
            args.subsets,
            source_format=args.source_format,
            on_bad_record=args.on_bad_record,
            overwrite=args.overwrite,
            repo_id=args.repo_id,
            engine=engine,
            spark_master=args.spark_master,
            errata=args.errata,
        )
    print_build(result)
    ran = getattr(result, "processes", None)
    if args.num_proc and ran and ran < args.num_proc:  # asked for more processes than there is work for
        shards = f"{ran} shard{'' if ran == 1 else 's'}"
        print(
            f"note: {source}: built in {ran} process{'' if ran == 1 else 'es'}, not the {args.num_proc} asked for "
            f"(--num-proc): no split of this input has more than {shards}, and a shard is one process's work",
            file=sys.stderr,
        )
    if counted is not None and counted.count.value:
        print(console.quirk_summary(source, counted.count.value), file=sys.stderr)
    return result.output


def print_build(result) -> None:
    print(f"{result.source}: {text_of(result.output)}")
    for name, built in result.configs.items():
        splits = ", ".join(f"{split} {rows(info.num_examples)}" for split, info in built.splits.items())
        files = sum(len(paths) for paths in built.files.values())
        print(f"  {name:<14} {splits}  ({files} Parquet file{'s' if files != 1 else ''})")
    if getattr(result, "skipped", 0):
        from convhub.engine.checks.quarantine import unread_text

        unread = unread_text(getattr(result, "unread_files", ()))
        print(
            f"warning: {result.skipped:,} bad record(s) skipped{unread}, each with its reason in {result.quarantine}",
            file=sys.stderr,
        )
    elif getattr(result, "quarantine", None):  # a break in a file that held no record (a missing comma)
        print(
            f"warning: no record lost, but a file was read around a break: see {result.quarantine}",
            file=sys.stderr,
        )


def run_check(args) -> int:
    from convhub.build import check_source
    from convhub.engine.checks import quarantine

    data_dir = registry.get(args.source).sample_dir() if args.sample else args.data_dir
    target = args.quarantine or Path(f"{args.source}{quarantine.SUFFIX}")
    if args.on_bad_record == "skip":
        quarantine.check_replaceable(target)
    with tempfile.TemporaryDirectory(prefix="convhub-check-") as folder:
        notes, statistics = check_source(
            args.source,
            data_dir,
            args.subsets,
            args.source_format,
            on_bad_record=args.on_bad_record,
            quarantine_dir=folder,
        )
        rejected = quarantine.collect(folder)
    notes.update(quarantine.counts(rejected))
    if rejected:
        quarantine.save(rejected, target)
    lost = quarantine.records_lost(rejected)
    unread = quarantine.unread_text(quarantine.unread_files(rejected))
    skipped = f" after skipping {lost:,} bad record(s){unread}, each with its reason in {target}"
    if not lost:
        skipped = f" with no record lost, after reading around a break in a file: see {target}"
    print(f"{args.source}: OK" + (skipped if rejected else ""))
    print(markdown_table(statistics.table()))
    print("\nnormalizations:")
    for kind, count in notes.as_sorted_list() or [("none", 0)]:
        print(f"  {count:>8,}  {kind}")
    return 0


def run_mix(args) -> int:
    if args.push and not args.repo_id:
        raise UsageError("--push needs --repo-id ORG/NAME")
    if not args.recipe.is_file():
        raise UsageError(
            f"recipe {args.recipe} does not exist"
            if not args.recipe.exists()
            else f"recipe {args.recipe} is not a file"
        )
    from convhub import mix

    try:
        result = mix.write_mixture(
            mix.load_recipe(args.recipe),
            args.output,
            args.streaming,
            args.max_shard_size,
            args.repo_id,
            overwrite=args.overwrite,
        )
    except mix.RecipeError as error:
        return hub_errors.report("mix", f"{args.recipe}: {error}", args.token)
    print(f"{result.recipe.name}: {result.output} ({rows(result.rows)}, {result.tokens:,} tokens)")
    if result.eval_rows:
        print(f"  held out as {result.recipe.eval_split}: {rows(result.eval_rows)}")
    for report in result.reports:
        print(
            f"  {report.entry.name:<20} {report.rows:>10,} rows {report.tokens:>12,} tokens  "
            f"{mix.passes(report)} passes  {report.license}"
        )
    for warning in result.warnings():
        print(f"warning: {warning}", file=sys.stderr)
    return _push_mixture(result.output, args) if args.push else 0


def _push_mixture(folder: Path, args) -> int:
    from huggingface_hub.errors import HfHubHTTPError

    from convhub.publish import push

    try:
        push.print_result(push.push_folder(folder, args.repo_id, token=args.token))
    except (push.PushError, HfHubHTTPError) as error:
        return hub_errors.report("mix", f"push: {error}", args.token)
    return 0


def console_main(args: argparse.Namespace) -> None:
    """Run the command ``parse`` read (``cli.entry`` parses it while it holds Ctrl-C) and exit with its status,
    without the interpreter's last garbage collections.

    At exit Python looks for reference cycles among every object still alive, and a build keeps ``datasets``,
    pandas and pyarrow alive: 0.4-1.4 s between the last line printed and the prompt, each time. Frozen
    (``gc.freeze``), they are left to the process's end. Nothing convhub writes waits on that collection:
    files are closed and temporary folders removed before ``main`` returns, and ``atexit`` handlers and
    ``weakref.finalize`` calls still run."""
    status = run(args)
    cli_errors.forget_handled_interrupts()  # a Ctrl-C met inside a string's exec: exit 130, not by SIGINT
    gc.freeze()
    sys.exit(status)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line read: logging set up, the parser built (each command's module imported) and run."""
    console.setup_logging()
    return build_parser().parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run one command; a failure a user can act on is one line on stderr and its exit status
    (``cli_errors``: 2 usage, 1 data, 130 Ctrl-C), a bug keeps its traceback."""
    try:
        args = parse(argv)
    except BaseException as error:  # Ctrl-C as the command starts, itself or wrapped by the import it broke
        if kind_in_chain(error, KeyboardInterrupt) is None:
            raise  # argparse's own exit (usage, --help), or a bug
        return cli_errors.interrupted(cli_errors.command_in(sys.argv[1:] if argv is None else argv))
    return run(args)


def run(args: argparse.Namespace) -> int:
    """Run the parsed command: one line and an exit status for a failure a user can act on, or for Ctrl-C."""
    try:
        with cli_errors.interrupt_in_main_process_only():
            return _run(args)
    except Exception as error:
        written = getattr(args, "written", ())
        status = cli_errors.exit_status(args.command, error, getattr(args, "token", None), written)
        if status is None:
            raise
        return status
    except KeyboardInterrupt:  # Ctrl-C outside a library's own handling of it
        return cli_errors.interrupted(args.command, getattr(args, "written", ()))


def _run(args) -> int:
    if args.command in ("build", "check"):
        problem = cli_checks.source_options_error(args)
        if problem:
            raise UsageError(problem)
    from convhub.engine.inputs import downloads

    downloads.use_timeouts()  # a source's host that accepts a connection and never answers: its own limit
    if cli_checks.talks_to_the_hub(args):
        from convhub.publish.hub_client import use_timeouts

        use_timeouts()  # a Hub that accepts a connection and never answers would hang the command
    if args.command == "build":
        return run_build(args)
    if args.command == "check":
        return run_check(args)
    if args.command == "mix":
        return run_mix(args)
    if args.command == "export":
        from convhub.export import exporter as export

        return export.run(args)
    if args.command == "score":
        from convhub.score import command as score

        return score.run(args)
    from convhub.publish import push

    return push.run(args)


if __name__ == "__main__":
    sys.exit(main())
