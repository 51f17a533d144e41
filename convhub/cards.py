"""Dataset cards: YAML generated from the build, body rendered from ``dataset_cards/<source>.md``.

The YAML header (configs, dataset_info) is produced with ``datasets``' own ``MetadataConfigs`` and
``DatasetInfosDict`` so that ``load_dataset`` and the Hub read it exactly as they read any card; the
statistics and normalization counts come from the same parse as the build, never typed by hand.
"""

from __future__ import annotations

import json
import re
from importlib import metadata, resources
from pathlib import Path
from typing import Any

import jinja2
import pyarrow as pa
import pyarrow.parquet as pq
from datasets import DatasetInfo, SplitDict, SplitInfo
from datasets.info import DatasetInfosDict
from datasets.utils.metadata import MetadataConfigs
from huggingface_hub import DatasetCard, DatasetCardData

from convhub import registry
from convhub.engine.inputs import digests
from convhub.engine.runners.memory import LARGE_TABLE_BYTES
from convhub.stats import markdown_table
from convhub.storage.folders import Folder, parquet_file, relative_name, write_text
from convhub.views.definitions import DEFAULT_VIEW

NON_COMMERCIAL = re.compile(r"(^|[-_ ])(nc|noncommercial|non-commercial)([-_ ]|$)", re.IGNORECASE)
TAGS = ["conversational", "dialogue", "long-term-memory", "convhub"]
#: The Hub task a config serves; a card lists the tasks of the configs it has (no QA without ``qa``).
CONFIG_TASKS = {"messages": "text-generation", "turns": "text-generation", "qa": "question-answering"}
#: An example row shows this many characters of a string and items of a list.
EXAMPLE_CHARACTERS = 160
EXAMPLE_ITEMS = 3


def is_non_commercial(license_id: str) -> bool:
    """cc-by-nc-4.0, cc-by-nc-sa-4.0, "non-commercial"...: licenses that push and mix warn about."""
    return bool(NON_COMMERCIAL.search(license_id))


def templates_dir() -> Path:
    """``dataset_cards/`` of a checkout, or its copy inside the installed package."""
    checkout = Path(__file__).resolve().parent.parent / "dataset_cards"
    if checkout.is_dir():
        return checkout
    return Path(str(resources.files("convhub.dataset_cards")))


def size_categories(result) -> list[str]:
    """The Hub's size bucket of the largest config (rows), as the list the card metadata spec asks for."""
    largest = max(
        sum(info.num_examples for info in built.splits.values()) for built in result.configs.values()
    )
    return [size_category(largest)]


def size_category(rows: int) -> str:
    limits = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"))
    for limit, name in limits:
        if rows < limit:
            return name
    return "1M<n<10M" if rows < 10_000_000 else "10M<n<100M"


def card_data(result, folder: Folder | None = None) -> DatasetCardData:
    """The card's YAML. With the built ``folder``, each config's ``download_size`` is its Parquet bytes: what
    a user downloads, and what makes ``datasets``' cache key for a local folder change when its data
    changes (that key hashes the YAML, not the files, so a rebuild would otherwise load stale rows)."""
    builder_cls = registry.get(result.source)
    subsets = built_subsets(result)
    data = DatasetCardData(
        pretty_name=builder_cls.PRETTY_NAME,
        **builder_cls.card_license(subsets),
        language=languages(result),
        task_categories=sorted({CONFIG_TASKS[name] for name in result.configs if name in CONFIG_TASKS}),
        size_categories=size_categories(result),
        source_datasets=builder_cls.card_source_datasets(subsets),
        tags=[*TAGS, result.source],
    )
    parts = [part for built in result.configs.values() for part in (built, *built.subsets.values())]
    add_configs(data, parts, DEFAULT_VIEW, folder)
    for key, value in digests.card_yaml(getattr(result, "source_files", [])).items():
        data[key] = value  # each input file's name, bytes and sha256: convhub score reads them
    return data


def built_subsets(result) -> list[str]:
    """The subsets that have rows in this build, in order."""
    return sorted({subset for _, subset in result.statistics.by_split_subset})


def languages(result) -> list[str]:
    """The languages the rows carry (``language`` of each conversation), most conversations first."""
    counts = result.statistics.total().languages
    found = [language for language, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0]))]
    return [language for language in found if language] or list(registry.get(result.source).LANGUAGES)


