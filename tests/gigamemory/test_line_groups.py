"""GigaMemory's two-pass grouping of JSON Lines lines by a key (``convhub.builders.gigamemory.line_groups``):
groups in order of first appearance, rejected lines named by file and line, shards of groups, each group's first
line read again, and a large value's key as the digest of its JSON."""

from __future__ import annotations

import hashlib
import json

import pytest

from convhub.builders.gigamemory import line_groups
from convhub.errors import FieldError, Notes, SourceError

ROWS = [{"id": 1, "text": "один"}, {"id": 2, "text": "два"}, {"id": 3, "text": "один"}]


def write(path, rows):
    path.write_bytes("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode())
    return path


def test_lines_grouped_by_key_in_two_passes(tmp_path):
    path = write(tmp_path / "rows.jsonl", [*ROWS, {"text": "без id"}])

    def key_of(number, value):
        if "id" not in value:
            raise FieldError("id", "missing")
        return line_groups.canonical_digest(value["text"]), value["id"]

    rejected = []
    groups, notes = line_groups.index_groups(
        str(path),
        "Test",
        key_of,
        reject=lambda error, raw, *rest: rejected.append(str(error)),
        joined_note="joined",
    )
    assert [group.kept for group in groups] == [[1, 3], [2]] and notes == {"joined": 1}
    assert rejected == [f"{path}, record line 4, field 'id': missing"]
    shards = line_groups.group_shards(groups, notes, 1, str(path), subset="rows")
    assert [len(shard["groups"]) for shard in shards] == [1, 1] and shards[1]["subset"] == "rows"
    counted = Notes()
    firsts = [json.loads(raw) for shard in shards for _, raw in line_groups.first_lines(shard, counted)]
    assert firsts == ROWS[:2] and counted == {"joined": 1}
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"\n")
    with pytest.raises(SourceError, match="no records: the file is empty"):
        line_groups.index_groups(str(empty), "Test", key_of)


def test_canonical_digest_is_that_of_json_dumps():
    for value in [ROWS, {"big": 2**70, "float": 1e16, "nan": float("nan")}, ["\ud800"]]:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
        assert line_groups.canonical_digest(value) == hashlib.sha256(text).hexdigest()
