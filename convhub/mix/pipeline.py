"""The mixing pipeline on ``Dataset`` or ``IterableDataset``: load, filter, budget, interleave, dedup, shuffle."""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import datasets
import numpy as np
from datasets import Dataset, Features, IterableDataset
from datasets.data_files import DataFilesDict, sanitize_patterns
from huggingface_hub import DatasetCard, constants
from huggingface_hub.errors import HfHubHTTPError

from convhub.cards import is_non_commercial
from convhub.console import phases
from convhub.mix.recipe import CONFIG_FEATURES, Budget, Recipe, RecipeError, SourceEntry, load_recipe
from convhub.mix.rows import (
    PROVENANCE,
    PROVENANCE_COLUMNS,
    Deduplicator,
    TokenizerCount,
    add_provenance,
    chat_passes,
    passes_filters,
    recast_chat,
    truncate_row,
    whitespace_tokens,
)
from convhub.publish.hub_client import HubUnreachable, reach_repo
from convhub.publish.hub_errors import redact
from convhub.storage.folders import Folder, configs_of_card, parquet_file, read_card, text_of
from convhub.storage.staging import unfinished_build

logger = logging.getLogger(__name__)

#: Licenses that forbid commercial use: Creative Commons "NC" variants and the like.
UNKNOWN_LICENSES = {"unknown", "other", "none", ""}


@dataclass
class SourceReport:
    """What became of one recipe entry; counts are None where streaming cannot know them."""

    entry: SourceEntry
    license: str
    pretty_name: str | None
    languages: list[str]
    rows_loaded: int | None = None
    rows_after_filters: int | None = None
    rows_after_budget: int | None = None
    duplicates_removed: int = 0
    rows: int = 0
    #: Rows counted once however often they are in the mixture (``repeat``, oversampling).
    distinct_rows: int = 0
    tokens: int = 0
    characters: int = 0
    #: Rows per ``language`` as the mixed rows carry it (not the source card's declared list).
    languages_found: Counter = field(default_factory=Counter)
    #: Rows and conversations held out for the eval split.
    eval_rows: int = 0
    eval_conversations: int = 0
    #: Rows over the source's ``max_tokens``: dropped, and truncated to fit.
    over_length_dropped: int = 0
    over_length_truncated: int = 0

    @property
    def non_commercial(self) -> bool:
        return is_non_commercial(self.license)

    @property
    def license_unknown(self) -> bool:
        return self.license.lower() in UNKNOWN_LICENSES


def check_repo(entry: SourceEntry, repo: str, index: int) -> None:
    """A Hub source's ``repo`` (and revision) asked for once, before anything else reads it (``reach_repo``): an
    unreachable Hub is one error naming the endpoint at once, a missing repo or revision names its key."""
    try:
        reach_repo(repo, revision=entry.revision)
    except HubUnreachable as error:
        raise RecipeError(f"sources[{index}].repo", f"{error} (reading {entry.repo})") from error
    except HfHubHTTPError as error:
        key = (
            "revision"
            if entry.revision is not None and "revision" in type(error).__name__.lower()
            else "repo"
        )
        raise RecipeError(
            f"sources[{index}].{key}",
            f"cannot read {entry.repo} on {constants.ENDPOINT}: {redact(str(error))}",
        ) from error


def source_card(entry: SourceEntry) -> DatasetCard | None:
    """The source's own dataset card (local README.md or the Hub repo's), or None when it has none."""
    if entry.path is not None:
        readme = entry.path / "README.md"
        return read_card(readme) if readme.is_file() else None
    if entry.repo is None:  # (a source is a path or a repo: recipe._source)
        return None
    try:
        return DatasetCard.load(entry.repo, repo_type="dataset")
    except Exception as error:  # a repo with no card still mixes; the card says "unknown"
        logger.warning("no dataset card for %s: %s", entry.repo, redact(str(error)))
        return None


def describe_source(entry: SourceEntry) -> SourceReport:
    card = source_card(entry)
    data = card.data if card is not None else None
    license_value = getattr(data, "license", None) or "unknown"
    if isinstance(license_value, list):
        license_value = ", ".join(license_value)
    languages = getattr(data, "language", None) or []
    return SourceReport(
        entry=entry,
        license=str(license_value),
        pretty_name=getattr(data, "pretty_name", None),
        languages=[languages] if isinstance(languages, str) else list(languages),
    )


