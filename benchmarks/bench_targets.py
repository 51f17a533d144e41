"""What ``bench.py`` prints after its rounds: one row per case over the rounds (``merged``, ``print_summary``)
and the targets, each measured figure against its goal, met or missed (``targets``)."""

from __future__ import annotations

import statistics

from bench_cases import (
    ALL_CASE,
    BASELINE_SUFFIX,
    BASELINE_TIME_RATIO,
    FLOORED_BUILD_CASE,
    GENERIC_CASE,
    MAX_RSS_GROWTH,
    MEMORY_CASE,
    MEMORY_INPUT_RATIO,
    NATIVE_FLOOR_CASE,
    NATIVE_FLOOR_SOURCES,
    PARALLEL_CASE,
    SESSIONS_CASE,
    SHARED_PARALLEL_CASE,
    SIZING_CORE_HOURS,
    SIZING_TB,
    SPARK_MEMORY_CASE,
    SPARK_PARALLEL_CASE,
    SPARK_PARALLEL_MEMORY_CASE,
    SPARK_SESSIONS_CASE,
    SPEED_GOALS,
    engine_of,
)


def baseline_speeds(row: dict, rows: list[dict]) -> dict[str, float]:
    """MB/s of each case of ``row``'s source and round: the generic loader and the parse floor ``row`` is compared
    with were measured in the same round. Speeds, not seconds: a case may read part of the input (``case_input``)."""
    return {
        r["case"]: r["MB"] / r["s"]
        for r in rows
        if r["source"] == row["source"] and r.get("round") == row.get("round") and r.get("s")
    }


def merged(rows: list[dict]) -> list[dict]:
    """One row per source and case from the rounds of ``--repeat``: the median seconds (and ``range``, the
    fastest and slowest round), the highest peak memory, the median first row, and ``ratios``, the case's speed
    over the generic loader's within each round. A case that failed in any round keeps its failed row."""
    runs: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        runs.setdefault((row["source"], row["case"]), []).append(row)
    out = []
    for rounds in runs.values():
        failed = [row for row in rounds if "failed" in row]
        if failed:
            out.append(failed[0])
            continue
        row = {key: value for key, value in rounds[0].items() if key != "round"}
        seconds = [run["s"] for run in rounds]
        row.update(s=statistics.median(seconds), range=(min(seconds), max(seconds)), rounds=len(rounds))
        row["rss"] = max(run["rss"] for run in rounds)
        row["python_rss"] = max(python_peak(run) for run in rounds)
        if "first_row" in row:  # a stream: its first row, not its speed (it stops at --stream-seconds)
            firsts = [run["first_row"] for run in rounds if run["first_row"] is not None]
            row["first_row"] = statistics.median(firsts) if firsts else None
            row["first_rows"] = firsts
            row["complete"] = all(run["complete"] for run in rounds)
            out.append(row)
            continue
        generic = [baseline_speeds(run, rows).get(GENERIC_CASE) for run in rounds]
        if all(generic) and not row["case"].startswith(MEMORY_CASE):
            row["ratios"] = [run["MB"] / run["s"] / base for base, run in zip(generic, rounds, strict=True)]
        out.append(row)
    return out


def print_summary(rows: list[dict]) -> None:
    """The table of :func:`merged` rows (``--repeat``)."""
    print(
        "\n| source | case | engine | rounds | seconds, median (fastest-slowest) | peak MiB, highest "
        "| speed vs load_dataset('json'), median of the rounds (lowest-highest); a stream: its first row |"
    )
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        if "failed" in row:
            print(f"| {row['source']} | {row['case']} | {engine_of(row['case'])} | failed | | | |")
            continue
        low, high = row["range"]
        ratios, firsts = row.get("ratios"), row.get("first_rows")
        if firsts:
            ratio = f"first row {row['first_row']:.2f} s ({min(firsts):.2f}-{max(firsts):.2f})"
        elif "first_rows" in row:
            ratio = "no row"
        elif ratios:
            ratio = f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}x)"
        else:
            ratio = "-"
        print(
            f"| {row['source']} | {row['case']} | {engine_of(row['case'])} | {row['rounds']} "
            f"| {row['s']:.2f} ({low:.2f}-{high:.2f}) | {peak_cell(row)} | {ratio} |"
        )


