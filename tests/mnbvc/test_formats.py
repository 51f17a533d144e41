"""Format detection for sources of several file formats (``convhub.builders.mnbvc.formats``)."""

from __future__ import annotations

import pytest

from convhub.builders.mnbvc import formats
from convhub.errors import SourceError


def classify(row):
    if "thread" in row:
        return "forum", True
    if "q" in row:
        return ("dialogue", True) if row.get("session") else ("qa", False)
    return None


FORMATS = formats.Formats(
    "SRC", ("dialogue", "qa", "forum"), classify, "a SRC row (no q, no thread)", "q", aliases={"问答": "qa"}
)


def numbered(*rows):
    return list(enumerate(rows, start=1))


def test_the_first_final_row_decides():
    assert FORMATS.detect(numbered({"q": 1}, {"q": 2, "session": 1}), "f") == "dialogue"
    assert FORMATS.detect(numbered({"q": 1}, {"q": 2}), "f") == "qa"
    assert FORMATS.detect(numbered(), "f") is None


def test_detection_stops_after_its_rows():
    rows = numbered(*[{"q": n} for n in range(formats.DETECT_ROWS)], {"q": 0, "session": 1})
    assert FORMATS.detect(rows, "f") == "qa"


def test_a_row_of_no_format_names_file_line_and_field():
    with pytest.raises(SourceError, match=r"f\.jsonl, record line 2, field 'q': missing: not a SRC row"):
        FORMATS.detect(numbered({"q": 1}, {"code": 1}), "f.jsonl")
    assert FORMATS.detect(numbered({"code": 1}, {"thread": 1}), "f.jsonl", tolerant=True) == "forum"
    with pytest.raises(SourceError, match=r"record line 1, .*none of the first"):
        FORMATS.detect(numbered({"code": 1}), "f.jsonl", tolerant=True)


def test_names_and_subsets():
    assert FORMATS.normalize(" QA ") == "qa" and FORMATS.normalize("问答") == "qa"
    with pytest.raises(ValueError, match="unknown SRC format 'code'; formats: dialogue, qa, forum"):
        FORMATS.normalize("code")
    assert FORMATS.wanted("qa", None) and FORMATS.wanted("qa", ("qa/wikihow",))
    assert not FORMATS.wanted("qa", ("forum", "dialogue/x"))
    assert FORMATS.wanted("qa", ("forum", "wikihow"))  # a subset that names no format may be in any file
