"""Which 多轮对话 rows MNBVC's columnar keying converts on columns and which it leaves to Python, one hand-written
line per rule (``multiturn_columns``), each compared with the reference (``keyed_equivalence.compare_file``):
the usual shape is columnar; what DuckDB and Python read or write differently is Python's, with its payload;
what the reference rejects or raises, the columnar keying rejects or raises the same."""

from __future__ import annotations

import gzip
import json

import pytest
from keyed_equivalence import compare_file, shard_of

from builders.mnbvc.builder import MnbvcBuilder
from convhub.errors import SourceError


def row(**changes) -> dict:
    """A usual 多轮对话 row, its fields changed (``None``: removed; ``元数据`` and ``扩展字段`` merged)."""
    extension = {"会话": "c1", "多轮序号": 1, "解析模型": "gpt4"}
    extension.update(changes.pop("扩展字段", {}))
    metadata = {"create_time": "20230517 10:41:58", "问题明细": "q", "回答明细": "a"}
    metadata.update(changes.pop("元数据", {}))
    metadata["扩展字段"] = json.dumps(extension, ensure_ascii=False)
    value = {
        "id": "md5",
        "问": "问题",
        "答": "回答",
        "来源": "ShareGPT",
        "时间": "20230517",
        "元数据": metadata,
    }
    value.update(changes)
    return {key: item for key, item in value.items() if item is not None}


def line(**changes) -> str:
    return json.dumps(row(**changes), ensure_ascii=False)


def with_metadata(text: str, **changes) -> str:
    """A usual row whose ``元数据`` value is ``text`` (raw JSON)."""
    return json.dumps({**row(**changes), "元数据": "@metadata@"}, ensure_ascii=False).replace(
        '"@metadata@"', text
    )


def with_extension(text: str) -> str:
    """A usual row whose ``扩展字段`` string is ``text``."""
    value = row()
    value["元数据"]["扩展字段"] = text
    return json.dumps(value, ensure_ascii=False)


