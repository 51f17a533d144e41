"""Property-based tests: any valid record of a source survives build, ``load_dataset`` and ``convhub export``.

Hypothesis generates small, valid files in each source's own format (any Unicode text but lone
surrogates, integer or string ids where the format allows both, absent optional fields, shared GigaMemory
dialogues, every ConvLab split). Each example is built with ``build_source`` (the ``sessions`` config),
loaded back with ``load_dataset``, and exported with ``export_source``: the rows, ids and texts must be the
generated ones, and the exported files equal to the written ones as JSON values, types included.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import datasets
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from convhub.engine.build import build_source
from convhub.export.exporter import differences, export_source

EXAMPLES = settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

#: Any text a JSON file can hold as UTF-8: lone surrogates (category Cs) cannot be encoded.
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=24)
NAME = st.text(st.characters(exclude_categories=("Cs", "Cc")), min_size=1, max_size=8)
INT_ID = st.integers(min_value=-(2**53), max_value=2**53)


def run(source: str, files: dict[str, bytes]) -> tuple[dict[str, dict], dict[str, bytes]]:
    """Write ``files``, build, load the sessions config back, export: split → loaded columns, and the export."""
    with tempfile.TemporaryDirectory(prefix="convhub-property-") as scratch:
        root = Path(scratch)
        for name, content in files.items():
            (root / "data" / name).parent.mkdir(parents=True, exist_ok=True)
            (root / "data" / name).write_bytes(content)
        # a folder name of its own: datasets caches a local folder by its name and card, so a build of the
        # same name and byte sizes (another example) would load the earlier example's rows
        output = root / f"build-{root.name}"
        result = build_source(source, output, data_dir=str(root / "data"), configs=["sessions"])
        loaded = datasets.load_dataset(str(result.output), "sessions")
        columns = {split: dataset[:] for split, dataset in loaded.items()}
        export_source(source, result.output, root / "export")
        exported = {name: (root / "export" / name).read_bytes() for name in files}
    return columns, exported


def assert_same_json(original: Any, exported: Any) -> None:
    assert differences(original, exported) == []


def jsonl(values: list[Any]) -> bytes:
    return b"".join(json.dumps(value, ensure_ascii=False).encode() + b"\n" for value in values)


def jsonl_values(content: bytes) -> list[Any]:
    """JSON lines split on LF only (``str.splitlines`` would also split inside strings, at U+0085 or U+2028)."""
    return [json.loads(line) for line in content.split(b"\n") if line.strip()]


def turn_texts(columns: dict) -> list[list[str]]:
    return [
        [turn["text"] for session in sessions for turn in session["turns"]]
        for sessions in columns["sessions"]
    ]


# -- LoCoMo -----------------------------------------------------------------------------------------------


@st.composite
def locomo_samples(draw) -> list[dict]:
    samples = []
    for index in range(draw(st.integers(1, 3))):
        speakers = draw(st.lists(NAME, min_size=2, max_size=2, unique=True))
        conversation: dict[str, Any] = {"speaker_a": speakers[0], "speaker_b": speakers[1]}
        turn_ids = []
        for number in range(1, draw(st.integers(1, 3)) + 1):
            if draw(st.booleans()):
                conversation[f"session_{number}_date_time"] = draw(
                    st.sampled_from(["1:56 pm on 8 May, 2023", "10:04 am on 1 January, 2024", "sometime"])
                )
            turns = []
            for position in range(1, draw(st.integers(0, 3)) + 1):
                turn_ids.append(f"D{number}:{position}")
                turns.append(
                    {"speaker": draw(st.sampled_from(speakers)), "dia_id": turn_ids[-1], "text": draw(TEXT)}
                )
            conversation[f"session_{number}"] = turns
        questions = []
        for _ in range(draw(st.integers(0, 3))):
            qa: dict[str, Any] = {"question": draw(TEXT), "category": draw(st.integers(1, 4))}
            qa["answer"] = draw(st.one_of(TEXT, st.integers(0, 3000)))
            qa["evidence"] = (
                draw(st.lists(st.sampled_from(turn_ids), max_size=2, unique=True)) if turn_ids else []
            )
            questions.append(qa)
        samples.append({"sample_id": f"conv-{index}", "conversation": conversation, "qa": questions})
    return samples


@pytest.mark.slow
@EXAMPLES
@given(samples=locomo_samples())
def test_any_locomo_sample_survives_build_load_and_export(samples):
    splits, exported = run("locomo", {"locomo.json": json.dumps(samples, ensure_ascii=False).encode()})
    columns = splits["test"]
    assert columns["conversation_id"] == [sample["sample_id"] for sample in samples]
    assert turn_texts(columns) == [
        [
            turn["text"]
            for key, turns in sample["conversation"].items()
            if key.count("_") == 1 and key.startswith("session_")
            for turn in turns
        ]
        for sample in samples
    ]
    assert [[q["question"] for q in questions] for questions in columns["questions"]] == [
        [qa["question"] for qa in sample["qa"]] for sample in samples
    ]
    assert_same_json(samples, json.loads(exported["locomo.json"]))


# -- GigaMemory -------------------------------------------------------------------------------------------


@st.composite
def gigamemory_lines(draw) -> list[dict]:
    dialogues = []
    for _ in range(draw(st.integers(1, 2))):
        ids = draw(
            st.lists(
                st.one_of(st.integers(0, 50), st.text("abc", min_size=1, max_size=3)),
                min_size=1,
                max_size=3,
                unique_by=str,
            )
        )
        dialogues.append(
            [
                {
                    "id": session_id,
                    "messages": [
                        {"role": draw(st.sampled_from(["user", "assistant"])), "content": draw(TEXT)}
                        for _ in range(draw(st.integers(0, 3)))
                    ],
                }
                for session_id in ids
            ]
        )
    lines = []
    line_ids = draw(
        st.lists(
            st.one_of(INT_ID, st.text("xyz0123", min_size=1, max_size=4)),
            min_size=1,
            max_size=4,
            unique_by=str,
        )
    )
    for line_id in line_ids:
        sessions = draw(st.sampled_from(dialogues))  # lines may share one dialogue
        line: dict[str, Any] = {
            "id": line_id,
            "question": draw(TEXT),
            "ans": draw(st.one_of(TEXT, st.none())),
        }
        line["question_type"] = draw(st.sampled_from(["fact_equal_session", "no_info", "info_updating"]))
        line["sessions"] = sessions
        line["ans_session_ids"] = [s["id"] for s in sessions[: draw(st.integers(0, len(sessions)))]]
        lines.append(line)
    return lines


@pytest.mark.slow
@EXAMPLES
@given(lines=gigamemory_lines())
def test_any_gigamemory_file_survives_build_load_and_export(lines):
    splits, exported = run("gigamemory", {"dialogues.jsonl": jsonl(lines)})
    columns = splits["test"]
    questions = sorted(
        (q for qs in columns["questions"] for q in qs), key=lambda q: json.loads(q["extra"])["line"]
    )
    assert [q["question_id"] for q in questions] == [str(line["id"]) for line in lines]
    assert [q["question"] for q in questions] == [line["question"] for line in lines]
    assert [q["answer"] for q in questions] == [line["ans"] for line in lines]
    distinct = {json.dumps(line["sessions"]) for line in lines}
    assert len(columns["conversation_id"]) == len(distinct)
    texts = {json.dumps([m["content"] for s in line["sessions"] for m in s["messages"]]) for line in lines}
    assert {json.dumps(t) for t in turn_texts(columns)} == texts
    assert_same_json(lines, jsonl_values(exported["dialogues.jsonl"]))


# -- ConvLab ----------------------------------------------------------------------------------------------


@st.composite
def convlab_dialogues(draw) -> list[dict]:
    dialogues = []
    for split in ("train", "validation", "test"):  # the export writes split after split
        for index in range(draw(st.integers(0 if split != "train" else 1, 2))):
            turns = []
            for position in range(draw(st.integers(0, 4))):
                turn: dict[str, Any] = {
                    "speaker": "user" if position % 2 == 0 else "system",
                    "utterance": draw(TEXT),
                    "utt_idx": position,
                }
                if draw(st.booleans()):
                    turn["dialogue_acts"] = {"categorical": [], "non-categorical": [], "binary": []}
                if draw(st.booleans()):
                    turn["emotion"] = draw(TEXT)
                turns.append(turn)
            dialogue = {"dataset": "toy", "data_split": split, "dialogue_id": f"toy-{split}-{index}"}
            if draw(st.booleans()):
                dialogue["original_id"] = draw(st.one_of(INT_ID, TEXT))
            dialogue["turns"] = turns
            dialogues.append(dialogue)
    return dialogues


@pytest.mark.slow
@EXAMPLES
@given(dialogues=convlab_dialogues())
def test_any_convlab_dataset_survives_build_load_and_export(dialogues):
    name = "toy/data/dialogues.json"
    splits, exported = run("convlab", {name: json.dumps(dialogues, ensure_ascii=False).encode()})
    for split in ("train", "validation", "test"):
        dialogues_of_split = [d for d in dialogues if d["data_split"] == split]
        if not dialogues_of_split:
            assert split not in splits  # a split with no row is left out
            continue
        columns = splits[split]
        assert columns["conversation_id"] == [d["dialogue_id"] for d in dialogues_of_split]
        assert turn_texts(columns) == [[t["utterance"] for t in d["turns"]] for d in dialogues_of_split]
    assert_same_json(dialogues, json.loads(exported[name]))


# -- MNBVC ------------------------------------------------------------------------------------------------


@st.composite
def mnbvc_files(draw) -> dict[str, list[dict]]:
    rows = []
    for _ in range(draw(st.integers(1, 4))):
        row: dict[str, Any] = {"id": draw(st.one_of(INT_ID, TEXT)), "问": draw(TEXT), "答": draw(TEXT)}
        row["来源"] = draw(st.sampled_from(["wikihow", "知乎"]))
        if draw(st.booleans()):
            row["时间"] = draw(st.sampled_from(["20230517", "2023-05-17", "", "not a date"]))
        row["元数据"] = {"create_time": "20230517 06:47:18", "问题明细": draw(TEXT)}
        rows.append(row)
    threads = []
    for index in range(draw(st.integers(0, 2))):
        replies = [
            {
                "楼ID": str(floor + 1),
                "回复": draw(TEXT),
                "扩展字段": json.dumps({"回复人": draw(NAME)}, ensure_ascii=False),
            }
            for floor in range(draw(st.integers(0, 3)))
        ]
        threads.append(
            {
                "ID": index,
                "主题": draw(TEXT),
                "来源": "bbs",
                "回复": replies,
                "元数据": {"发帖时间": "20170924 13:53:31"},
            }
        )
    return {"qa.jsonl": rows, **({"forum.jsonl": threads} if threads else {})}


@pytest.mark.slow
@EXAMPLES
@given(files=mnbvc_files())
def test_any_mnbvc_rows_survive_build_load_and_export(files):
    splits, exported = run("mnbvc", {name: jsonl(rows) for name, rows in files.items()})
    columns = splits["train"]
    expected = {
        f"{name}:{line}": rows[line - 1] for name, rows in files.items() for line in range(1, len(rows) + 1)
    }
    assert sorted(columns["conversation_id"]) == sorted(expected)
    for conversation_id, texts in zip(columns["conversation_id"], turn_texts(columns), strict=True):
        row = expected[conversation_id]
        if "主题" in row:
            assert texts == [row["主题"], *(reply["回复"] for reply in row["回复"])]
        else:
            assert texts == [row["问"], *([row["答"]] if row["答"] else [])]
    for name, rows in files.items():
        assert_same_json(rows, jsonl_values(exported[name]))
