"""``convhub score BENCHMARK --data FOLDER_OR_REPO --predictions FILE --output REPORT.json``.

Reads the build's ``qa`` config and the predictions (JSON Lines: ``question_id``, ``prediction``, optional
``retrieved``), scores them as the benchmark's own evaluation code does (``convhub.score.locomo``,
``longmemeval``, ``gigamemory``, ``beam``) and writes the report (``convhub.score.report``). A user's mistake is one
line, ``convhub score: error: ...``: exit 2 for options that cannot go together, 1 for the data.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from convhub.publish.hub_errors import redact
from convhub.score import beam, gigamemory, locomo, longmemeval
from convhub.score.inputs import (
    ScoreError,
    config_rows,
    data_hash,
    open_data,
    pair,
    read_predictions,
    read_questions,
    source_files,
)
from convhub.score.judge import mem0 as mem0_judge
from convhub.score.judge import options as judge_options
from convhub.score.judge.client import PROMPT_VERSION, Judge, JudgeError
from convhub.score.longmemeval_retrieval import PROTOCOLS, read_conversations
from convhub.score.output import (
    WRITTEN_BY,
    OutputRefused,
    check_judge_cache,
    check_report_target,
    report_path,
    write_report,
)
from convhub.score.report import MISSING_RULE, Report, summary_lines

BENCHMARKS = ("locomo", "longmemeval", "gigamemory", "beam")
#: Benchmarks whose answers only a judge can score.
NEEDS_JUDGE = frozenset({"gigamemory", "beam"})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("benchmark", choices=BENCHMARKS, help="the benchmark whose evaluation to run")
    parser.add_argument(
        "--data", required=True, help="a folder convhub build wrote, or a Hub dataset repo id (org/name)"
    )
    parser.add_argument(
        "--predictions",
        required=True,
        type=Path,
        help="JSON Lines, one per question: question_id, prediction, optionally retrieved (ids, best first)",
    )
    parser.add_argument(
        "--output",
        required=True,
        help="the report to write (JSON): a new file, or a report convhub score wrote (nothing else is replaced)",
    )
    parser.add_argument(
        "--subset",
        help="score the questions of one subset of the build (a LongMemEval build of several files, whose "
        "question ids repeat across them)",
    )
    parser.add_argument(
        "--retrieval-protocol",
        choices=PROTOCOLS,
        default=None,
        help="LongMemEval retrieval: as its run_retrieval.py (longmemeval, the default: user turns only, gold "
        "where a user turn has has_answer) or on the build's evidence ids, assistant turns too (convhub)",
    )
    parser.add_argument(
        "--evidence",
        choices=("raw", "normalized"),
        default=None,
        help="LoCoMo evidence recall on its raw evidence strings, exactly as its code (raw, the default), or on "
        "convhub's normalized turn ids (normalized: 'D8:6; D9:17' counts as the two turns it names)",
    )
    parser.add_argument(
        "--labels",
        choices=locomo.LABELS,
        default=None,
        help="LoCoMo: score against its original labels (the default) or the audited ones, which a build made "
        "with --errata carries (the corrected answers and evidence); such a build's report gives both",
    )
    judge_options.add_arguments(parser)
    parser.add_argument("--revision", help="a branch, tag or commit of the Hub repo")
    parser.add_argument("--token", help="a Hugging Face token (default: HF_TOKEN or the stored login)")


def usage_error(args: argparse.Namespace) -> str | None:
    """Options that cannot go together (exit 2), found before any file is read."""
    if args.evidence and args.benchmark != "locomo":
        return "--evidence applies to locomo only"
    if args.retrieval_protocol and args.benchmark != "longmemeval":
        return "--retrieval-protocol applies to longmemeval only"
    if args.labels and args.benchmark != "locomo":
        return "--labels applies to locomo only"
    return judge_options.usage_error(args, NEEDS_JUDGE)


#: The figures only a judge gives, and the options that give them: a report without a judge names them
#: (``needs_judge``). GigaMemory's answers are scored by a judge alone, which it requires.
JUDGED_FIGURES = {
    "longmemeval": (["accuracy", "task_averaged_accuracy", "abstention"], "--judge-url and --judge-model"),
    "locomo": (["accuracy"], "--protocol mem0-judge with --judge-url and --judge-model (mem0's J)"),
}


def needs_judge(benchmark: str) -> Report:
    """The ``needs_judge`` entry of a report made without a judge: which figures a judge would add, and how."""
    figures, give = JUDGED_FIGURES[benchmark]
    return {"needs_judge": {"figures": figures, "give": give}}


def data_version(build) -> Report:
    """The build's input files as its card lists them (``source_files``), or a note that it lists none."""
    files = source_files(build)
    if files is None:
        return {
            "source_files": None,
            "source_files_note": "the build's card lists no source_files (a build made before convhub recorded "
            "its input files): which version of the source it holds is unknown; data_hash still identifies "
            "the questions",
        }
    return {"source_files": files}


