"""``convhub.jsonio``: orjson where it reads exactly as ``json`` does, ``json`` everywhere else."""

from __future__ import annotations

import json

import pytest
from convhub.jsonio import loads_exact, may_hold_long_integer


@pytest.mark.parametrize(
    "text",
    [
        '[{"n": -9223372036854775809}]',  # one below int64: orjson would read a float
        '[{"n": 18446744073709551616}]',
        "[123456789012345678901234567890,\n  -12345678901234567890123]",
        '[{"n": 9223372036854775807, "m": -9223372036854775808, "x": 1.5, "z": -0.0}]',
        '[{"url": "https://x.com/status/1026209343625756672", "n": 3}]',
        "[NaN, Infinity, -Infinity, 1e400]",
        '["\\ud800 lone surrogate"]',
        '{"a": 1, "a": 2}',
    ],
)
def test_loads_exact_reads_as_json_loads_reads(text):
    assert repr(loads_exact(text.encode("utf-8"))) == repr(json.loads(text))


def test_long_digit_runs_inside_strings_do_not_send_a_text_to_json_loads():
    """A tweet id in an img_url is no integer: such texts still take orjson."""
    assert not may_hold_long_integer(b'[{"img_url": ["https://x.com/s/1026209343625756672"]}]')
    assert may_hold_long_integer(b'[{"n": 1026209343625756672}]')
    assert may_hold_long_integer(b"1026209343625756672")
