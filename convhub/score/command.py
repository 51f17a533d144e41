"""``convhub score BENCHMARK --data FOLDER_OR_REPO --predictions FILE --output REPORT.json``.

Reads the build's ``qa`` config and the predictions (JSON Lines: ``question_id``, ``prediction``, optional
``retrieved``), scores them as the benchmark's own evaluation code does (``convhub.score.locomo``,
``longmemeval``, ``gigamemory``) and writes the report (``convhub.score.report``). A user's mistake is one
line, ``convhub score: error: ...``: exit 2 for options that cannot go together, 1 for the data.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from convhub.publish.hub_errors import redact
from convhub.score import gigamemory, judge_options, locomo, longmemeval, mem0_judge
from convhub.score.inputs import (
    ScoreError,
    config_rows,
    data_hash,
    open_data,
    pair,
    read_predictions,
    read_questions,
)
from convhub.score.judge import PROMPT_VERSION, Judge, JudgeError
from convhub.score.report import MISSING_RULE, Report, summary_lines, write_report

BENCHMARKS = ("locomo", "longmemeval", "gigamemory")
#: Benchmarks whose answers only a judge can score.
NEEDS_JUDGE = frozenset({"gigamemory"})


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
    parser.add_argument("--output", required=True, type=Path, help="the report to write (JSON)")
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
    if args.labels and args.benchmark != "locomo":
        return "--labels applies to locomo only"
    return judge_options.usage_error(args, NEEDS_JUDGE)


def score(args: argparse.Namespace, judge: Judge | None) -> Report:
    """The whole report for the parsed arguments (``judge`` made from them, or None)."""
    build = open_data(args.data, args.revision, args.token)
    questions = read_questions(build, args.benchmark)
    predictions = read_predictions(args.predictions)
    items = pair(questions, predictions, os.fspath(args.predictions))
    report: Report = {
        "benchmark": args.benchmark,
        "data": build.location,
        "data_hash": data_hash(questions),
        "predictions": os.fspath(args.predictions),
        "questions": len(items),
        "predicted": sum(item.prediction is not None for item in items),
        "missing": sum(item.prediction is None for item in items),
        "missing_scored_as": MISSING_RULE,
    }
    if args.benchmark == "locomo":
        report.update(locomo.score(items, args.evidence or "raw", args.labels or "original"))
        if judge is None:
            return report
        mem0_judge.add_accuracy(report, locomo.labeled(items, args.labels or "original"), judge)
        prompts = {name: "ACCURACY_PROMPT" for name in report["by_category"] if name != "Adversarial"}
    if args.benchmark == "gigamemory":
        assert judge is not None  # usage_error made sure
        report.update(gigamemory.score(items, judge))  # a failed verdict is negative: the contest's rule
        prompts = {row["category"] or "": gigamemory.prompt_name(row["category"]) for row in questions}
    elif args.benchmark == "longmemeval":
        corpora = {}
        if any(prediction.retrieved is not None for prediction in predictions.values()):
            corpora = longmemeval.read_corpora(config_rows(build, "turns"))
        report.update(longmemeval.score(items, judge, corpora, os.fspath(args.predictions)))
        prompts = {
            ("abstention" if longmemeval.is_abstention(row) else row["category"] or ""): (
                "abstention" if longmemeval.is_abstention(row) else row["category"] or ""
            )
            for row in questions
        }
    if judge is not None:
        version = mem0_judge.PROMPT_VERSION if args.benchmark == "locomo" else PROMPT_VERSION
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
        report = score(args, judge)
        write_report(report, args.output)
    except (ScoreError, JudgeError, OSError) as error:
        message = redact(redact(str(error), api_key), args.token)
        print(f"convhub score: error: {message}", file=sys.stderr)
        return 1
    finally:
        if judge is not None:
            judge.close()
    print(
        f"{report['benchmark']}: {report['questions']:,} questions, {report['missing']:,} missing → {args.output}"
    )
    for line in summary_lines(report) + locomo.label_lines(report):
        print(line)
    if "judge" in report:
        print(judge_options.summary_line(report["judge"]))
    return 0
