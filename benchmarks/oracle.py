"""Today's local build is the oracle: build the benchmark's scaled inputs with another engine and compare.

    python benchmarks/oracle.py --scale 0.2                          # every source, Spark local[2]
    python benchmarks/oracle.py --scale 0.2 --source mnbvc --engine spark:local[1]
    python benchmarks/oracle.py --save /tmp/oracle-ref               # today's code: builds and exports kept
    python benchmarks/oracle.py --against /tmp/oracle-ref            # after a restructure: the same data?
    python benchmarks/oracle.py --against /tmp/oracle-ref --new-field rubric   # ... but for a field added since

For each source it generates the benchmark's input (``scaled_inputs``), builds every config with the local engine
and with the other one, and compares each config and split: the rows of its files in order, as one table, with
``pyarrow.Table.equals`` (schema metadata included), and the cards but for their byte figures (Arrow's byte count
and the files' sizes follow how the rows are cut into files). Prints one line per config and split; exits 1 on any
difference.

``--save`` and ``--against`` are the oracle for a restructure, where the other "engine" is yesterday's code: ``--save``
builds every source's sample files, its real files in ``../shared/data`` (when present) and its scaled input with the
local engine, and keeps the inputs, the builds and their exports in the folder; ``--against`` builds the same inputs
with the code of now and compares the builds as above and the exports byte for byte.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness
import scaled_inputs

#: Card lines that count bytes.
BYTE_FIGURES = re.compile(r"^\s*(num_bytes|download_size|dataset_size): \d+$", re.MULTILINE)
#: The card's listing of the input files (YAML and body): a build of an export reads other files than the
#: build it was exported from, the same rows in them.
SOURCE_FILES = re.compile(
    r"^source_files(_not_listed)?:\n(?:[- ] [^\n]*\n)*|^### Source files\n.*?(?=^## )",
    re.MULTILINE | re.DOTALL,
)


def tables(folder: Path) -> dict[tuple[str, str], pa.Table]:
    """(config folder, split) → the rows of its files in order, as one table."""
    found: dict[tuple[str, str], list[pa.Table]] = {}
    for path in sorted(folder.rglob("*.parquet")):
        config = path.parent.relative_to(folder).as_posix()
        found.setdefault((config, path.name.split("-")[0]), []).append(pq.read_table(path))
    return {key: pa.concat_tables(parts) for key, parts in found.items()}


def card_without_bytes(folder: Path) -> str:
    return SOURCE_FILES.sub("", BYTE_FIGURES.sub("", (folder / "README.md").read_text(encoding="utf-8")))


def without_fields(table: pa.Table, fields: frozenset[str]) -> pa.Table:
    """``table`` without the columns named in ``fields``, nor those fields of a column of structs in lists (the
    questions of ``sessions``): what a change added on purpose since ``--save``."""
    table = table.drop_columns([name for name in table.column_names if name in fields])
    for index, column_type in enumerate(table.schema.types):
        if not (pa.types.is_list(column_type) and pa.types.is_struct(column_type.value_type)):
            continue
        lists = table.column(index).combine_chunks()
        structs = lists.values
        kept = [field for field in structs.type if field.name not in fields]
        rebuilt = pa.StructArray.from_arrays([structs.field(field.name) for field in kept], fields=kept)
        table = table.set_column(
            index,
            table.column_names[index],
            pa.ListArray.from_arrays(lists.offsets, rebuilt, mask=lists.is_null()),
        )
    return table


def compare(
    expected: Path, actual: Path, new_fields: frozenset[str] = frozenset()
) -> list[tuple[str, int, bool]]:
    """(config/split, rows, equal) for every config and split of either build, then ("card", 0, equal). With
    ``new_fields``, tables are compared without those fields (values and types; the features metadata names them)
    and the card without the lines that name them."""
    old, new = tables(expected), tables(actual)
    lines = []
    for key in sorted(set(old) | set(new)):
        rows = (old.get(key) or new[key]).num_rows
        if key not in old or key not in new:
            same = False
        elif new_fields:
            same = without_fields(new[key], new_fields).equals(without_fields(old[key], new_fields))
        else:
            same = new[key].equals(old[key], check_metadata=True)
        lines.append((f"{key[0]}/{key[1]}", rows, same))
    cards = [card_without_bytes(folder).splitlines() for folder in (expected, actual)]
    if new_fields:
        naming = re.compile("|".join(map(re.escape, sorted(new_fields))))
        cards = [[line for line in card if not naming.search(line)] for card in cards]
    lines.append(("card (but byte figures)", 0, cards[0] == cards[1]))
    return lines


def same_files(expected: Path, actual: Path) -> bool:
    """The two folders hold the same file names with the same bytes."""

    def listing(folder: Path) -> dict[str, Path]:
        return {path.relative_to(folder).as_posix(): path for path in folder.rglob("*") if path.is_file()}

    old, new = listing(expected), listing(actual)
    return old.keys() == new.keys() and all(old[name].read_bytes() == new[name].read_bytes() for name in old)


def inputs(source: str, folder: Path, scale: float) -> dict[str, Path]:
    """Input name → data folder: the packaged sample, the real files (when ``../shared/data`` has them) and the
    scaled input, generated into ``folder``."""
    from convhub import registry

    found = {"sample": Path(registry.get(source).sample_dir())}
    real = harness.SHARED_DATA / source
    if real.is_dir():
        found["real"] = real
    if scaled_inputs.generator(source) is not None:  # a source without builders/<name>/scaled.py has none
        found[f"scaled-{scale}"] = scaled_inputs.make(source, folder / f"scaled-{scale}", scale).data_dir
    return found


def build_and_export(source: str, data_dir: Path, folder: Path) -> tuple[Path, Path]:
    """Build ``data_dir`` with the local engine into ``folder``/build and export it to ``folder``/export."""
    from convhub.build import build_source
    from convhub.export.exporter import export_source

    built = build_source(source, folder / "build", str(data_dir), num_proc=2)
    return built.output, export_source(source, built.output, folder / "export").output


def save(reference: Path, sources: list[str], scale: float) -> int:
    """Keep today's inputs, builds and exports in ``reference`` (the ``--against`` oracle)."""
    for source in sources:
        for name, data_dir in inputs(source, reference / "input" / source, scale).items():
            started = time.perf_counter()
            build_and_export(source, data_dir, reference / "output" / source / name)
            print(f"{source} {name}: saved ({time.perf_counter() - started:.1f} s)", flush=True)
    return 0