def steady_per_core(full: dict, smaller: dict, cores: int) -> float | None:
    """MB/s per core of a build once its fixed price is paid: the extra megabytes of the ``full`` input over the
    ``smaller`` one, by the extra seconds they took, on ``cores`` cores. What a long job's tasks do after the
    JVM has started; None when the larger input did not take longer (a noisy run says nothing)."""
    extra_seconds = full["s"] - smaller["s"]
    if extra_seconds <= 0 or full["MB"] <= smaller["MB"]:
        return None
    return (full["MB"] - smaller["MB"]) / extra_seconds / cores


def python_peak(row: dict) -> float:
    """A case's peak memory of its Python processes (its tree's, for a row measured before they were told apart)."""
    return row.get("python_rss", row["rss"])


def peak_cell(row: dict) -> str:
    """A case's peak memory in MiB: its process tree's, and its Python processes' where they differ (a Spark
    build's JVM is outside them)."""
    python = python_peak(row)
    return f"{row['rss']:.0f}" if python >= row["rss"] - 1 else f"{row['rss']:.0f} (Python {python:.0f})"


def targets(rows: list[dict]) -> list[str]:
    """One line per target and source: the measured figure, and met or missed."""
    lines = []
    for source in dict.fromkeys(row["source"] for row in rows):
        cases = {row["case"]: row for row in rows if row["source"] == source and "s" in row}
        generic = cases.get(GENERIC_CASE)

        def check(
            label: str, value: float, goal: float, higher: bool, unit: str = "x", source=source
        ) -> None:
            met = value >= goal if higher else value <= goal
            sign = ">=" if higher else "<="
            lines.append(
                f"- {source}: {label} {value:.2f}{unit} (target {sign} {goal}{unit}): {'met' if met else 'MISSED'}"
            )

        def shown(label: str, value: float, source=source) -> None:
            lines.append(f"- {source}: {label} {value:.2f}x (shown, no target)")

        # Speed against load_dataset('json') is a target only where the data is big (issue 35: MNBVC at 0.5x
        # with num_proc=2); for the small sources it is shown, not judged (issue 34 retired that target).
        for case, how in ((SESSIONS_CASE, "num_proc=1"), (PARALLEL_CASE, "num_proc=2")):
            if generic and case in cases:
                speed = generic["s"] / cases[case]["s"]
                label = f"sessions speed vs load_dataset('json'), {how}"
                if source in SPEED_GOALS and case == PARALLEL_CASE:
                    check(label, speed, SPEED_GOALS[source], True)
                else:
                    shown(label, speed)
        if NATIVE_FLOOR_CASE in cases and FLOORED_BUILD_CASE in cases:
            ratio = cases[FLOORED_BUILD_CASE]["s"] / cases[NATIVE_FLOOR_CASE]["s"]
            check("sessions time, num_proc=2 / the native floor's (multi-turn files)", ratio, 1.5, False)
        every = ALL_CASE if ALL_CASE in cases else SHARED_PARALLEL_CASE  # a source without configs of its own
        if source in NATIVE_FLOOR_SOURCES and every in cases and PARALLEL_CASE in cases:
            ratio = cases[every]["s"] / cases[PARALLEL_CASE]["s"]
            check("all configs time / sessions alone, num_proc=2", ratio, 2.0, False)
        if source in NATIVE_FLOOR_SOURCES and SPARK_SESSIONS_CASE in cases and SESSIONS_CASE in cases:
            price = cases[SPARK_SESSIONS_CASE]["s"] / cases[SESSIONS_CASE]["s"]
            check("Spark local[1] time / local engine num_proc=1 on sessions", price, 1.3, False)
        for name, row in cases.items():
            twin = cases.get(name + BASELINE_SUFFIX)
            if twin is not None:
                check(f"{name}: time / the baseline code's", row["s"] / twin["s"], BASELINE_TIME_RATIO, False)
        builds = [
            row for name, row in cases.items() if name.startswith("build") and BASELINE_SUFFIX not in name
        ]
        if builds:
            python = max(python_peak(row) for row in builds)
            check("peak memory of the builds' Python processes", python, 1024, False, " MiB")
        # Flat memory and the num_proc speed-up are targets where the data is big; a small source's input is
        # below the interpreter's fixed footprint and its build mostly fixed cost, so they are shown.
        big = source in SPEED_GOALS

        def judged(label: str, value: float, goal: float, higher: bool, big=big) -> None:
            """A target where the data is big, else shown."""
            if big:
                check(label, value, goal, higher)
            else:
                shown(label, value)

        growths = (
            (SESSIONS_CASE, MEMORY_CASE, "build sessions", lambda row: row["rss"]),
            (SPARK_SESSIONS_CASE, SPARK_MEMORY_CASE, "Spark local[1]'s Python processes", python_peak),
            (
                SPARK_PARALLEL_CASE,
                SPARK_PARALLEL_MEMORY_CASE,
                "Spark local[2]'s Python processes",
                python_peak,
            ),
        )
        for full, quarter, what, peak in growths:
            if full in cases and quarter in cases:
                growth = peak(cases[full]) / peak(cases[quarter])
                judged(
                    f"peak memory of {what}, input x{MEMORY_INPUT_RATIO} vs input",
                    growth,
                    MAX_RSS_GROWTH,
                    False,
                )
        if SESSIONS_CASE in cases and PARALLEL_CASE in cases:
            speedup = cases[SESSIONS_CASE]["s"] / cases[PARALLEL_CASE]["s"]
            judged("num_proc=2 speed-up on sessions", speedup, 1.6, True)
        if SPARK_SESSIONS_CASE in cases and SPARK_PARALLEL_CASE in cases:
            speedup = cases[SPARK_SESSIONS_CASE]["s"] / cases[SPARK_PARALLEL_CASE]["s"]
            check("Spark local[2] speed-up over local[1] on sessions", speedup, 1.6, True)
        if PARALLEL_CASE in cases and SPARK_PARALLEL_CASE in cases:
            price = cases[SPARK_PARALLEL_CASE]["s"] / cases[PARALLEL_CASE]["s"]
            check("Spark local[2] time / local engine num_proc=2 on sessions", price, 2.0, False)
        if (
            source in NATIVE_FLOOR_SOURCES
            and SPARK_PARALLEL_CASE in cases
            and SPARK_PARALLEL_MEMORY_CASE in cases
        ):
            per_core = steady_per_core(cases[SPARK_PARALLEL_CASE], cases[SPARK_PARALLEL_MEMORY_CASE], cores=2)
            if per_core is not None:
                lines.append(
                    f"- {source}: Spark local[2] {per_core:.1f} MB/s per core, its fixed price left out"
                )
                hours = SIZING_TB * 1e6 / per_core / 3600
                check(
                    f"{SIZING_TB} TB on Spark, core-hours at that rate", hours, SIZING_CORE_HOURS, False, ""
                )
        firsts = [row["first_row"] for row in cases.values() if row.get("first_row") is not None]
        missing = [  # a config with no row at all (no qa in a source without questions) is not missed
            name
            for name, row in cases.items()
            if name.startswith("stream") and row.get("first_row") is None and not row["complete"]
        ]
        if firsts:
            check("slowest first streamed row", max(firsts), 1.0, False, " s")
        if missing:
            lines.append(
                f"- {source}: no row within the time limit for {', '.join(missing)} (a config this source "
                "has no row of, or a first row slower than the limit)"
            )
        failed = [row["case"] for row in rows if row["source"] == source and "failed" in row]
        if failed:
            lines.append(f"- {source}: failed cases: {', '.join(failed)}")
    return lines
