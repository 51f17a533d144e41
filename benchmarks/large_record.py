"""Peak memory of a build whose input is one very large record, as a multiple of the record's size.

    python benchmarks/large_record.py                     # every source: a 64 MB record
    python benchmarks/large_record.py --mb 128 --source mnbvc
    python benchmarks/large_record.py --tiny-turns 1000000   # one MNBVC conversation of that many tiny turns

For each source it takes the first record of the packaged sample, makes its longest string N MB long (Chinese
text for MNBVC, English words for the others) and builds every config from that one record, in a fresh process
(``harness.run_case``: the peak is the process tree's own). The baseline is the same record at its own size,
built in the same run, so the interpreter and the libraries cancel out: the figure is
(peak with the large record - peak with the small one) / the record's size on disk.

``--tiny-turns N`` measures issue 33's other large record instead: one conversation of N turns of a few
characters, against the same conversation of one turn. For MNBVC (the default) Q/A rows shaped as the sample's
first line, every third answer empty (its ``sessions`` row is about 1.8x the input: each question turn keeps its
raw row); with ``--source locomo`` or ``longmemeval`` (issue 54) the sample's first record with its first session's
turns replaced by N turns shaped as its first turn.

    python benchmarks/large_record.py --tiny-turns 1000000 --source locomo
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scaled_inputs
from harness import BUILD, run_case

#: Target (issue #13): peak memory within a small multiple of the record's size. The floor of a build that writes
#: compressed Parquet and derives its views from the ``sessions`` file it wrote is about four copies: the read page
#: and the array decoded from it, the derived view's own column where it is rebuilt (``messages``), and Parquet's
#: page and compression buffers, which its writer keeps until the next row group. This line allows one more copy
#: for the parse (the line, its decoded text); 4x, set before that floor was measured, is what it was first.
TARGET_MULTIPLE = 6.0


#: Each source's large record: the sample file whose first record it grows (a JSON list, or JSON Lines for
#: ``.jsonl``), and where the record goes in its data folder, alone in a file of the same kind; declared in the
#: source's ``builders/<name>/scaled.py`` as ``LARGE_RECORD`` (with ``LARGE_RECORD_UNIT``, the text it is grown
#: with, and ``LARGE_RECORD_COMPANIONS``, sample files the record is read with). A source without one is skipped.
RECORD_FILES = {
    source: module.LARGE_RECORD
    for source in scaled_inputs.sources()
    if hasattr(module := scaled_inputs.generator(source), "LARGE_RECORD")
}
SOURCES = tuple(RECORD_FILES)

#: Strings that hold JSON (MNBVC's extension field): a text field is grown, not them.
JSON_STRINGS = {"扩展字段"}


def longest_string_path(value: Any, path: tuple = ()) -> tuple[int, tuple]:
    """(length, path) of the longest text string inside ``value``."""
    if isinstance(value, str):
        return len(value), path
    if isinstance(value, dict):
        children = [(key, child) for key, child in value.items() if key not in JSON_STRINGS]
    else:
        children = list(enumerate(value)) if isinstance(value, list) else []
    return max((longest_string_path(child, (*path, key)) for key, child in children), default=(-1, path))


def with_long_string(record: Any, megabytes: float, unit: str) -> Any:
    """``record`` with its longest string replaced by ``unit`` repeated to ``megabytes`` of UTF-8."""
    _, path = longest_string_path(record)
    copy = json.loads(json.dumps(record))
    holder = copy
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = unit * int(megabytes * 2**20 / len(unit.encode("utf-8")))
    return copy


def first_line(path: Path) -> dict:
    with path.open(encoding="utf-8") as handle:
        return json.loads(handle.readline())


def write_input(source: str, folder: Path, megabytes: float | None) -> Path:
    """One record of ``source`` in its own format under ``folder`` (its longest string ``megabytes`` long, or
    as it is when None); returns the data folder."""
    from convhub import registry

    sample = Path(registry.get(source).sample_dir())
    declared = scaled_inputs.generator(source)
    unit = getattr(declared, "LARGE_RECORD_UNIT", "a long turn ")

    def grown(record):
        return record if megabytes is None else with_long_string(record, megabytes, unit)

    original, copy = RECORD_FILES[source]
    target = folder / copy
    target.parent.mkdir(parents=True)
    if original.endswith(".jsonl"):
        text = json.dumps(grown(first_line(sample / original)), ensure_ascii=False) + "\n"
    else:
        [first, *_] = json.loads((sample / original).read_text(encoding="utf-8"))
        text = json.dumps([grown(first)], ensure_ascii=False)
    target.write_text(text, encoding="utf-8")
    for companion in getattr(declared, "LARGE_RECORD_COMPANIONS", ()):  # e.g. a ConvLab dataset's ontology
        shutil.copy(sample / companion, target.parent / Path(companion).name)
    return folder


def write_many_turns(folder: Path, turns: int) -> Path:
    """One MNBVC conversation (会话 1) of about ``turns`` tiny turns under ``folder``: Q/A rows shaped as the
    sample's first line, every third answer empty (no answer turn); returns the data folder."""
    from convhub import registry

    first = first_line(Path(registry.get("mnbvc").sample_dir()) / "multiturn" / "sharegpt-0002.jsonl")
    rows = max(1, round(turns * 3 / 5))  # two rows in three give two turns, the third one
    (folder / "multiturn").mkdir(parents=True)
    with (folder / "multiturn" / "one.jsonl").open("w", encoding="utf-8") as out:
        for number in range(1, rows + 1):
            extension = {"会话": 1, "多轮序号": number, "解析模型": "gpt4"}
            row = {
                **first,
                "id": f"{number:032x}",
                "问": f"问{number}",
                "答": "" if number % 3 == 0 else f"答{number}",
                "元数据": {**first["元数据"], "扩展字段": json.dumps(extension, ensure_ascii=False)},
            }
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    return folder


