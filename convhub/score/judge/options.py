"""``convhub score``'s judge options: their parsing, the checks that come before any file is read, the
:class:`Judge` they make and the ``judge`` section of the report (what was asked, what it cost).

The API key comes from the environment (``--judge-key-env``, default ``OPENAI_API_KEY``) and never from the
command line, so that it reaches no shell history, log or report.
"""

from __future__ import annotations

import argparse
import math
import os
from typing import Any

from convhub.score.judge.cache import JudgeCache, default_folder
from convhub.score.judge.client import Judge
from convhub.score.judge.transport import MAX_TIMEOUT, url_problem
from convhub.score.report import JudgeInfo

PROTOCOLS = ("f1", "mem0-judge")


def _number(kind: type, low: float, high: float = math.inf, low_included: bool = False):
    """An argparse type: a finite ``kind`` between ``low`` and ``high``, said in one line otherwise."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid {kind.__name__} value: {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, not {text}")
        if value < low or (value == low and not low_included):
            raise argparse.ArgumentTypeError(f"must be {'at least' if low_included else 'more than'} {low:g}")
        if value > high:
            raise argparse.ArgumentTypeError(f"must be at most {high:g}, not {text}")
        return value

    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The judge options of ``convhub score``."""
    parser.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        default=None,
        help="locomo: its token F1 only (f1, the default), or also mem0's LLM judge J (mem0-judge: give "
        "--judge-url and --judge-model)",
    )
    parser.add_argument(
        "--judge-url", help="an OpenAI-compatible base URL for the judge, e.g. http://HOST/v1"
    )
    parser.add_argument(
        "--judge-model", help="the judge model (LongMemEval's paper: gpt-4o-2024-08-06; mem0's: gpt-4o-mini)"
    )
    parser.add_argument(
        "--judge-key-env",
        default="OPENAI_API_KEY",
        help="the environment variable holding the judge's API key (default OPENAI_API_KEY; unset: no key)",
    )
    parser.add_argument(
        "--judge-timeout",
        type=_number(float, 0, MAX_TIMEOUT),
        default=60.0,
        help="seconds for a whole judge request, reply included (default 60)",
    )
    parser.add_argument(
        "--judge-workers", type=_number(int, 0, 256), default=4, help="judge requests at once (default 4)"
    )
    parser.add_argument(
        "--judge-retries",
        type=_number(int, 0, 100, low_included=True),
        default=3,
        help="retries of a judge request after a timeout, dropped connection, 429, 5xx or garbled reply "
        "(default 3)",
    )
    parser.add_argument(
        "--judge-runs",
        type=_number(int, 0, 100),
        default=1,
        help="ask each question this many times; its verdict is the majority (default 1)",
    )
    parser.add_argument(
        "--judge-cache",
        help="the folder of cached judge replies (default $XDG_CACHE_HOME/convhub/judge or ~/.cache/convhub/judge)",
    )
    parser.add_argument("--no-judge-cache", action="store_true", help="neither read nor write cached replies")
    parser.add_argument(
        "--judge-price-in",
        type=_number(float, 0, low_included=True),
        help="the judge's price per million prompt tokens, to report the cost",
    )
    parser.add_argument(
        "--judge-price-out",
        type=_number(float, 0, low_included=True),
        help="the judge's price per million completion tokens, to report the cost",
    )


def usage_error(args: argparse.Namespace, needs_judge: frozenset[str]) -> str | None:
    """Judge options that cannot go together or cannot work (exit 2), found before any file is read."""
    if bool(args.judge_url) != bool(args.judge_model):
        return "--judge-url and --judge-model go together: give both"
    if args.benchmark in needs_judge and not args.judge_url:
        return f"{args.benchmark} answers are scored by an LLM judge: give --judge-url and --judge-model"
    if args.protocol and args.benchmark != "locomo":
        return "--protocol applies to locomo only"
    if args.benchmark == "locomo" and args.protocol == "mem0-judge" and not args.judge_url:
        return "--protocol mem0-judge asks a judge: give --judge-url and --judge-model"
    if args.judge_url and args.benchmark == "locomo" and args.protocol != "mem0-judge":
        return "locomo is scored by its token F1, not a judge: leave out --judge-url (or give --protocol mem0-judge)"
    if args.judge_url:
        problem = url_problem(args.judge_url)
        if problem:
            return problem
        key = os.environ.get(args.judge_key_env) or ""
        if not key.isascii() or not key.isprintable():
            return f"the judge key in ${args.judge_key_env} holds characters an HTTP header cannot carry"
    if (args.judge_price_in is None) != (args.judge_price_out is None):
        return "--judge-price-in and --judge-price-out go together: give both"
    if args.judge_cache and args.no_judge_cache:
        return "--judge-cache and --no-judge-cache contradict each other: give one"
    return None


def make_judge(args: argparse.Namespace) -> Judge | None:
    """The judge the options ask for (None without ``--judge-url``), its key from the environment."""
    if not args.judge_url:
        return None
    cache = None if args.no_judge_cache else JudgeCache(args.judge_cache or default_folder())
    return Judge(
        args.judge_url,
        args.judge_model,
        api_key=judge_key(args),
        timeout=args.judge_timeout,
        retries=args.judge_retries,
        workers=args.judge_workers,
        runs=args.judge_runs,
        cache=cache,
    )


def judge_key(args: argparse.Namespace) -> str | None:
    """The API key, from the environment variable ``--judge-key-env`` names."""
    return os.environ.get(args.judge_key_env) or None


def judge_section(
    judge: Judge, args: argparse.Namespace, prompt_version: str, prompts: dict[str, str]
) -> JudgeInfo:
    """The report's ``judge``: who judged with what, the runs' agreement, failures, tokens and cost."""
    tally = judge.tally
    info: JudgeInfo = {
        "model": judge.model,
        "url": judge.http.shown_base,
        "prompt_version": prompt_version,
        "prompts": dict(sorted(prompts.items())),
        "calls": tally.calls,
        "cached": tally.cached,
        "runs": judge.runs,
        "agreement": tally.unanimous / tally.questions if tally.questions else None,
        "failed_verdicts": tally.failed,
        "tokens": {"prompt": tally.prompt_tokens, "completion": tally.completion_tokens},
    }
    if args.judge_price_in is not None:
        info["cost"] = cost(
            tally.prompt_tokens, tally.completion_tokens, args.judge_price_in, args.judge_price_out
        )
    return info


def cost(prompt_tokens: int, completion_tokens: int, price_in: float, price_out: float) -> float:
    """What the tokens cost at prices per million tokens."""
    return (prompt_tokens * price_in + completion_tokens * price_out) / 1_000_000


def summary_line(info: JudgeInfo) -> str:
    """One line for the terminal: requests sent, replies from the cache, failures, tokens, cost."""
    parts: list[Any] = [f"{info['calls']:,} judge requests", f"{info['cached']:,} cached replies"]
    if info["runs"] > 1:
        parts.append(f"{info['runs']} runs, agreement {info['agreement'] or 0:.3f}")
    if info["failed_verdicts"]:
        parts.append(f"{info['failed_verdicts']:,} failed verdicts counted as negative")
    tokens = info["tokens"]
    parts.append(f"{tokens['prompt']:,} + {tokens['completion']:,} tokens")
    if "cost" in info:
        parts.append(f"cost {info['cost']:.4f}")
    return "  judge: " + ", ".join(parts)
