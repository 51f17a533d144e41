"""Shared by the export tests: what an export does not give back byte for byte (and the cards say), and the
helpers that compare an export with its source files as JSON values, types included."""

from __future__ import annotations

import gzip
import json
import zipfile
from pathlib import Path
from typing import Any

from convhub.engine.build import build_source
from convhub.export.exporter import differences, export_source
from convhub.storage.staging import MARKER

#: Everything ``convhub export`` does not give back byte for byte. In every case the JSON values are equal.
BYTE_DIFFERENCES = {
    "locomo": [
        "key order inside objects (locomo10.json writes img_url before or after dia_id; the export one order)",
    ],
    "gigamemory": [
        "CRLF line endings become LF",
        "a UTF-8 byte-order mark is dropped",
        "a whitespace-only line becomes an empty line",
        "a .jsonl.gz file is gzipped again (other gzip header and compression bytes, same content)",
    ],
    "convlab": [
        "key order inside objects (ConvLab's datasets order turn keys differently; the export one order)",
        "data.zip and dummy_data.json come back as a data/ folder: <subset>/data/dialogues.json",
        "JSON whitespace of database files (written with indent=2)",
    ],
    "mnbvc": [
        "CRLF line endings become LF",
        "a whitespace-only line becomes an empty line",
        "a .jsonl.gz file is gzipped again (other gzip header and compression bytes, same content)",
        "JSON whitespace inside a line (rows are written as json.dumps(row, ensure_ascii=False))",
    ],
}
#: Where an export is not equal as a JSON value, in inputs the real files do not have; each is asserted below.
VALUE_DIFFERENCES = {
    "convlab": [
        "dialogues.json is written split by split (train, validation, test, then others): a file that "
        "interleaves splits comes back grouped by split",
    ],
}
CARD_TEMPLATES = Path(__file__).resolve().parents[2] / "dataset_cards"


# -- helpers --------------------------------------------------------------------------------------------


def content(path: Path) -> bytes:
    """A file's bytes, gunzipped when it is gzip (recognized by its magic bytes, as the parsers do)."""
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def jsonl_values(path: Path) -> dict[int, Any]:
    """Line number → JSON value of every non-blank line (BOM and CRLF tolerated, as the parsers read them)."""
    text = content(path).decode("utf-8-sig")
    return {number: json.loads(line) for number, line in enumerate(text.split("\n"), 1) if line.strip()}


def assert_equal_values(original: Any, exported: Any, where: str) -> None:
    assert differences(original, exported) == [], where


def assert_jsonl_files_equal(original: Path, exported: Path) -> None:
    """Every row at its line number, equal as a JSON value; nothing more, nothing less."""
    before, after = jsonl_values(original), jsonl_values(exported)
    assert sorted(after) == sorted(before), exported
    for number, value in before.items():
        assert_equal_values(value, after[number], f"{exported} line {number}")


def export(source: str, build_folder: Path, output: Path) -> Path:
    result = export_source(source, build_folder, output)
    assert result.output == output and output.is_dir()
    assert not [p for p in output.parent.iterdir() if p.name.startswith(f".{output.name}.partial-")]
    return output


def build_and_export(source: str, data_dir: Path, tmp_path: Path, configs=("sessions",), **options) -> Path:
    build = build_source(source, tmp_path / "build", data_dir=str(data_dir), configs=list(configs), **options)
    return export(source, build.output, tmp_path / "export")


def source_files(folder: Path) -> list[Path]:
    return sorted(
        path for path in folder.rglob("*") if path.is_file() and path.suffix != ".py" and path.name != MARKER
    )


def zip_json(path: Path, member: str) -> Any:
    with zipfile.ZipFile(path) as archive:
        return json.loads(archive.read(member))


def assert_convlab_zip_equal(archive: Path, exported: Path) -> None:
    """Every JSON file of ``data.zip`` (dialogues, ontology, databases) comes back, equal as a JSON value."""
    with zipfile.ZipFile(archive) as source:
        members = sorted(m for m in source.namelist() if m.endswith(".json"))
    assert sorted(p.relative_to(exported).as_posix() for p in source_files(exported)) == members
    for member in members:
        assert_equal_values(zip_json(archive, member), json.loads((exported / member).read_bytes()), member)


#: A LoCoMo file with the quirks an export must give back (a float past 16 digits, null and empty image lists, a
#: key the format does not name).
LOCOMO_QUIRKS = [
    {
        "sample_id": "q-1",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1:00 pm on 1 May, 2023",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "hi", "img_url": None, "blip_caption": "a cat"},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "hey", "img_url": []},
                {
                    "speaker": "Ana",
                    "dia_id": "D1:3",
                    "text": "x",
                    "img_url": ["u1", "u2"],
                    "query": "q",
                    "mood": 1,
                },
            ],
            "session_2": [{"speaker": "Ben", "dia_id": "D2:1", "text": "no date for this session"}],
            "session_3_date_time": "a date with no session",
            "session_01": "not a session key",
        },
        "qa": [
            {"question": "float?", "answer": 1.2345678901234567, "evidence": "D1:1", "category": 1},
            {"question": "int adversarial?", "adversarial_answer": 7, "category": 5, "note": [1, 2.5, None]},
            {"question": "no evidence", "answer": "a", "category": 4, "evidence": ["D9:9", "D", "D01:02"]},
        ],
        "session_summary": {"session_1_summary": "s1", "session_9_summary": "no such session"},
        "event_summary": {},
        "release": {"version": 1.0},
    }
]
