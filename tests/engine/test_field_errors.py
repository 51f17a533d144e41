"""``require_field``: the value a conversion asks for, or a FieldError naming the field's path."""

from __future__ import annotations

import pytest

from convhub.errors import FieldError, require_field

TURN = {"speaker": "Ana", "position": 3, "done": True}


def test_a_present_value_of_the_kind_comes_back():
    assert require_field(TURN, "speaker", str, "session_1[0]") == "Ana"
    assert require_field(TURN, "position", int) == 3


@pytest.mark.parametrize(
    ("key", "kind", "parent", "field", "problem"),
    [
        ("text", str, "session_1[0]", "session_1[0].text", "missing"),
        ("speaker", int, "", "speaker", "expected int, got str"),
        ("done", int, "qa[2]", "qa[2].done", "expected int, got bool"),  # a bool is no int
    ],
)
def test_a_missing_or_mistyped_value_names_its_path(key, kind, parent, field, problem):
    with pytest.raises(FieldError) as caught:
        require_field(TURN, key, kind, parent)
    assert (caught.value.field, caught.value.problem) == (field, problem)


def test_an_absent_optional_value_is_none_but_a_mistyped_one_is_an_error():
    assert require_field(TURN, "caption", str, optional=True) is None
    with pytest.raises(FieldError, match="expected str, got int"):
        require_field(TURN, "position", str, optional=True)
