"""Any JSON value in any field of any source: ``build`` then ``export`` gives it back exactly, or the build
stops with one line naming file, record and field. Never a traceback, never a silent change.

Hypothesis takes a valid record of each source (``hostile_sources.SOURCES``), puts an arbitrary JSON value
at one of its places (or under a new key of one of its objects), and runs ``convhub build`` and ``convhub
export`` as a user would. The values include every string Python's ``json`` reads (lone surrogates too),
integers far past 64 bits, floats, and nesting past Python's JSON reader (thousands of levels).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from convhub.cli import main as cli
from convhub.export.exporter import differences
from tests.support.hostile_sources import SOURCES

EXAMPLES = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)

#: Every string ``json.loads`` can give: any code point, lone surrogates included.
ANY_TEXT = st.text(st.characters(), max_size=12)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | ANY_TEXT
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(ANY_TEXT, children, max_size=3),
    max_leaves=8,
)
DEEP = st.integers(1_100, 3_000).map(lambda depth: "<deep>" * depth)  # a marker replaced by raw brackets


def places(value: Any, path: tuple = ()) -> list[tuple]:
    """Every place in a JSON value: each key of each object, each item of each list (depth first)."""
    found = [path] if path else []
    if isinstance(value, dict):
        for key, child in value.items():
            found += places(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += places(child, (*path, index))
    return found


def put(record: Any, path: tuple, value: Any) -> None:
    target = record
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value


@st.composite
def edited_records(draw, name: str) -> tuple[list[dict], str]:
    """Two valid records of ``name``, the second with one arbitrary value put somewhere in it."""
    source = SOURCES[name]
    record = source.record(1)
    path = draw(st.sampled_from(places(record)))
    if draw(st.booleans()) and isinstance(_at(record, path[:-1]), dict):
        path = (*path[:-1], draw(ANY_TEXT))  # a new key beside the chosen one
    put(record, path, draw(JSON_VALUES | DEEP))
    return [source.record(0), record], name


def _at(record: Any, path: tuple) -> Any:
    for step in path:
        record = record[step]
    return record


def encode(name: str, records: list[dict]) -> bytes:
    """The source's file, with ``<deep>`` markers written as that many nested lists."""
    dumps = lambda value: json.dumps(value, ensure_ascii=True)  # noqa: E731 (ASCII: surrogates as escapes)
    text = "".join(dumps(r) + "\n" for r in records) if SOURCES[name].jsonl else dumps(records)
    while '"<deep>' in text:
        start = text.index('"<deep>')
        end = text.index('"', start + 1)
        depth = (end - start - 1) // len("<deep>")
        text = text[:start] + "[" * depth + "]" * depth + text[end + 1 :]
    return text.encode("ascii")


def decode(name: str, content: bytes) -> Any:
    if SOURCES[name].jsonl:
        return [json.loads(line) for line in content.split(b"\n") if line.strip()]
    return json.loads(content)


def build_and_export(name: str, content: bytes, capsys) -> tuple[int, Any]:
    """``convhub build`` then, if it built, ``convhub export``: (build's exit code, the exported value)."""
    source = SOURCES[name]
    with tempfile.TemporaryDirectory(prefix="convhub-any-value-") as scratch:
        root = Path(scratch)
        source.path(root / "data").write_bytes(content)
        build = [
            "build",
            name,
            "--data-dir",
            str(root / "data"),
            "--output",
            str(root / "out"),
            "--num-proc",
            "1",
        ]
        code = cli.main(build)
        if code != 0:
            return code, None
        exported = ["export", name, "--from", str(root / "out"), "--output", str(root / "export")]
        assert cli.main(exported) == 0, capsys.readouterr().err
        return 0, decode(name, (root / "export" / source.file_name).read_bytes())


def check_one(name: str, records: list[dict], capsys) -> None:
    content = encode(name, records)
    capsys.readouterr()
    code, exported = build_and_export(name, content, capsys)
    err = capsys.readouterr().err
    event("built and exported" if code == 0 else "refused by name")
    if code == 0:
        assert differences(decode(name, content), exported) == []
    else:
        lines = [line for line in err.splitlines() if line.startswith("convhub ")]
        assert len(lines) == 1 and lines[0].startswith("convhub build: error: "), err
        assert "Traceback" not in err


@pytest.mark.slow
@EXAMPLES
@given(case=edited_records("locomo"))
def test_any_value_in_a_locomo_sample(case, capsys):
    check_one("locomo", case[0], capsys)


@pytest.mark.slow
@EXAMPLES
@given(case=edited_records("gigamemory"))
def test_any_value_in_a_gigamemory_line(case, capsys):
    check_one("gigamemory", case[0], capsys)


@pytest.mark.slow
@EXAMPLES
@given(case=edited_records("convlab"))
def test_any_value_in_a_convlab_dialogue(case, capsys):
    check_one("convlab", case[0], capsys)


@pytest.mark.slow
@EXAMPLES
@given(case=edited_records("mnbvc"))
def test_any_value_in_an_mnbvc_row(case, capsys):
    check_one("mnbvc", case[0], capsys)
