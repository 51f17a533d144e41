"""ConvLab-3's dialogue acts and belief state: kept raw, exactly when their typed form would not rebuild them
(property-based), and source keys named like convhub's markers.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from convhub.builders.convlab import export, parse
from convhub.errors import Notes
from tests.convlab.convlab_samples import turn_extra

# -- acts and state that do not fit the typed lists ------------------------------------------


def test_unrepresentable_acts_and_state_keep_the_raw_value():
    notes = Notes()
    odd_acts = {
        "categorical": [{"intent": "inform", "domain": "d", "slot": "s", "value": 3}],
        "binary": [],
        "x": [],
    }
    odd_state = {"d": {"s": ["a", "b"], "t": "ok"}}
    turn = {"speaker": "user", "utterance": "u", "utt_idx": 0, "dialogue_acts": odd_acts, "state": odd_state}
    record = parse.parse_turn(turn, notes, "f", "dlg", 0)
    extra = turn_extra(record)
    assert extra["dialogue_acts"] == odd_acts and extra["state"] == odd_state
    assert record["state"] == [{"domain": "d", "slot": "t", "value": "ok"}]  # what fits stays typed
    assert export.turn_from_record(record) == turn
    assert notes["state not representable as typed slots (raw kept in the turn's extra)"] == 1


_SCALARS = st.one_of(
    st.text(max_size=3),
    st.integers(min_value=-(2**33), max_value=2**33),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, width=32),
)
_KEYS = st.sampled_from(["intent", "domain", "slot", "value", "start", "end", "other"])
_SPAN = st.integers(min_value=-(2**31), max_value=2**31 - 1)
_TEXT_FIELDS = dict.fromkeys(("intent", "domain", "slot", "value"), st.text(max_size=2))
_VALID_ACT = st.fixed_dictionaries({}, optional={**_TEXT_FIELDS, "start": _SPAN, "end": _SPAN})
_VALID_STATE = st.dictionaries(
    st.text(max_size=2), st.dictionaries(st.text(max_size=2), st.text(max_size=2), max_size=3), max_size=3
)


def _mostly(strategy, *others):
    """``strategy`` 4 times in 5, else one of ``others``: exact and inexact values both come up often."""
    return st.integers(0, 4).flatmap(lambda draw: strategy if draw else st.one_of(*others))


def _with_one_odd_field(valid, key, value):
    return st.builds(lambda item, key, value: {**item, key: value}, valid, key, value)


_ACT = _mostly(_VALID_ACT, _with_one_odd_field(_VALID_ACT, _KEYS, _SCALARS), _SCALARS)
_ACTS = _mostly(
    st.dictionaries(
        st.sampled_from([*parse.ACT_KINDS, "x"]), _mostly(st.lists(_ACT, max_size=3), _SCALARS), max_size=4
    ),
    _SCALARS,
)
_STATE = _mostly(
    _VALID_STATE,
    _with_one_odd_field(_VALID_STATE, st.text(max_size=2), _SCALARS),
    _with_one_odd_field(_VALID_STATE, st.text(max_size=2), st.dictionaries(st.just("slot"), _SCALARS)),
    _SCALARS,
)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(acts=_ACTS, state=_STATE)
@example(acts={"binary": [{"intent": "a", "other": "x"}]}, state={"d": {}})
@example(acts={"non-categorical": [{"start": 2**31, "end": 3}]}, state={"d": {"s": None}})
@example(acts={"categorical": [{"value": None}], "binary": [{"start": True}]}, state={"d": []})
def test_acts_and_state_are_kept_raw_exactly_when_the_typed_form_would_not_rebuild_them(acts, state):
    """parse_acts / parse_state decide "exact" while reading; that decision is the rebuild's equality."""
    extra: dict = {}
    typed = parse.parse_acts(acts, extra, Notes())
    kinds = list(acts) if isinstance(acts, dict) else []
    assert ("dialogue_acts" in extra) == (parse.acts_to_source(typed, kinds) != acts)
    extra = {}
    typed = parse.parse_state(state, extra, Notes())
    empty = extra.get(parse.STATE_EMPTY_DOMAINS, [])
    assert ("state" in extra) == (parse.state_to_source(typed, empty) != state)


def test_a_source_turn_key_named_like_a_marker_is_escaped_not_refused():
    """Before, the key was refused; now it is kept under one more backslash and comes back as it was."""
    turn = {
        "speaker": "user",
        "utterance": "",
        "utt_idx": 0,
        "state_empty_domains": [],
        "\\dialogue_acts_kinds": 1,
    }
    record = parse.parse_turn(turn, Notes(), "f.json", "dlg", 0)
    extra = turn_extra(record)
    assert extra["\\state_empty_domains"] == [] and extra["\\\\dialogue_acts_kinds"] == 1
    assert extra["dialogue_acts_absent"] is True and "state_empty_domains" not in extra  # the markers, bare
    assert export.turn_from_record(record) == turn