def load_source(
    entry: SourceEntry, index: int, features: Features, streaming: bool
) -> Dataset | IterableDataset:
    """The entry's split(s) of its config, checked against the shared features."""
    parts: list[Dataset | IterableDataset] = []
    local_files = _local_data_files(entry.path, entry, index) if entry.path is not None else {}
    for split in entry.splits:
        try:
            if entry.repo is not None:
                loaded = _load_split(entry.repo, entry.config, split, streaming, revision=entry.revision)
            elif split not in local_files:
                raise ValueError(f'Unknown split "{split}". Should be one of {sorted(local_files)}.')
            else:
                loaded = _load_split(
                    "parquet", None, split, streaming, data_files={split: local_files[split]}
                )
        except (ValueError, FileNotFoundError) as error:
            raise RecipeError(
                f"sources[{index}]", f"cannot load {entry.location} ({entry.config}/{split}): {error}"
            ) from error
        parts.append(loaded)
    dataset = parts[0] if len(parts) == 1 else _concatenated(parts)
    if dataset.features is not None and dataset.features != features:
        raise RecipeError(
            f"sources[{index}].config",
            f"{entry.location} config {entry.config!r} does not have the recipe's shared features "
            f"(rebuild it with this convhub): {dataset.features}",
        )
    return dataset


def _load_split(
    path: str, name: str | None, split: str, streaming: bool, **options: Any
) -> Dataset | IterableDataset:
    """``datasets.load_dataset`` of one split: an ``IterableDataset`` streamed, else a ``Dataset``."""
    if streaming:
        return datasets.load_dataset(path, name, split=split, streaming=True, **options)
    return datasets.load_dataset(path, name, split=split, **options)


def _local_data_files(folder: Folder, entry: SourceEntry, index: int) -> dict[str, list[str]]:
    """Split → Parquet files of a local build folder's config, resolved from its card like ``load_dataset``.

    The folder is read as plain Parquet files rather than ``load_dataset(folder)``: ``datasets`` keys the
    cache of a folder with a card by the folder's name and YAML only, so a rebuilt folder (or another folder
    of the same name) would load stale rows; the ``parquet`` loader keys it by the files and their mtimes.
    """
    readme = folder / "README.md"
    if not readme.is_file():
        raise RecipeError(f"sources[{index}].path", f"{entry.location} is not a build folder (no README.md)")
    configs = configs_of_card(read_card(readme))
    if entry.config not in configs:
        raise RecipeError(
            f"sources[{index}].config",
            f"{entry.path} has no config {entry.config!r}; it has {sorted(configs)}",
        )
    patterns = sanitize_patterns(configs[entry.config]["data_files"])
    resolved = DataFilesDict.from_patterns(patterns, base_path=text_of(folder))
    return {split: list(files) for split, files in resolved.items()}


