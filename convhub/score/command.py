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
from convhub.score import gigamemory, locomo, longmemeval
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
from convhub.score.report import MISSING_RULE, JudgeInfo, Report, summary_lines, write_report

BENCHMARKS = ("locomo", "longmemeval", "gigamemory")
#: Benchmarks whose answers only a judge can score.
NEEDS_JUDGE = frozenset({"gigamemory"})


def _positive(kind: type):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid {kind.__name__} value: {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be more than 0, not {text}")
        return value

    return parse


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
    parser.add_argument(
        "--judge-url", help="an OpenAI-compatible base URL for the judge, e.g. http://HOST/v1"
    )
    parser.add_argument("--judge-model", help="the judge model (LongMemEval's paper: gpt-4o-2024-08-06)")
    parser.add_argument(
        "--judge-key-env",
        default="OPENAI_API_KEY",
        help="the environment variable holding the judge's API key (default OPENAI_API_KEY; unset: no key)",
    )
    parser.add_argument(
        "--judge-timeout", type=_positive(float), default=60.0, help="seconds per judge request (default 60)"
    )
    parser.add_argument(
        "--judge-workers", type=_positive(int), default=4, help="judge requests at once (default 4)"
    )
    parser.add_argument(
        "--judge-retries",
        type=int,
        default=3,
        help="retries of a judge request after a dropped connection, 429 or 5xx (default 3)",
    )
    parser.add_argument("--revision", help="a branch, tag or commit of the Hub repo")
    parser.add_argument("--token", help="a Hugging Face token (default: HF_TOKEN or the stored login)")


def usage_error(args: argparse.Namespace) -> str | None:
    """Options that cannot go together (exit 2), found before any file is read."""
    if bool(args.judge_url) != bool(args.judge_model):
        return "--judge-url and --judge-model go together: give both"
    if args.benchmark in NEEDS_JUDGE and not args.judge_url:
        return f"{args.benchmark} answers are scored by an LLM judge: give --judge-url and --judge-model"
    if args.evidence and args.benchmark != "locomo":
        return "--evidence applies to locomo only"
    if args.labels and args.benchmark != "locomo":
        return "--labels applies to locomo only"
    if args.judge_url and args.benchmark == "locomo":
        return "locomo is scored by its token F1, not a judge: leave out --judge-url"
    if args.judge_retries < 0:
        return "--judge-retries must be 0 or more"
    return None


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
        return report
    if args.benchmark == "gigamemory":
        assert judge is not None  # usage_error made sure
        report.update(gigamemory.score(items, judge))
        prompts = {row["category"] or "": gigamemory.prompt_name(row["category"]) for row in questions}
    else:
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
        info: JudgeInfo = {
            "model": judge.model,
            "url": judge.url,
            "prompt_version": PROMPT_VERSION,
            "prompts": dict(sorted(prompts.items())),
            "calls": judge.calls,
        }
        report["judge"] = info
    return report


def run(args: argparse.Namespace) -> int:
    problem = usage_error(args)
    if problem:
        print(f"convhub score: error: {problem}", file=sys.stderr)
        return 2
    api_key = os.environ.get(args.judge_key_env) or None
    judge = None
    if args.judge_url:
        judge = Judge(
            args.judge_url,
            args.judge_model,
            api_key,
            timeout=args.judge_timeout,
            retries=args.judge_retries,
            workers=args.judge_workers,
        )
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
    return 0