COLUMNAR = {
    "usual": line(),
    "ASCII escapes": json.dumps(row(), ensure_ascii=True),
    "compact": json.dumps(row(), ensure_ascii=False, separators=(",", ":")),
    "empty answer": line(答=""),
    "integer 会话": line(扩展字段={"会话": 42}),
    "negative 会话": line(扩展字段={"会话": -7}),
    "uint64 会话": line(扩展字段={"会话": 2**64 - 1}),
    "negative 多轮序号": line(扩展字段={"多轮序号": -3}),
    "int64 多轮序号": line(扩展字段={"多轮序号": 2**63 - 1}),
    "no 时间": line(时间=None),
    "no create_time": line(元数据={"create_time": None}),
    "null create_time": with_metadata(
        '{"create_time": null, "扩展字段": "{\\"会话\\": \\"c\\", \\"多轮序号\\": 1}"}'
    ),
    "empty create_time": line(元数据={"create_time": ""}),
    "leap day": line(元数据={"create_time": "20240229 23:59:59"}),
    "escapes DuckDB writes as orjson": line(来源='a"b\\c\n\t/é\x7f\u2028', 问="\x0b\x1f"),
    "characters past the BMP": line(来源="😀𠀀", 扩展字段={"会话": "😀"}, note="\U0010ffff"),
    "uint64 in the row": line(extra_number=2**64 - 1, negative=-(2**63), flag=True, nothing=None),
    "spaced 扩展字段": with_extension('{ "会话" : "c1" ,\n "多轮序号" : 1 }'),
    "escaped slash": line().replace('"问题明细": "q"', '"问题明细": "a\\/b"'),
    "key with an escape": line(**{'k"ey': "v"}),
    "no id": line(id=None),
}
PYTHON = {
    "unquoted 扩展字段": with_extension('{"会话": abc, "多轮序号": 1}'),
    "trailing comma in 扩展字段": with_extension('{"会话": "c1", "多轮序号": 1,}'),
    "empty 扩展字段": with_extension(""),
    "扩展字段 not JSON": with_extension("会话"),
    "扩展字段 an array": with_extension('["c1"]'),
    "扩展字段 an object": with_metadata('{"扩展字段": {"会话": "c1", "多轮序号": 1}}'),
    "no 扩展字段": with_metadata('{"create_time": "20230517 10:41:58"}'),
    "nested 扩展字段": line(扩展字段={"more": {"a": 1}}),
    "duplicate key in 扩展字段": with_extension('{"会话": "c1", "会话": "c2", "多轮序号": 1}'),
    "float in 扩展字段": line(扩展字段={"score": 0.5}),
    "NaN in 扩展字段": with_extension('{"会话": "c1", "多轮序号": 1, "x": NaN}'),
    "boolean 会话": line(扩展字段={"会话": True}),
    "empty 会话": line(扩展字段={"会话": ""}),
    "null 会话": line(扩展字段={"会话": None}),
    "float 会话": line(扩展字段={"会话": 1.5}),
    "no 会话": with_extension('{"多轮序号": 1}'),
    "zero in 会话": line(扩展字段={"会话": "a\x00b"}),
    "string 多轮序号": line(扩展字段={"多轮序号": "3"}),
    "多轮序号 past int64": line(扩展字段={"多轮序号": 2**63}),
    "多轮序号 past uint64": line(扩展字段={"多轮序号": 2**64}),
    "float 多轮序号": line(扩展字段={"多轮序号": 1.0}),
    "no 多轮序号": with_extension('{"会话": "c1"}'),
    "NaN in the row": line().replace('"id": "md5"', '"id": NaN'),
    "float in the row": line(score=1.5),
    "exponent in the row": line().replace('"id": "md5"', '"id": 1e2'),
    "integer past uint64 in the row": line(big=2**64),
    "integer past int64 below": line(big=-(2**63) - 1),
    "array in the row": line(tags=["a"]),
    "object in the row": line(more={"a": 1}),
    "empty object in the row": line(more={}),
    "duplicate key": line().replace('"id": "md5"', '"id": "a", "id": "b"'),
    "duplicate key in 元数据": line().replace('"问题明细": "q"', '"问题明细": "q", "问题明细": "r"'),
    "lone surrogate": line().replace('"问": "问题"', '"问": "\\ud800"'),
    "surrogate pair": line().replace('"问": "问题"', '"问": "\\ud83d\\ude00"'),
    "upper-case escape in 来源": line(来源="a\x0bb"),
    "upper-case escape in a key": line(**{"k\x1fey": 1}),
    "upper-case escape in 扩展字段": line(扩展字段={"x": "\x0e"}),
    "null 时间": line().replace('"时间": "20230517"', '"时间": null'),
    "integer 时间": line(时间=20230517),
    "date-only create_time": line(元数据={"create_time": "20230517"}),
    "dashed create_time": line(元数据={"create_time": "2023-05-17 10:41:58"}),
    "invalid day": line(元数据={"create_time": "20230230 10:41:58"}),
    "month 13": line(元数据={"create_time": "20231317 10:41:58"}),
    "hour 24": line(元数据={"create_time": "20230517 24:00:00"}),
    "year 0": line(元数据={"create_time": "00000517 10:41:58"}),
    "integer create_time": line(元数据={"create_time": 20230517}),
    "问 not a string": line(问=1),
    "no 问": line(问=None),
    "no 答": line(答=None),
    "null 答": with_metadata('{"扩展字段": "{\\"会话\\": \\"c\\", \\"多轮序号\\": 1}"}', 答=None).replace(
        '"元数据"', '"答": null, "元数据"'
    ),
    "no 来源": line(来源=None),
    "integer 来源": line(来源=5),
    "元数据 a string": with_metadata('"meta"'),
    "empty 元数据": with_metadata("{}"),
    "spaces around": "  " + line() + " ",
    "byte-order mark on a later line": "\ufeff" + line(),
    "key with a brace": line(**{"a{b": 1}),
    "key DOUBLE": line(DOUBLE=1),
}
REJECTED = {
    "trailing comma": line()[:-1] + ",}",
    "trailing comma in 元数据": line()[:-2] + ",}}",
    "no 问 nor 答": line(问=None, 答=None),
    "not JSON": '{"问": "q", ',
    "an array": "[1, 2]",
    "a string": '"text"',
    "a number": "1",
    "a raw tab in a string": line().replace('"问题"', '"问\t题"'),
    "a raw control character": line().replace('"问题"', '"问\x01题"'),
    "comment": line()[:-1] + " /* c */}",
}


def write_lines(path, lines: list[str], ending: str = "\n", gz: bool = False, head: bytes = b""):
    data = head + ending.join(lines).encode("utf-8", "surrogatepass") + ending.encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def routes(path, subsets=None, name=None):
    """{line: path taken} of a file, compared with the reference, and what was rejected."""
    shard = shard_of([path], [name] if name else None)
    taken, rejected, error = compare_file(shard, 0, subsets)
    assert error is None
    return dict(taken), rejected


def test_every_rule(tmp_path):
    cases = [("values", k, v) for k, v in COLUMNAR.items()] + [("payload", k, v) for k, v in PYTHON.items()]
    cases += [("rejected", k, v) for k, v in REJECTED.items()]
    path = write_lines(tmp_path / "m.jsonl", [text for _, _, text in cases])
    taken, rejected = routes(path)
    rejected_lines = {int(place.removeprefix("line ")) for _, place, *_ in rejected}
    found = {
        name: taken.get(number, "rejected" if number in rejected_lines else "left out")
        for number, (_, name, _) in enumerate(cases, 1)
    }
    assert found == {name: expected for expected, name, _ in cases}