class Mixer:
    """Runs a recipe's pipeline; keeps the per-source reports and the deduplicator's counts."""

    def __init__(self, recipe: Recipe, streaming: bool = False):
        self.recipe = recipe
        self.streaming = streaming
        self.features = CONFIG_FEATURES[recipe.config]
        self.with_provenance = Features({**self.features, **PROVENANCE})
        for index, entry in enumerate(recipe.sources):
            if entry.repo is not None:
                check_repo(entry, entry.repo, index)
            elif entry.path is not None and (unfinished := unfinished_build(entry.path)) is not None:
                raise RecipeError(f"sources[{index}].path", unfinished)
        self.reports = [describe_source(entry) for entry in recipe.sources]
        self.deduplicator = Deduplicator()
        #: Each source's held-out rows (with provenance), kept apart by conversation from its training rows.
        self.held_out: list = []
        self.count = TokenizerCount(recipe.tokenizer) if recipe.tokenizer else whitespace_tokens

    def mixture(self, provenance: bool = False) -> Dataset | IterableDataset:
        sources = self.recipe.sources
        prepared = [self._prepare(index, entry) for index, entry in enumerate(sources)]
        # before the repeats are made (a repeat's index costs 8 bytes a row) and before any row is mixed
        counted = [self._known_rows(index, dataset) for index, dataset in enumerate(prepared)]
        distinct = [rows for rows in counted if rows is not None]
        if len(distinct) == len(counted):
            lengths = [rows * entry.repeat for rows, entry in zip(distinct, sources, strict=True)]
            planned = check_planned_rows(self.recipe, lengths, self.reports, distinct)
            phases.info(
                "%s: mixing about %s rows of %s distinct%s",
                self.recipe.name,
                f"{planned:,}",
                f"{sum(distinct):,}",
                ""
                if self.streaming
                else f" (about {_arrow_bytes(prepared, lengths) / 1e6:,.0f} MB in Arrow)",
            )
        # the same rows again (same entry and position: deduplication keeps them)
        prepared = [
            _repeated(dataset, entry.repeat) if entry.repeat > 1 else dataset
            for dataset, entry in zip(prepared, sources, strict=True)
        ]
        mixed = _interleaved(prepared, self.recipe) if self.recipe.interleaved else _concatenated(prepared)
        if self.recipe.deduplicate:
            mixed = self._deduplicate(mixed)
        if self.recipe.shuffle:
            mixed = (
                mixed.shuffle(seed=self.recipe.seed, buffer_size=self.recipe.shuffle_buffer)
                if isinstance(mixed, IterableDataset)
                else mixed.shuffle(seed=self.recipe.seed)
            )
        return mixed if provenance else mixed.remove_columns(PROVENANCE_COLUMNS)

    def _known_rows(self, index: int, dataset: Dataset | IterableDataset) -> int | None:
        """A prepared source's rows: its length map-style; streamed, its Parquet files' row counts where nothing
        drops rows on the way (a local build, no filter, budget, length limit or held-out split), else None."""
        if isinstance(dataset, Dataset):  # (map-style: not streaming)
            return len(dataset)
        entry = self.recipe.sources[index]
        if entry.path is None or not (entry.filters.is_empty() and entry.budget.is_empty()):
            return None
        if entry.max_tokens is not None or entry.eval is not None:
            return None
        files = _local_data_files(entry.path, entry, index)
        return sum(
            parquet_file(path).metadata.num_rows for split in entry.splits for path in files.get(split, ())
        )

    def _prepare(self, index: int, entry: SourceEntry) -> Dataset | IterableDataset:
        report = self.reports[index]
        dataset = load_source(entry, index, self.features, self.streaming)
        if entry.roles or entry.system is not None:
            dataset = dataset.map(
                recast_chat, input_columns=["messages"], fn_kwargs={"entry": entry}, features=self.features
            )
        dataset = dataset.map(
            add_provenance,
            batched=True,
            with_indices=True,
            fn_kwargs={"entry_index": index, "count": self.count},
            features=self.with_provenance,
        )
        if isinstance(dataset, Dataset):
            report.rows_loaded = len(dataset)
        if not entry.filters.is_empty():
            dataset = dataset.filter(
                passes_filters,
                batched=True,
                input_columns=["language", "subset", "_mix_turns"],
                fn_kwargs={"filters": entry.filters},
            )
        if entry.filters.chat:
            dataset = dataset.filter(
                chat_passes, input_columns=["messages"], fn_kwargs={"filters": entry.filters}
            )
        if entry.max_tokens is not None:
            dataset = self._within_length(dataset, entry.max_tokens, report)
        if entry.eval is not None:
            dataset = self._hold_out(dataset, entry, entry.eval, index)
        if isinstance(dataset, Dataset):
            report.rows_after_filters = len(dataset)
        if not entry.budget.is_empty():
            dataset = self._within_budget(dataset, entry.budget, self.recipe.seed + index)
        if isinstance(dataset, Dataset):
            report.rows_after_budget = len(dataset)
        # interleaving an empty source: datasets refuses map-style and streams on silently; say which and why
        if self.recipe.interleaved and _is_empty(dataset):
            raise RecipeError(
                f"sources[{index}]",
                f"{entry.name} has no rows left to interleave ({_known(report.rows_loaded)} loaded, "
                f"{_known(report.rows_after_filters)} after filters {entry.filters.describe()}, "
                "0 after the budget)",
            )
        return dataset

    def _within_length(self, dataset, limit: int, report: SourceReport):
        """Rows over ``limit`` tokens dropped, or truncated (the recipe's ``over_length``); counted when known."""
        over = dataset.filter(lambda tokens: tokens > limit, input_columns=["_mix_tokens"])
        kept = dataset.filter(lambda tokens: tokens <= limit, input_columns=["_mix_tokens"])
        if self.recipe.over_length == "drop":
            if not self.streaming:
                report.over_length_dropped = len(over)
            return kept
        truncated = over.map(
            truncate_row, fn_kwargs={"limit": limit, "count": self.count}, features=self.with_provenance
        )
        fitting = truncated.filter(lambda tokens: tokens > 0, input_columns=["_mix_tokens"])
        if not self.streaming:
            report.over_length_truncated = len(fitting)
            report.over_length_dropped = len(over) - len(fitting)
            order = np.argsort(
                np.concatenate([kept["_mix_position"], fitting["_mix_position"]]), kind="stable"
            )
            return datasets.concatenate_datasets([kept, fitting]).select(order)  # the source's order again
        return datasets.concatenate_datasets([kept, fitting])

    def _hold_out(self, dataset, entry: SourceEntry, share: float | int, index: int):
        """Set aside ``share`` (``entry.eval``) of the source's conversations (at random, the recipe's seed): every row of a
        held-out conversation goes to the eval split and none to training. Returns the training rows."""
        if self.streaming:
            raise RecipeError(
                f"sources[{index}].eval", "a held-out split needs the map-style mix (no --streaming)"
            )
        conversations = sorted(set(dataset.unique("conversation_id")))
        count = share if isinstance(share, int) else round(share * len(conversations))
        if not 0 < count < len(conversations):
            raise RecipeError(
                f"sources[{index}].eval",
                f"{entry.name} has {len(conversations)} conversations after filters: holding out {count} leaves "
                "one of the splits empty",
            )
        order = np.random.default_rng([self.recipe.seed, index]).permutation(len(conversations))
        held = {conversations[i] for i in order[:count]}
        in_eval = np.array([cid in held for cid in dataset["conversation_id"]], dtype=bool)
        self.held_out.append(dataset.select(np.flatnonzero(in_eval)))
        self.reports[index].eval_rows = int(in_eval.sum())
        self.reports[index].eval_conversations = count
        return dataset.select(np.flatnonzero(~in_eval))

    def held_out_rows(self) -> Dataset | None:
        """The eval split: every source's held-out rows, in recipe order (no budget, repeat or weights)."""
        return datasets.concatenate_datasets(self.held_out) if self.held_out else None

    def _within_budget(self, dataset, budget: Budget, seed: int):
        """Rows drawn at random (with the recipe's seed, per source) until the next would pass a limit, kept in
        the source's order: a budget samples the whole source, not its first conversations. In streaming the
        draw is from a shuffle buffer of ``shuffle_buffer`` rows, and reading stops at the budget."""
        if self.streaming:
            return IterableDataset.from_generator(
                _prefix_within_budget,
                features=self.with_provenance,
                gen_kwargs={
                    "rows": dataset.shuffle(seed=seed, buffer_size=self.recipe.shuffle_buffer),
                    "budget": budget,
                },
            )
        order = np.random.default_rng(seed).permutation(len(dataset))
        fits = np.ones(len(dataset), dtype=bool)
        for column, limit in (("_mix_tokens", budget.tokens), ("_mix_characters", budget.characters)):
            if limit is not None:
                totals = np.cumsum(np.asarray(dataset.with_format("numpy")[column])[order])
                fits &= totals <= limit
        stop = int(np.argmin(fits)) if not fits.all() else len(fits)
        return dataset.select(np.sort(order[:stop]))

    def _deduplicate(self, mixed):
        columns = ["_mix_entry", "_mix_position", "_mix_hash"]
        if self.streaming:
            return mixed.filter(self.deduplicator.keep, batched=True, input_columns=columns)
        keep = []
        for batch in mixed.select_columns(columns).iter(batch_size=10_000):
            keep.extend(self.deduplicator.keep(*(batch[name] for name in columns)))
        return mixed.select(np.flatnonzero(keep))