#: Where each JSON-list source keeps its first record's first session, and the tiny turn it is filled with.
TINY_TURN_SESSIONS = {
    "locomo": (
        ("conversation", "session_1"),
        lambda first, index: {**first, "dia_id": f"D1:{index + 1}", "text": f"t{index}"},
    ),
    "longmemeval": (
        ("haystack_sessions", 0),
        lambda first, index: {
            **first,
            "role": ("user", "assistant")[index % 2],
            "content": f"t{index}",
            "has_answer": False,
        },
    ),
}


def write_tiny_turns(source: str, folder: Path, turns: int) -> Path:
    """One record of ``source`` (``TINY_TURN_SESSIONS``) whose first session holds ``turns`` tiny turns shaped as
    its first turn, in its own format under ``folder``; returns the data folder."""
    from convhub import registry

    original, copy = RECORD_FILES[source]
    [first, *_] = json.loads((Path(registry.get(source).sample_dir()) / original).read_text(encoding="utf-8"))
    (container, key), make_turn = TINY_TURN_SESSIONS[source]
    session = first[container][key]
    first[container][key] = [make_turn(session[0], index) for index in range(turns)]
    target = folder / copy
    target.parent.mkdir(parents=True)
    with target.open("w", encoding="utf-8") as out:
        json.dump([first], out, ensure_ascii=False)
    return folder


def input_megabytes(folder: Path) -> float:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file()) / 2**20


def inputs(args: argparse.Namespace, folder: Path) -> Iterator[tuple[str, Path, Path]]:
    """(source, the small record's data folder, the large record's) of each pair of builds to measure."""
    if args.tiny_turns:
        for source in args.source or ["mnbvc"]:
            if source == "mnbvc":
                yield (
                    source,
                    write_many_turns(folder / source / "small", 1),
                    write_many_turns(folder / source / "large", args.tiny_turns),
                )
            else:
                yield (
                    source,
                    write_tiny_turns(source, folder / source / "small", 1),
                    write_tiny_turns(source, folder / source / "large", args.tiny_turns),
                )
        return
    for source in args.source or SOURCES:
        small = write_input(source, folder / source / "small", None)
        yield source, small, write_input(source, folder / source / "large", args.mb)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=64, help="size of the large record's longest string")
    parser.add_argument("--source", action="append", choices=SOURCES, help="only this source")
    parser.add_argument(
        "--tiny-turns",
        type=int,
        metavar="N",
        help="instead: one conversation of N tiny turns (MNBVC, or --source locomo, longmemeval)",
    )
    args = parser.parse_args(argv)
    tiny_sources = {"mnbvc", *TINY_TURN_SESSIONS}
    if args.tiny_turns and not set(args.source or []) <= tiny_sources:
        parser.error(f"--tiny-turns builds only {', '.join(sorted(tiny_sources))}")
    print(
        "| source | record MB | peak MiB, small record | peak MiB, large record | (large - small) / record |"
    )
    print("|---|---|---|---|---|")
    worst = 0.0
    with tempfile.TemporaryDirectory(prefix="convhub-large-record-") as temp:
        for source, small, large in inputs(args, Path(temp)):
            _, small_peak, _ = run_case(BUILD, [source, str(small), "null", "1"])
            _, large_peak, _ = run_case(BUILD, [source, str(large), "null", "1"])
            megabytes = input_megabytes(large)
            multiple = (large_peak - small_peak) / megabytes
            worst = max(worst, multiple)
            print(
                f"| {source} | {megabytes:.1f} | {small_peak:.0f} | {large_peak:.0f} | {multiple:.1f}x |",
                flush=True,
            )
    met = "met" if worst <= TARGET_MULTIPLE else "missed"
    print(f"\ntarget: peak memory above the small record's within {TARGET_MULTIPLE:.0f}x the record: {met}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
