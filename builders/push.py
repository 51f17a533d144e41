"""Publish a built folder to the Hub (placeholder until the push module lands)."""

from __future__ import annotations


def add_arguments(parser) -> None:
    parser.add_argument("source")


def run(args) -> int:
    raise SystemExit("convhub push: not implemented yet")