def _known(count: int | None) -> str:
    return "–" if count is None else f"{count:,}"


def _is_empty(dataset: Dataset | IterableDataset) -> bool:
    """No row: counted map-style; streamed, the first row is read (up to it: as far as the filters reject)."""
    if isinstance(dataset, Dataset):
        return len(dataset) == 0
    return next(iter(dataset.take(1)), None) is None


def _repeated(dataset: Dataset | IterableDataset, passes: int) -> Dataset | IterableDataset:
    """``passes`` passes over the rows. ``IterableDataset.repeat`` streams them again; ``Dataset.repeat``
    concatenates one table per pass (20,000 passes of 2 rows cost about a gigabyte), so map-style the
    passes are one index of the rows, tiled: its cost is per row."""
    if isinstance(dataset, IterableDataset):
        return dataset.repeat(passes)
    return dataset.select(np.tile(np.arange(len(dataset), dtype=np.int64), passes))


def _arrow_bytes(prepared: list[Dataset | IterableDataset], lengths: list[int]) -> float:
    """About the Arrow bytes of ``lengths`` rows of each prepared source, at its table's bytes per row (the
    map-style ones: a streamed source has no table)."""
    return sum(
        dataset.data.nbytes / max(len(dataset.data), 1) * length
        for dataset, length in zip(prepared, lengths, strict=True)
        if isinstance(dataset, Dataset)
    )


