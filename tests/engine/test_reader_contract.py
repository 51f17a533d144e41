"""The reader contract (``convhub.engine.readers.contract``): readers give each raw record with its place, and a
source that names its ``READER``, ``CONVERT`` and ``ID_FIELD`` gets the whole parse path from the engine."""

from __future__ import annotations

import gzip
import json
from typing import ClassVar

import pytest

from convhub.builder import ConversationBuilder
from convhub.engine.readers.contract import Place
from convhub.engine.readers.json_lines import JsonLines
from convhub.engine.readers.json_list import JsonList
from convhub.errors import FieldError, Notes, SourceError

ELEMENTS = [{"id": "a", "text": "x"}, {"text": "no id"}, {"id": "", "text": "é"}]


def test_a_json_list_gives_each_element_its_position_its_bytes_and_its_name(tmp_path):
    data = json.dumps(ELEMENTS, ensure_ascii=False).encode()
    path = tmp_path / "part.json"
    path.write_bytes(data)
    read = list(JsonList("item", "id", names_by_id=True).read({"path": str(path), "name": "listed.json"}))
    assert [value for _, value in read] == ELEMENTS
    assert [place.record for place, _ in read] == ["a", 1, 2]  # by id where a non-empty string, else position
    assert [place.position for place, _ in read] == [0, 1, 2]
    assert {(place.file, place.name) for place, _ in read} == {(str(path), "listed.json")}
    for place, value in read:
        assert place.start is not None and place.end is not None
        assert json.loads(data[place.start : place.end]) == value
    positions = [place.record for place, _ in JsonList("item", "id").read(str(path))]
    assert positions == [0, 1, 2]
    assert next(JsonList("item", "id").read(str(path)))[0].name == "part.json"


def test_a_file_whose_first_element_is_not_the_sources_is_refused_whole(tmp_path):
    path = tmp_path / "other.json"
    path.write_text(json.dumps([{"sample_id": "conv-1"}, {"id": "b"}]), encoding="utf-8")
    reader = JsonList("item", "id", recognize=lambda value: None if "id" in value else "not ours")
    with pytest.raises(SourceError, match="not ours"):
        list(reader.read(str(path)))
    rejected = []
    assert list(reader.read(str(path), lambda *args, **kwargs: rejected.append(args))) == []
    [(error, head, scope)] = rejected
    assert (str(error), scope) == (f"{path}: not ours", "file")
    assert head.head == path.read_bytes()


def test_json_lines_give_each_row_its_line_and_offset_plain_or_gzipped(tmp_path):
    lines = b'{"id": 1}\n\n{"id": 2}\n'
    for name, data in (("rows.jsonl", lines), ("rows.jsonl.gz", gzip.compress(lines))):
        path = tmp_path / name
        path.write_bytes(data)
        read = list(JsonLines("Tiny").read(str(path)))
        assert [(place.record, place.line, place.start, place.name, row) for place, row in read] == [
            ("line 1", 1, 0, name, {"id": 1}),
            ("line 3", 3, 11, name, {"id": 2}),
        ]


def test_a_json_lines_line_that_is_no_object_is_rejected_by_its_line(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'{"id": 1}\n[1]\n{"id": 3}\n')
    rejected = []
    read = list(
        JsonLines("Tiny").read(str(path), lambda error, raw=None, *rest, **kw: rejected.append(error))
    )
    assert [row["id"] for _, row in read] == [1, 3]
    assert [(error.record, error.problem) for error in rejected] == [
        ("line 2", "expected a JSON object, got list")
    ]


def convert_row(raw: dict, place: Place, notes: Notes) -> dict:
    """A record of a one-turn conversation, its subset the file's stem and its id the row's."""
    if not isinstance(raw.get("text"), str):
        raise FieldError("text", "expected a string")
    subset = place.name.removesuffix(".jsonl")
    return {"conversation_id": f"{subset}:{raw['id']}", "subset": subset, "line": place.line}


class TinyBuilder(ConversationBuilder):
    """A source that declares its reader, conversion and id, and writes no parse path."""

    SOURCE = "tiny"
    HUB_NAME = "tiny-unified"
    PRETTY_NAME = "Tiny"
    LICENSE = "mit"
    LANGUAGES = ("en",)
    HOMEPAGE = "https://example.org"
    CITATION = ""
    DESCRIPTION = "A test source."
    ROLE_MAPPING: ClassVar[dict[str, str]] = {}
    READER = JsonLines("Tiny")
    CONVERT = staticmethod(convert_row)
    ID_FIELD = "id"


def test_a_source_that_names_its_reader_gets_the_engines_parse_path(tmp_path):
    path = tmp_path / "chat.jsonl"
    rows = [{"id": "a", "text": "hi"}, {"id": "b"}, {"id": "a", "text": "again"}, {"id": "c", "text": "yo"}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    builder = TinyBuilder(config_name="sessions", cache_dir=str(tmp_path / "cache"))
    with pytest.raises(SourceError) as raised:
        list(builder.parse_shard({"path": str(path), "name": "chat.jsonl"}, Notes()))
    assert str(raised.value) == f"{path}, record line 2, field 'text': expected a string"
    (tmp_path / "quarantine").mkdir()
    builder = TinyBuilder(
        config_name="sessions",
        cache_dir=str(tmp_path / "cache"),
        on_bad_record="skip",
        quarantine_dir=str(tmp_path / "quarantine"),
    )
    records = list(builder.parse_shard({"path": str(path), "name": "chat.jsonl"}, Notes()))
    assert records == [
        {"conversation_id": "chat:a", "subset": "chat", "line": 1},
        {"conversation_id": "chat:c", "subset": "chat", "line": 4},
    ]
    quarantined = [
        json.loads(line)
        for file in (tmp_path / "quarantine").iterdir()
        for line in file.read_text(encoding="utf-8").splitlines()
    ]
    assert [(entry["record"], entry["field"]) for entry in quarantined] == [
        ("line 2", "text"),
        ("line 3", "id"),
    ]
    assert quarantined[1]["reason"] == f"duplicate id 'a', also in {path}, record line 1"
    assert [entry["raw"] for entry in quarantined] == ['{"id": "b"}', '{"id": "a", "text": "again"}']