@pytest.mark.parametrize("ending", ["\n", "\r\n"], ids=["lf", "crlf"])
@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_line_endings_gzip_byte_order_mark_and_blank_lines(tmp_path, ending, gz):
    lines = [
        line(),
        "",
        "   ",
        line(扩展字段={"多轮序号": 2}),
        "\t",
        PYTHON["unquoted 扩展字段"],
        line(答=""),
    ]
    path = write_lines(tmp_path / "m.jsonl.gz", lines, ending, gz, head=b"\xef\xbb\xbf")
    taken, rejected = routes(path)
    assert taken == {1: "values", 4: "values", 6: "payload", 7: "values"} and rejected == []


def test_invalid_utf8_lines_are_rejected_as_today(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_bytes(line().encode() + b"\n" + line().encode().replace("问题".encode(), b"\xff\xfe") + b"\n")
    taken, rejected = routes(path)
    assert taken == {1: "values"}
    assert [(place, problem.split(":")[0]) for _, place, _, problem, *_ in rejected] == [
        ("line 2", "not valid UTF-8")
    ]


@pytest.mark.parametrize(
    "subsets, kept",
    [
        (["ShareGPT"], {1: "values", 3: "payload"}),
        (["multiturn/其他"], {2: "values"}),
        (["multiturn"], {1: "values", 2: "values", 3: "payload"}),
        (["qa"], {}),
    ],
)
def test_a_subset_filter_leaves_out_the_rows_key_row_leaves_out(tmp_path, subsets, kept):
    lines = [line(), line(来源="其他"), PYTHON["unquoted 扩展字段"]]
    taken, rejected = routes(write_lines(tmp_path / "m.jsonl", lines), subsets)
    assert taken == kept and rejected == []


def test_a_file_name_needing_escapes_is_written_as_orjson_writes_it(tmp_path):
    taken, _ = routes(write_lines(tmp_path / "m.jsonl", [line()]), name='a"b\\c\x0b.jsonl')
    assert taken == {1: "values"}


@pytest.mark.parametrize(
    "text",
    [
        json.dumps([row(), row()], ensure_ascii=False, indent=2),  # one JSON document
        json.dumps([row(), row()], ensure_ascii=False) + "\n" + line(),  # a JSON array on line 1
        json.dumps(row(), ensure_ascii=False, indent=2),  # one object over several lines
    ],
    ids=["array document", "array line", "object document"],
)
def test_a_file_that_is_one_json_document_raises_as_today(tmp_path, text):
    path = tmp_path / "m.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SourceError, match="one JSON document"):
        list(MnbvcBuilder().keyed_batches(shard_of([path]), 0))
    shard = shard_of([path])
    taken, _, error = compare_file(shard, 0)
    assert error is not None and "one JSON document" in error.problem and taken == []


def test_a_bad_first_line_that_opens_no_document_is_one_rejected_line(tmp_path):
    path = write_lines(tmp_path / "m.jsonl", ['{"问": "q", ', line(), line()])
    taken, rejected = routes(path)
    assert taken == {2: "values", 3: "values"} and [place for _, place, *_ in rejected] == ["line 1"]


@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
def test_an_unreadable_gzip_keeps_the_lines_before_and_rejects_the_file(tmp_path, damage):
    lines = [line(扩展字段={"多轮序号": n}, 问=f"问题{n}" * (n % 50)) for n in range(20000)]
    data = bytearray(gzip.compress("\n".join(lines).encode(), compresslevel=1))
    if damage == "truncated":
        data = data[: len(data) // 2]
    else:
        data[len(data) // 2 : len(data) // 2 + 64] = b"\xff" * 64
    path = tmp_path / "m.jsonl.gz"
    path.write_bytes(bytes(data))
    taken, rejected = routes(path)
    assert len(taken) > 1000 and set(taken.values()) == {"values"}
    [(_, place, _, problem, raw, scope)] = rejected
    assert problem.startswith("cannot read the file (corrupt or truncated gzip)") and scope == "file"
    assert (
        sorted(taken) == list(range(1, len(taken) + 1)) and place == f"line {len(taken) + 1}" and raw is None
    )


def test_under_raise_the_first_error_is_the_one_the_reference_raises(tmp_path):
    lines = [line(), PYTHON["unquoted 扩展字段"], REJECTED["not JSON"], REJECTED["no 问 nor 答"]]
    path = write_lines(tmp_path / "m.jsonl", lines)
    shard = shard_of([path])
    with pytest.raises(SourceError) as ours:
        list(MnbvcBuilder().keyed_batches(shard, 0))
    with pytest.raises(SourceError) as reference:
        list(MnbvcBuilder().keyed_rows(shard, 0))
    assert str(ours.value) == str(reference.value) and ours.value.record == "line 3"