def add_configs(data: DatasetCardData, parts, default: str, folder: Folder | None = None) -> None:
    """``configs`` (data_files per split, ``default`` marked) and ``dataset_info`` of built configs."""
    configs = {}
    infos = {}
    for part in parts:
        configs[part.name] = {
            "data_files": _data_files(part, folder),
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


def _parquet_bytes(folder: Folder, built) -> int:
    return sum((folder / path).stat().st_size for files in built.files.values() for path in files)


def _data_files(built, folder: Folder | None = None) -> list[dict]:
    """Per split, one pattern that matches exactly the split's files, else their explicit list.

    ``<config>/<split>-*`` for a flat config, ``<config>/<subset>/<split>-*`` for one subset and
    ``<config>/*/<split>-*`` for every subset together: the Hub's "use this dataset" snippets (pandas, polars)
    take a pattern whole but only the first file of a list. A pattern is used only where it matches exactly the
    files in ``folder`` (subset names never hold pattern characters: the builders refuse them).
    """
    entries = []
    for split, files in built.files.items():
        entries.append({"split": split, "path": _pattern(built.name, split, files, folder) or files})
    return entries


def _pattern(config: str, split: str, files: list[str], folder: Folder | None) -> str | None:
    parents = {path.rpartition("/")[0] for path in files}
    pattern = f"{next(iter(parents))}/{split}-*" if len(parents) == 1 else f"{config}/*/{split}-*"
    if folder is None:  # nothing to glob: only the flat layout, whose folder holds nothing else
        flat = parents == {config} and all(path.startswith(f"{config}/{split}-") for path in files)
        return pattern if flat else None
    matched = sorted(relative_name(path, folder) for path in folder.glob(pattern))
    return pattern if matched == sorted(files) else None


def _split_dict(splits: dict) -> SplitDict:
    """Split infos without the builder's internal dataset name, as a card's dataset_info lists them."""
    return SplitDict({split: SplitInfo(split, i.num_bytes, i.num_examples) for split, i in splits.items()})


def produced_by() -> str:
    """Who made the card: convhub and its version, linked to the home page its own metadata declares.

    A card credits only an address the project publishes (``[project.urls]`` in pyproject.toml), never a guessed
    one; with none declared it names convhub and its version alone.
    """
    try:
        info = metadata.metadata("convhub")
    except metadata.PackageNotFoundError:
        return "convhub"
    name = f"convhub {info['Version']}"
    urls = dict(entry.split(", ", 1) for entry in info.get_all("Project-URL") or [] if ", " in entry)
    home = next((urls[key] for key in ("Homepage", "Repository", "Source") if key in urls), None)
    return f"[{name}]({home})" if home else name


def template(name: str) -> jinja2.Template:
    """A card template from ``dataset_cards/`` (which may import ``_shared.md``)."""
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates_dir()),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    environment.globals["produced_by"] = produced_by()
    return environment.get_template(name)


def render_body(result, folder: Folder | None = None, repo_id: str | None = None) -> str:
    builder_cls = registry.get(result.source)
    repo_id = repo_id or f"ORG/{builder_cls.HUB_NAME}"
    body = template(f"{result.source}.md").render(
        builder=builder_cls,
        repo_id=repo_id,
        configs=result.configs,
        default_config=DEFAULT_VIEW,
        views={view.name: view for view in builder_cls.views()},
        statistics_table=markdown_table(result.statistics.table()),
        statistics=result.statistics,
        notes=result.notes.as_sorted_list(),
        examples=example_rows(folder, result.configs) if folder else {},
        subsets=built_subsets(result),
        license=builder_cls.card_license(built_subsets(result))["license"],
        licenses=builder_cls.subset_licenses(built_subsets(result)),
        source_files=getattr(result, "source_files", []),
        source_digests=digests,
    )
    return tidy(body) + repo_marker(repo_id)


def tidy(body: str) -> str:
    """No run of blank lines (template blocks leave some), and one newline at the end."""
    return re.sub(r"\n{3,}", "\n\n", body).strip() + "\n"


#: The last line of every card: the repo its code names, so that ``push`` can name the repo it pushes to.
REPO_MARKER = re.compile(r"^<!-- convhub: this card's code loads (\S+) -->$", re.MULTILINE)


def repo_marker(repo_id: str) -> str:
    return f"\n<!-- convhub: this card's code loads {repo_id} -->\n"


def for_repo(card_text: str, repo_id: str) -> str:
    """The card with its code loading ``repo_id``: every mention of the repo it was written for is replaced.

    Only the body: the YAML names no repo. A card without convhub's marker is returned as it is.
    """
    found = REPO_MARKER.search(card_text)
    if found is None or found.group(1) == repo_id:
        return card_text
    end = card_text.index("\n---", 3) + 4  # the YAML header's closing line
    return card_text[:end] + card_text[end:].replace(found.group(1), repo_id)


