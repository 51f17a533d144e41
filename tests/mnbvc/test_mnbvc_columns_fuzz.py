"""Seeded random 多轮对话 lines (texts of every kind of character, values of every JSON type, fields missing,
repeated or reordered, lines cut or written by hand) keyed on columns equal the reference row for row
(``keyed_equivalence.compare_file``): the columnar path may leave a row to Python, never give another value."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from keyed_equivalence import compare_file, shard_of

CHARACTERS = 'ab问答 "\\/\n\t\x00\x01\x0b\x0e\x1a\x1f\x7f\u2028é😀{}[],:' + "\ud800"
DATES = ["20230517 10:41:58", "20240229 23:59:59", "20230230 10:00:00", "20230517", "", "2023-05-17 10:41:58"]
DATES += [
    "20231301 10:00:00",
    "00000101 10:00:00",
    "20230517 24:00:00",
    "20230517 10:60:00",
    "２0230517 10:41:58",
]


def text(rng: random.Random) -> str:
    if rng.random() < 0.85:
        return rng.choice(["c1", "ShareGPT", "问题", "回答", "x" * rng.randint(0, 40)])
    return "".join(rng.choice(CHARACTERS) for _ in range(rng.randint(0, 8)))


def scalar(rng: random.Random):
    return rng.choice(
        [
            lambda: text(rng),
            lambda: rng.randint(-(2**70), 2**70),
            lambda: rng.randint(-5, 5),
            lambda: rng.choice([2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1]),
            lambda: rng.choice([True, False, None]),
            lambda: rng.choice([0.5, -0.0, 1e300]),
            lambda: [text(rng)],
            lambda: {"k": text(rng)},
            lambda: {},
        ]
    )()


def extension(rng: random.Random) -> str:
    value = {"会话": rng.choice(["c1", "c2", 7, -1, 2**64 - 1, ""]), "多轮序号": rng.randint(-3, 30)}
    if rng.random() < 0.3:
        value[rng.choice(["会话", "多轮序号", "解析模型", text(rng)])] = scalar(rng)
    if rng.random() < 0.1:
        del value[rng.choice(["会话", "多轮序号"])]
    written = json.dumps(
        value, ensure_ascii=rng.random() < 0.3, separators=rng.choice([(",", ":"), (", ", ": ")])
    )
    if rng.random() < 0.05:
        written = written.replace('"c1"', "c1").replace('"c2"', "")  # the unquoted variant
    if rng.random() < 0.03:
        written = written[:-1] + ',"会话":"c3"}'  # a key twice
    return rng.choice([written] * 9 + ["", "{}", "[]", " " + written, written[:-1]])


def row(rng: random.Random) -> dict:
    value = {
        "id": rng.choice(["md5", 1, None]),
        "问": text(rng),
        "答": rng.choice([text(rng), ""]),
        "来源": rng.choice(["ShareGPT", "其他", text(rng)]),
        "时间": "20230517",
        "元数据": {"create_time": rng.choice(DATES), "问题明细": text(rng), "扩展字段": extension(rng)},
    }
    for key in ("问", "答", "来源", "时间", "id"):
        if rng.random() < 0.05:
            value[key] = scalar(rng)
        if rng.random() < 0.03:
            del value[key]
    if rng.random() < 0.05:
        value["元数据"]["create_time"] = scalar(rng)
    if rng.random() < 0.1:
        value[text(rng)] = scalar(rng)
    if rng.random() < 0.05:
        value["元数据"][text(rng)] = scalar(rng)
    if rng.random() < 0.02:
        value["元数据"] = scalar(rng)
    if rng.random() < 0.1:
        keys = list(value)
        rng.shuffle(keys)
        value = {key: value[key] for key in keys}
    return value


def line(rng: random.Random) -> bytes:
    value = row(rng)
    try:
        written = json.dumps(value, ensure_ascii=rng.random() < 0.3)
    except ValueError:
        written = "{}"
    roll = rng.random()
    if roll < 0.02:
        written = written[: rng.randint(0, len(written))]  # cut
    elif roll < 0.04:
        written = written[:-1] + ', "id": "again"}'  # a key twice
    elif roll < 0.05:
        written = written[:-1] + ",}"
    elif roll < 0.06:
        written = written.replace('"时间": "20230517"', '"时间": NaN')
    return written.encode("utf-8", "surrogatepass")


@pytest.mark.parametrize("seed", range(4))
def test_random_lines_equal_the_reference(tmp_path, seed):
    rng = random.Random(seed)
    path = tmp_path / "m.jsonl"
    path.write_bytes(b"\n".join(line(rng) for _ in range(1500)) + b"\n")
    taken, rejected, error = compare_file(shard_of([path]), 0)
    assert error is None
    routes = Counter(route for _, route in taken)
    assert routes["values"] > 50 and routes["payload"] > 300 and len(rejected) > 10