def _of_one_kind(parts: list[Dataset | IterableDataset]) -> tuple[list[Dataset], list[IterableDataset]]:
    """The map-style parts and the streamed ones, of which one list is empty: ``datasets`` mixes one kind at a
    time, and every part of a mixture is of the mixture's kind (loaded with its ``streaming``)."""
    maps = [part for part in parts if isinstance(part, Dataset)]
    streams = [part for part in parts if isinstance(part, IterableDataset)]
    if maps and streams:
        raise TypeError("map-style and streamed datasets cannot be mixed")
    return maps, streams


def _concatenated(parts: list[Dataset | IterableDataset]) -> Dataset | IterableDataset:
    maps, streams = _of_one_kind(parts)
    return datasets.concatenate_datasets(maps) if maps else datasets.concatenate_datasets(streams)


def _interleaved(parts: list[Dataset | IterableDataset], recipe: Recipe) -> Dataset | IterableDataset:
    """The parts drawn at random with the recipe's probabilities, seed and stopping strategy."""
    probabilities, seed, strategy = recipe.probabilities, recipe.seed, recipe.stopping_strategy
    maps, streams = _of_one_kind(parts)
    if maps:
        return datasets.interleave_datasets(maps, probabilities, seed, stopping_strategy=strategy)
    return datasets.interleave_datasets(streams, probabilities, seed, stopping_strategy=strategy)


def check_planned_rows(
    recipe: Recipe, lengths: list[int], reports: list[SourceReport], distinct_rows: list[int]
) -> int:
    """The rows a mixture will have (about, under ``all_exhausted``), from its sources' ``distinct_rows`` and
    their ``lengths`` repeats included; refused, before interleaving, when that is more than its distinct rows
    and more than ``max_rows``, naming the key that makes most of them: a source's ``repeat``, or under
    ``all_exhausted`` the weight of the source that takes longest to use up (about its rows / its probability
    draws)."""
    distinct = sum(distinct_rows)
    passes = sum(lengths)  # every row of every source once, repeats included
    planned, slowest = passes, None
    probabilities = recipe.probabilities
    if probabilities is not None and recipe.stopping_strategy == "all_exhausted":
        draws = [length / p for length, p in zip(lengths, probabilities, strict=True)]
        slowest = int(np.argmax(draws))
        planned = max(passes, round(draws[slowest]))
    if planned <= max(distinct, recipe.max_rows):
        return planned
    repeated = [length - rows for length, rows in zip(lengths, distinct_rows, strict=True)]
    if slowest is not None and probabilities is not None and planned - passes > sum(repeated):
        entry = reports[slowest].entry
        name = "probability" if entry.probability is not None else "weight"
        key, fix = (
            f"sources[{slowest}].{name}",
            f"raise this {name}, or use first_exhausted or all_exhausted_without_replacement",
        )
        why = (
            f"all_exhausted draws until {entry.name} ({lengths[slowest]:,} rows, probability "
            f"{probabilities[slowest]:.3g}) is used up: about {planned:,} rows of {distinct:,} distinct"
        )
    else:
        index = int(np.argmax(repeated))
        entry = reports[index].entry
        key, fix = f"sources[{index}].repeat", "lower this repeat"
        why = f"{entry.name}'s repeat {entry.repeat:,} makes {lengths[index]:,} rows"
        why += f": {planned:,} rows of {distinct:,} distinct"
    raise RecipeError(key, f"{why}, past max_rows ({recipe.max_rows:,}); {fix} (or raise max_rows)")


def _prefix_within_budget(rows, budget: Budget) -> Iterator[dict]:
    tokens = characters = 0
    for row in rows:
        tokens += row["_mix_tokens"]
        characters += row["_mix_characters"]
        if (budget.tokens is not None and tokens > budget.tokens) or (
            budget.characters is not None and characters > budget.characters
        ):
            return
        yield row


def mixture(recipe: Recipe | str | os.PathLike, streaming: bool = False) -> Dataset | IterableDataset:
    """The mixed rows of a recipe (a ``Recipe`` or a recipe file), with the config's shared features."""
    if not isinstance(recipe, Recipe):
        recipe = load_recipe(recipe)
    return Mixer(recipe, streaming).mixture()