def score(args: argparse.Namespace, judge: Judge | None) -> Report:
    """The whole report for the parsed arguments (``judge`` made from them, or None)."""
    build = open_data(args.data, args.revision, args.token)
    elsewhere: dict[
        str, str | None
    ] = {}  # with --subset: the other subsets' ids, which a prediction may name
    questions = read_questions(build, args.benchmark, args.subset, elsewhere)
    predictions = read_predictions(args.predictions, (row["question_id"] for row in questions), elsewhere)
    items = pair(questions, predictions)
    report: Report = {"written_by": WRITTEN_BY[1], "benchmark": args.benchmark, "data": build.location}
    if args.subset:
        report["subset"] = args.subset
    report["data_hash"] = data_hash(questions)
    report.update(data_version(build))
    report.update(
        {
            "predictions": os.fspath(args.predictions),
            "questions": len(items),
            "predicted": sum(item.prediction is not None for item in items),
            "missing": sum(item.prediction is None for item in items),
            "missing_scored_as": MISSING_RULE,
        }
    )
    prompts: dict[str, str] = {}  # question category → the judge's prompt for it (set for each benchmark)
    if args.benchmark == "locomo":
        report.update(locomo.score(items, args.evidence or "raw", args.labels or "original"))
        if judge is None:
            return {**report, **needs_judge(args.benchmark)}
        mem0_judge.add_accuracy(report, locomo.labeled(items, args.labels or "original"), judge)
        prompts = {name: "ACCURACY_PROMPT" for name in report.get("by_category", {}) if name != "Adversarial"}
    if args.benchmark == "gigamemory":
        assert judge is not None  # usage_error made sure
        report.update(gigamemory.score(items, judge))  # a failed verdict is negative: the contest's rule
        prompts = {row["category"] or "": gigamemory.prompt_name(row["category"]) for row in questions}
    elif args.benchmark == "longmemeval":
        conversations = {}
        if any(prediction.retrieved is not None for prediction in predictions.values()):
            conversations = read_conversations(config_rows(build, "turns"))
        protocol = args.retrieval_protocol or PROTOCOLS[0]
        report.update(longmemeval.score(items, judge, conversations, os.fspath(args.predictions), protocol))
        prompts = {
            ("abstention" if longmemeval.is_abstention(row) else row["category"] or ""): (
                "abstention" if longmemeval.is_abstention(row) else row["category"] or ""
            )
            for row in questions
        }
    elif args.benchmark == "beam":
        assert judge is not None  # usage_error made sure
        report.update(beam.score(items, judge, build.location))
        prompts = {name: beam.prompt_names(name) for name in report.get("by_category", {})}
    if judge is None:
        report.update(needs_judge(args.benchmark))
    else:
        version = {"locomo": mem0_judge.PROMPT_VERSION, "beam": beam.PROMPT_VERSION}.get(
            args.benchmark, PROMPT_VERSION
        )
        report["judge"] = judge_options.judge_section(judge, args, version, prompts)
        if args.benchmark == "locomo":
            report["judge"]["protocol"] = "mem0-judge"
    return report


def run(args: argparse.Namespace) -> int:
    problem = usage_error(args)
    if problem:
        print(f"convhub score: error: {problem}", file=sys.stderr)
        return 2
    api_key = judge_options.judge_key(args)
    judge = judge_options.make_judge(args)
    try:
        output = report_path(args.output)
        check_report_target(output, args.predictions, args.data)
        check_judge_cache(judge.cache.folder if judge and judge.cache else None, output, args.data)
        report = score(args, judge)
        write_report(report, output, args.predictions, args.data)
    except OutputRefused as error:
        print(f"convhub score: error: {error}", file=sys.stderr)
        return 2
    except (ScoreError, JudgeError, OSError) as error:
        message = redact(redact(str(error), api_key), args.token)
        print(f"convhub score: error: {message}", file=sys.stderr)
        return 1
    finally:
        if judge is not None:
            judge.close()
    questions, missing = report.get("questions", 0), report.get("missing", 0)
    print(f"{args.benchmark}: {questions:,} questions, {missing:,} missing → {output}")
    for line in summary_lines(report) + locomo.label_lines(report) + beam.summary_lines(report):
        print(line)
    if "judge" in report:
        print(judge_options.summary_line(report["judge"]))
    return 0
