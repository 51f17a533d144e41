"""Fixtures for ``convhub mix``'s tests: small source folders written here (Parquet with the shared ``messages``
features and a card carrying a license), so that every expectation is computed from rows the test chose.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import datasets
import pytest
from datasets.info import DatasetInfosDict
from datasets.utils.metadata import MetadataConfigs
from huggingface_hub import DatasetCard, DatasetCardData

from convhub import mix, schema


@pytest.fixture(autouse=True)
def short_arrow_shutdown_pause(monkeypatch):
    """Streamed Parquet pauses 5 s at the end of each interleaved pass (datasets' workaround for
    apache/arrow#45214, for remote reads); local files need far less."""
    monkeypatch.setattr(datasets.config, "SLEEP_TIME_ON_THREADS_SHUTDOWN", 0.1)


def conversation(conversation_id: str, texts: list[str], source="demo", subset="s1", language="en") -> dict:
    roles = ["user", "assistant"]
    return {
        "conversation_id": conversation_id,
        "source": source,
        "subset": subset,
        "language": language,
        "session_id": "session_1",
        "session_index": 0,
        "messages": [{"role": roles[i % 2], "content": text} for i, text in enumerate(texts)],
    }


def write_source(folder: Path, rows: list[dict], license: str = "apache-2.0", split: str = "train") -> Path:
    """A build folder as ``convhub build`` writes one: ``messages/<split>-…parquet`` and a card with configs."""
    (folder / "messages").mkdir(parents=True)
    dataset = datasets.Dataset.from_list(rows, features=schema.MESSAGES_FEATURES)
    dataset.to_parquet(folder / "messages" / f"{split}-00000-of-00001.parquet")
    data = DatasetCardData(
        license=license, language=sorted({row["language"] for row in rows}), pretty_name=folder.name
    )
    MetadataConfigs(
        {"messages": {"data_files": [{"split": split, "path": f"messages/{split}-*"}], "default": True}}
    ).to_dataset_card_data(data)
    splits = datasets.SplitDict({split: datasets.SplitInfo(split, dataset.data.nbytes, len(dataset))})
    info = datasets.DatasetInfo(config_name="messages", features=dataset.features, splits=splits)
    DatasetInfosDict({"messages": info}).to_dataset_card_data(data)
    DatasetCard(f"---\n{data.to_yaml()}\n---\n\n# {folder.name}\n").save(folder / "README.md")
    return folder


def numbered(prefix: str, count: int, words: int = 3, **ids) -> list[dict]:
    """``count`` distinct conversations of two turns, ``words`` words each: 2*words tokens per row."""
    return [
        conversation(
            f"{prefix}-{i}", [" ".join([f"{prefix}{i}q"] * words), " ".join([f"{prefix}{i}a"] * words)], **ids
        )
        for i in range(count)
    ]


def recipe(tmp_path: Path, text: str) -> mix.Recipe:
    path = tmp_path / "recipe.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return mix.load_recipe(path)


def ids(dataset) -> list[str]:
    return [row["conversation_id"] for row in dataset]