def against(reference: Path, sources: list[str], new_fields: frozenset[str] = frozenset()) -> int:
    """Build and export the inputs kept in ``reference`` again and compare with the builds and exports kept there
    (without ``new_fields``: fields added on purpose since). A source ``reference`` holds no build of (one added
    since ``--save``) is skipped, with a line saying so."""
    different = 0
    print("| source | input | config/split | rows | now vs saved |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="convhub-oracle-") as temp:
        for source in sources:
            saved = sorted((reference / "output" / source).glob("*"))
            if not saved:  # a source registered after the --save (a new one): nothing to compare it with
                print(
                    f"| {source} | (none saved) | skipped: {reference} holds no build of it | | |", flush=True
                )
                continue
            for folder in saved:
                data_dir = kept_input(reference, source, folder.name)
                build, exported = build_and_export(source, data_dir, Path(temp) / source / folder.name)
                exports_equal = same_files(folder / "export", exported)
                lines = [*compare(folder / "build", build, new_fields), ("export (bytes)", 0, exports_equal)]
                for name, rows, same in lines:
                    different += not same
                    print(
                        f"| {source} | {folder.name} | {name} | {rows:,} | {'equal' if same else 'DIFFERENT'} |"
                    )
    print(f"\n{different} difference(s)")
    return 1 if different else 0


def kept_input(reference: Path, source: str, name: str) -> Path:
    """The data folder ``--save`` built as ``name``: the sample or the real files where they are, a scaled input
    from ``reference`` (reused, not generated again)."""
    from convhub import registry

    if name == "sample":
        return Path(registry.get(source).sample_dir())
    if name == "real":
        return harness.SHARED_DATA / source
    scale = float(name.removeprefix("scaled-"))
    return scaled_inputs.make(source, reference / "input" / source / name, scale).data_dir


def main(argv: list[str] | None = None) -> int:
    from convhub import registry
    from convhub.build import build_source

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.2)
    parser.add_argument("--source", action="append", choices=registry.names(), help="only this source")
    parser.add_argument("--engine", default="spark:local[2]", help="spark:<master> (default spark:local[2])")
    parser.add_argument(
        "--save", type=Path, metavar="DIR", help="keep today's local builds and exports in DIR"
    )
    parser.add_argument(
        "--against", type=Path, metavar="DIR", help="compare with the builds --save kept in DIR"
    )
    parser.add_argument(
        "--new-field",
        action="append",
        default=[],
        metavar="NAME",
        help="with --against: a field added on purpose since --save (a column, or a field of the questions), "
        "left out of the comparison with the card lines naming it",
    )
    args = parser.parse_args(argv)
    if args.save:
        return save(args.save, args.source or registry.names(), args.scale)
    if args.against:
        return against(args.against, args.source or registry.names(), frozenset(args.new_field))
    engine, _, master = args.engine.partition(":")
    different = 0
    print(f"| source | config/split | rows | local {args.scale} vs {args.engine} |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="convhub-oracle-") as temp:
        for source in args.source or registry.names():
            if scaled_inputs.generator(source) is None:
                print(f"| {source} | skipped: no scaled input (builders/{source}/scaled.py) | | |")
                continue
            made = scaled_inputs.make(source, Path(temp) / "input" / source, args.scale)
            started = time.perf_counter()
            local = build_source(source, Path(temp) / "local" / source, str(made.data_dir), num_proc=2)
            local_seconds = time.perf_counter() - started
            started = time.perf_counter()
            other = build_source(
                source,
                Path(temp) / "other" / source,
                str(made.data_dir),
                engine=engine,
                spark_master=master or None,
            )
            other_seconds = time.perf_counter() - started
            for name, rows, same in compare(local.output, other.output):
                different += not same
                print(f"| {source} | {name} | {rows:,} | {'equal' if same else 'DIFFERENT'} |", flush=True)
            print(
                f"| {source} | (seconds: local {local_seconds:.1f}, {args.engine} {other_seconds:.1f}) | | |"
            )
    print(f"\n{different} difference(s)")
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
