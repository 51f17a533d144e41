"""Reading what the benchmarks print: the cells of their Markdown tables."""

from __future__ import annotations


def table_rows(output: str) -> list[list[str]]:
    """The cells of each table row (not the header or its rule)."""
    lines = [
        line for line in output.splitlines() if line.startswith("| ") and not line.startswith("| source")
    ]
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines]