def example_rows(folder: Folder, configs: dict) -> dict[str, str]:
    """The first row of each config, shortened and as indented JSON: what a row looks like, at a glance.

    The first row of the first split's first file that has one: a derived view may have an empty file where a
    sessions file gave it no row, and how the rows are cut into files depends on the engine and ``num_proc``."""
    examples = {}
    for name, built in configs.items():
        split, files = next(iter(built.files.items()))
        for relative in files:
            parquet = parquet_file(folder / relative)
            if parquet.metadata.num_rows:
                row = shortened_first_row(parquet)
                examples[name] = (split, json.dumps(row, ensure_ascii=False, indent=2, default=str))
                break
    return examples


def shortened_first_row(parquet: pq.ParquetFile, budget: int | None = None) -> dict[str, Any]:
    """The first row of a ``pq.ParquetFile``, ``shortened``. A first row group of more than ``budget`` bytes
    (uncompressed; the engine's ``LARGE_TABLE_BYTES`` by default) is read one Parquet column (one leaf of the
    schema) at a time and merged, so that a very large row is never decoded whole: an MNBVC conversation of
    166,667 turns is a 58 MiB row, which took 187 MiB to read whole and 154 MiB for its largest column (the
    turns' ``extra``, 48 MiB), the peak of its build. A smaller one is read at once: one read, not one per leaf
    (a request each at a URL)."""
    row_group_bytes = parquet.metadata.row_group(0).total_byte_size
    if row_group_bytes <= (LARGE_TABLE_BYTES if budget is None else budget):
        first = next(parquet.iter_batches(batch_size=1))
        return {name: shortened(first.column(name)[0]) for name in first.schema.names}
    row: dict[str, Any] = {}
    for index in range(parquet.metadata.num_columns):
        first = next(parquet.iter_batches(batch_size=1, columns=[parquet.schema.column(index).path]))
        for name in first.schema.names:
            part = shortened(first.column(name)[0])
            row[name] = merged(row[name], part) if name in row else part
    return row


def merged(old: Any, new: Any) -> Any:
    """Two shortened parts of one value, each read from other leaves: structs give their fields in the schema's
    order, lists (cut alike, their offsets being shared) their items, and anything else is the same in both."""
    if isinstance(old, dict) and isinstance(new, dict):
        return {**old, **{key: merged(old[key], part) if key in old else part for key, part in new.items()}}
    if isinstance(old, list) and isinstance(new, list):
        return [merged(before, part) for before, part in zip(old, new, strict=True)]
    return old


def shortened(scalar: pa.Scalar) -> Any:
    """``shorten`` of an Arrow value, made Python only for what the example keeps: a conversation of a million
    turns becomes three turn dicts, not a million (its Python objects would be several times its Parquet size)."""
    if isinstance(scalar, (pa.ListScalar, pa.LargeListScalar)):
        if not scalar.is_valid:
            return None
        values = scalar.values
        kept = [shortened(values[index]) for index in range(min(len(values), EXAMPLE_ITEMS))]
        return kept + ([f"… ({len(values) - EXAMPLE_ITEMS:,} more)"] if len(values) > EXAMPLE_ITEMS else [])
    if isinstance(scalar, pa.StructScalar):
        if not scalar.is_valid:
            return None
        return {field.name: shortened(scalar[field.name]) for field in scalar.type}
    return shorten(scalar.as_py())


def shorten(value: Any) -> Any:
    """Strings cut to ``EXAMPLE_CHARACTERS`` and lists to ``EXAMPLE_ITEMS`` items, each cut said as such."""
    if isinstance(value, str) and len(value) > EXAMPLE_CHARACTERS:
        return value[:EXAMPLE_CHARACTERS] + f"… ({len(value) - EXAMPLE_CHARACTERS:,} more characters)"
    if isinstance(value, list):
        kept = [shorten(item) for item in value[:EXAMPLE_ITEMS]]
        return kept + ([f"… ({len(value) - EXAMPLE_ITEMS:,} more)"] if len(value) > EXAMPLE_ITEMS else [])
    if isinstance(value, dict):
        return {key: shorten(item) for key, item in value.items()}
    return value


def write_card(result, folder: Folder, repo_id: str | None = None) -> DatasetCard:
    data = card_data(result, folder)
    card = DatasetCard(f"---\n{data.to_yaml()}\n---\n\n{render_body(result, folder, repo_id)}")
    write_text(folder / "README.md", str(card))  # DatasetCard.save, for a folder at a URL too
    return card
