"""Dataset cards: YAML generated from the build, body rendered from ``dataset_cards/<source>.md``.

The YAML header (configs, dataset_info) is produced with ``datasets``' own ``MetadataConfigs`` and
``DatasetInfosDict`` so that ``load_dataset`` and the Hub read it exactly as they read any card; the
statistics and normalization counts come from the same parse as the build, never typed by hand.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import jinja2
from datasets import DatasetInfo, SplitDict, SplitInfo
from datasets.info import DatasetInfosDict
from datasets.utils.metadata import MetadataConfigs
from huggingface_hub import DatasetCard, DatasetCardData

from builders import registry
from builders.stats import markdown_table
from builders.views import DEFAULT_VIEW

NON_COMMERCIAL = re.compile(r"(^|[-_ ])(nc|noncommercial|non-commercial)([-_ ]|$)", re.IGNORECASE)
TASK_CATEGORIES = ["text-generation", "question-answering"]
TAGS = ["conversational", "dialogue", "long-term-memory", "convhub"]


def is_non_commercial(license_id: str) -> bool:
    """cc-by-nc-4.0, cc-by-nc-sa-4.0, "non-commercial"...: licenses that push and mix warn about."""
    return bool(NON_COMMERCIAL.search(license_id))


def templates_dir() -> Path:
    """``dataset_cards/`` of a checkout, or its copy inside the installed package."""
    checkout = Path(__file__).resolve().parent.parent / "dataset_cards"
    if checkout.is_dir():
        return checkout
    return Path(str(resources.files("builders") / "dataset_cards"))


def size_category(rows: int) -> str:
    limits = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"))
    for limit, name in limits:
        if rows < limit:
            return name
    return "1M<n<10M" if rows < 10_000_000 else "10M<n<100M"


def card_data(result, folder: Path | None = None) -> DatasetCardData:
    """The card's YAML. With the built ``folder``, each config's ``download_size`` is its Parquet bytes: what
    a user downloads, and what makes ``datasets``' cache key for a local folder change when its data
    changes (that key hashes the YAML, not the files, so a rebuild would otherwise load stale rows)."""
    builder_cls = registry.get(result.source)
    data = DatasetCardData(
        pretty_name=builder_cls.PRETTY_NAME,
        license=builder_cls.LICENSE,
        language=list(builder_cls.LANGUAGES),
        task_categories=TASK_CATEGORIES,
        size_categories=size_category(result.statistics.total().turns),
        tags=[*TAGS, result.source],
    )
    parts = [part for built in result.configs.values() for part in (built, *built.subsets.values())]
    add_configs(data, parts, DEFAULT_VIEW, folder)
    return data


def add_configs(data: DatasetCardData, parts, default: str, folder: Path | None = None) -> None:
    """``configs`` (data_files per split, ``default`` marked) and ``dataset_info`` of built configs."""
    configs = {}
    infos = {}
    for part in parts:
        configs[part.name] = {
            "data_files": _data_files(part),
            **({"default": True} if part.name == default else {}),
        }
        infos[part.name] = DatasetInfo(
            config_name=part.name,
            features=part.features,
            splits=_split_dict(part.splits),
            dataset_size=sum(info.num_bytes for info in part.splits.values()),
            download_size=_parquet_bytes(folder, part) if folder else None,
        )
    MetadataConfigs(configs).to_dataset_card_data(data)
    DatasetInfosDict(infos).to_dataset_card_data(data)


def _parquet_bytes(folder: Path, built) -> int:
    return sum((folder / path).stat().st_size for files in built.files.values() for path in files)


def _data_files(built) -> list[dict]:
    """``<config>/<split>-*`` per split, or the split's explicit file list when they live elsewhere
    (a config split by subset keeps its files under ``<config>/<subset>/``)."""
    entries = []
    for split, files in built.files.items():
        flat = all(path.startswith(f"{built.name}/{split}-") and path.count("/") == 1 for path in files)
        entries.append({"split": split, "path": f"{built.name}/{split}-*" if flat else files})
    return entries


def _split_dict(splits: dict) -> SplitDict:
    """Split infos without the builder's internal dataset name, as a card's dataset_info lists them."""
    return SplitDict({split: SplitInfo(split, i.num_bytes, i.num_examples) for split, i in splits.items()})


def template(name: str) -> jinja2.Template:
    """A card template from ``dataset_cards/`` (which may import ``_shared.md``)."""
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates_dir()),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    return environment.get_template(name)


def render_body(result, repo_id: str | None = None) -> str:
    builder_cls = registry.get(result.source)
    return template(f"{result.source}.md").render(
        builder=builder_cls,
        repo_id=repo_id or f"ORG/{builder_cls.HUB_NAME}",
        configs=result.configs,
        default_config=DEFAULT_VIEW,
        views={view.name: view for view in builder_cls.views()},
        statistics_table=markdown_table(result.statistics.table()),
        statistics=result.statistics,
        notes=result.notes.as_sorted_list(),
    )


def write_card(result, folder: Path, repo_id: str | None = None) -> DatasetCard:
    data = card_data(result, folder)
    card = DatasetCard(f"---\n{data.to_yaml()}\n---\n\n{render_body(result, repo_id)}")
    card.save(folder / "README.md")
    return card
