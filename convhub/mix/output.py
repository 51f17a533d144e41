"""The Hub-ready folder of a mixture: Parquet shards, counts of what each step did, and its card."""

from __future__ import annotations

import math
import os
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import datasets
import pyarrow as pa
import yaml
from datasets import Dataset, IterableDataset
from datasets.exceptions import DatasetGenerationError
from datasets.utils.py_utils import convert_file_size_to_int
from huggingface_hub import DatasetCard, DatasetCardData

from convhub.cards import (
    CONFIG_TASKS,
    TAGS,
    add_configs,
    repo_marker,
    size_category,
    template,
    tidy,
)
from convhub.engine.writers.output_shards import shard_path
from convhub.engine.writers.parquet_writer import write_parquet
from convhub.mix.pipeline import Mixer, SourceReport
from convhub.mix.recipe import CONFIG_FEATURES, Recipe, RecipeError
from convhub.mix.rows import PROVENANCE_COLUMNS
from convhub.stats import markdown_table
from convhub.storage.folders import is_url, text_of
from convhub.storage.staging import check_output, staged_folder


@dataclass
class MixResult:
    recipe: Recipe
    output: Path
    rows: int
    num_bytes: int
    files: list[str]
    reports: list[SourceReport]
    streaming: bool
    #: The held-out split, when a source has ``eval``.
    eval_rows: int = 0
    eval_bytes: int = 0
    eval_files: list[str] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return sum(report.tokens for report in self.reports)

    @property
    def languages(self) -> list[str]:
        """The languages of the mixed rows, most rows first."""
        found = Counter()
        for report in self.reports:
            found.update(report.languages_found)
        return [
            language
            for language, _ in sorted(found.items(), key=lambda item: (-item[1], item[0]))
            if language
        ]

    def contamination_warnings(self) -> list[str]:
        """A benchmark's ``test`` split mixed into a split other than ``test``: results on it are no longer clean."""
        if self.recipe.output_split == "test":
            return []
        return [
            f"{report.entry.name}: its `test` split is in this mixture's `{self.recipe.output_split}` split: a model "
            "trained on it can no longer be evaluated on that benchmark"
            for report in self.reports
            if "test" in report.entry.splits and report.rows
        ]

    def warnings(self) -> list[str]:
        """License and contamination warnings, sources oversampled past their distinct rows, then sources that
        ended up with no rows."""
        empty = [report for report in self.reports if report.rows == 0]
        return (
            self.license_warnings()
            + self.contamination_warnings()
            + self.oversampling_warnings()
            + [
                f"{report.entry.name}: contributed no rows (filters, budget or stopping strategy)"
                for report in empty
            ]
        )

    def oversampling_warnings(self) -> list[str]:
        """Sources whose rows the mixture repeats beyond the recipe's ``repeat``: ``all_exhausted`` draws a small
        source again and again until the largest is used up, and deduplication keeps those repeats (the same
        row, not a copy), so a few conversations can fill much of the mixture unnoticed."""
        return [
            f"{report.entry.name}: oversampled: {report.rows:,} rows from {report.distinct_rows:,} distinct "
            f"({passes(report)} passes, {_share(report.rows, self.rows)} of the mixture) by stopping_strategy "
            f"{self.recipe.stopping_strategy}; lower its weight or use all_exhausted_without_replacement"
            for report in self.reports
            if report.rows > report.distinct_rows * report.entry.repeat
        ]

    def license_warnings(self) -> list[str]:
        """Non-commercial and unknown licenses: the card's warning box and ``convhub mix``'s stderr."""
        found = []
        for report in self.reports:
            if report.non_commercial:
                found.append(f"{report.entry.name}: license {report.license} does not allow commercial use")
            elif report.license_unknown:
                found.append(
                    f"{report.entry.name}: license {report.license}: check the source's terms before use"
                )
        return found


def passes(report: SourceReport) -> str:
    """How many times the mixture holds each of the source's distinct rows, on average: its ``repeat`` and the
    oversampling of ``all_exhausted`` together (one decimal unless whole)."""
    if not report.distinct_rows:
        return "0"
    value = report.rows / report.distinct_rows
    return f"{value:,.0f}" if value == int(value) else f"{value:,.1f}"


def write_mixture(
    recipe: Recipe,
    output: str | os.PathLike,
    streaming: bool = False,
    max_shard_size: str | int = "500MB",
    repo_id: str | None = None,
    overwrite: bool = False,
) -> MixResult:
    """Mix and write ``<config>/<split>-0000i-of-0000N.parquet`` + README.md into ``output``, atomically
    (a folder convhub did not write only with ``overwrite``; never one of the recipe's local sources)."""
    output = Path(output)
    inputs = [entry.path for entry in recipe.sources if entry.path is not None]
    check_output(output, overwrite, inputs)
    mixer = Mixer(recipe, streaming)
    with staged_folder(output, overwrite, inputs) as staging:
        with tempfile.TemporaryDirectory(prefix="convhub-mix-cache-") as cache_dir:
            mixed = mixer.mixture(provenance=True)
            if isinstance(
                mixed, IterableDataset
            ):  # streamed: materialize once, only what the mixture reads is fetched
                repeats = recipe.stopping_strategy == "all_exhausted" or any(
                    e.repeat > 1 for e in recipe.sources
                )
                bound = recipe.max_rows if repeats else None
                mixed = _materialized(mixed, mixer.with_provenance, bound, cache_dir)
            _count(mixed, mixer)
            (staging / recipe.config).mkdir()
            shard_bytes = convert_file_size_to_int(max_shard_size)
            files, num_bytes = _write_shards(
                mixed.remove_columns(PROVENANCE_COLUMNS), staging, recipe, recipe.output_split, shard_bytes
            )
            held_out = mixer.held_out_rows()
            result = MixResult(recipe, output, len(mixed), num_bytes, files, mixer.reports, streaming)
            if held_out is not None:
                result.eval_files, result.eval_bytes = _write_shards(
                    held_out.remove_columns(PROVENANCE_COLUMNS),
                    staging,
                    recipe,
                    recipe.eval_split,
                    shard_bytes,
                )
                result.eval_rows = len(held_out)
        write_mixture_card(result, staging, repo_id)
    return result


def _materialized(rows, features, max_rows: int | None, cache_dir: str) -> Dataset:
    """The streamed mixture written once to Arrow. A streamed source's length is unknown up front, so the bound
    the map-style mix checks before mixing is checked here as rows arrive: a recipe that repeats rows (a
    ``repeat``, or ``all_exhausted``) stops past ``max_rows`` rows with a ``RecipeError`` (``datasets`` wraps it;
    it is unwrapped); ``max_rows`` None: no bound."""
    try:
        return Dataset.from_generator(
            _iterate,
            features=features,
            gen_kwargs={"rows": rows, "max_rows": max_rows},
            cache_dir=cache_dir,
        )
    except DatasetGenerationError as error:
        cause = error.__cause__
        if isinstance(cause, RecipeError):
            raise cause from None
        raise


def _iterate(rows, max_rows: int | None) -> Iterator[dict]:
    for made, row in enumerate(rows, start=1):
        if max_rows is not None and made > max_rows:
            raise RecipeError(
                "max_rows",
                f"the streamed mixture repeats rows and passed {max_rows:,} rows; lower the sources' repeat or "
                "use first_exhausted or all_exhausted_without_replacement (or raise max_rows)",
            )
        yield row


def _count(mixed: Dataset, mixer: Mixer) -> None:
    """Rows, distinct rows, tokens, characters and languages per recipe entry, from the provenance columns in
    Arrow batches."""
    columns = ["_mix_entry", "_mix_position", "_mix_tokens", "_mix_characters", "language"]
    positions: dict[int, set[int]] = {}
    for rows in mixed.select_columns(columns).with_format("arrow").iter(batch_size=100_000):
        # (the "arrow" format makes each batch a pyarrow Table; datasets annotates iter's batches as dicts)
        # a batch gathered through the mixture's index is a chunk a row: Arrow's group-by took 5 s on one
        batch = cast(pa.Table, rows).combine_chunks()
        grouped = batch.group_by(["_mix_entry", "language"], use_threads=False).aggregate(
            [("_mix_entry", "count"), ("_mix_tokens", "sum"), ("_mix_characters", "sum")]
        )
        for row in grouped.to_pylist():
            report = mixer.reports[row["_mix_entry"]]
            report.rows += row["_mix_entry_count"]
            report.tokens += row["_mix_tokens_sum"]
            report.characters += row["_mix_characters_sum"]
            report.languages_found[row["language"]] += row["_mix_entry_count"]
        # each (entry, position) of the batch once: a repeated row is one Python value a batch, not one a row
        seen = batch.group_by(["_mix_entry", "_mix_position"], use_threads=False).aggregate([])
        for entry, position in zip(
            seen.column("_mix_entry").to_pylist(), seen.column("_mix_position").to_pylist(), strict=True
        ):
            positions.setdefault(entry, set()).add(position)
    for index, report in enumerate(mixer.reports):
        report.distinct_rows = len(positions.get(index, ()))
    for index, removed in mixer.deduplicator.removed.items():
        mixer.reports[index].duplicates_removed = removed


def _write_shards(
    mixed: Dataset, staging: Path, recipe: Recipe, split: str, max_shard_bytes: int
) -> tuple[list[str], int]:
    """Contiguous shards of at most about ``max_shard_bytes`` (Arrow size, estimated from the sources').

    The mixed rows are an index into the sources' tables: each shard reads them in batches, with no
    ``flatten_indices`` copy (which costs ~10x more on a finely interleaved mixture), and is written as a build
    writes its shards, where ``to_parquet`` would keep min/max statistics of every message's text.
    """
    underlying_rows = max(len(mixed.data), 1)
    num_bytes = mixed.data.nbytes * len(mixed) // underlying_rows
    count = max(1, math.ceil(num_bytes / max_shard_bytes))
    files = []
    for index in range(count):
        relative = shard_path(recipe.config, split, index, count)
        rows = mixed.shard(count, index, contiguous=True).with_format("arrow")
        write_parquet(staging / relative, rows.features, lambda size, rows=rows: rows.iter(batch_size=size))
        files.append(relative)
    return files, num_bytes


def card_data(result: MixResult, folder: Path | None = None) -> DatasetCardData:
    recipe = result.recipe
    licenses = sorted({report.license for report in result.reports})
    data = DatasetCardData(
        pretty_name=recipe.pretty_name or recipe.name,
        license=licenses[0] if len(licenses) == 1 else licenses,
        language=result.languages or None,
        task_categories=[CONFIG_TASKS.get(recipe.config, "text-generation")],
        size_categories=[size_category(result.rows)],
        tags=[*TAGS, "mixture", *sorted({report.entry.name for report in result.reports})],
    )
    add_configs(data, [_config_build(result)], recipe.config, folder)
    return data


def _config_build(result: MixResult):
    """The mixture as the one config it is, in the shape source builds describe their configs."""
    from convhub.engine.writers.output_shards import ConfigBuild

    recipe = result.recipe
    splits = {recipe.output_split: datasets.SplitInfo(recipe.output_split, result.num_bytes, result.rows)}
    files = {recipe.output_split: result.files}
    if result.eval_files:
        splits[recipe.eval_split] = datasets.SplitInfo(recipe.eval_split, result.eval_bytes, result.eval_rows)
        files[recipe.eval_split] = result.eval_files
    return ConfigBuild(recipe.config, CONFIG_FEATURES[recipe.config], splits=splits, files=files)


def render_card_body(result: MixResult, repo_id: str | None = None) -> str:
    from convhub.views.definitions import SHARED_VIEWS

    recipe = result.recipe
    built = _config_build(result)
    repo_id = repo_id or f"ORG/{recipe.name}"
    body = template("mixture.md").render(
        recipe=recipe,
        result=result,
        repo_id=repo_id,
        configs={recipe.config: built},
        default_config=recipe.config,
        views={view.name: view for view in SHARED_VIEWS},
        sources_table=markdown_table(_sources_table(result)),
        pipeline_table=markdown_table(_pipeline_table(result)),
        recipe_yaml=yaml.safe_dump(recipe.document, sort_keys=False, allow_unicode=True).strip(),
        warnings=result.license_warnings(),
        contamination=result.contamination_warnings(),
    )
    return tidy(body) + repo_marker(repo_id)


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "–"


def _sources_table(result: MixResult) -> list[dict]:
    probabilities = result.recipe.probabilities
    rows = []
    for index, report in enumerate(result.reports):
        entry = report.entry
        rows.append(
            {
                "source": entry.name,
                "from": f"`{entry.repo}`" if entry.repo else _folder_named(entry.path),
                "dataset": report.pretty_name or "–",
                "license": report.license + (" ⚠ non-commercial" if report.non_commercial else ""),
                "probability": f"{probabilities[index]:.3f}" if probabilities else "– (concatenated)",
                "rows": report.rows,
                "distinct rows": report.distinct_rows,
                "passes": passes(report),
                "share of rows": _share(report.rows, result.rows),
                "tokens": report.tokens,
                "share of tokens": _share(report.tokens, result.tokens),
                "characters": report.characters,
            }
        )
    return rows


def _pipeline_table(result: MixResult) -> list[dict]:
    def known(value):
        return "–" if value is None else value

    return [
        {
            "source": report.entry.name,
            "config/split": f"{report.entry.config}/{'+'.join(report.entry.splits)}",
            "filters": report.entry.filters.describe(),
            "budget": report.entry.budget.describe(),
            "rows loaded": known(report.rows_loaded),
            "after filters": known(report.rows_after_filters),
            "after budget": known(report.rows_after_budget),
            "duplicates removed": report.duplicates_removed,
            "held out (conversations/rows)": (
                f"{report.eval_conversations}/{report.eval_rows}" if report.entry.eval else "–"
            ),
            "over max_tokens (dropped/truncated)": (
                f"{report.over_length_dropped}/{report.over_length_truncated}"
                if report.entry.max_tokens
                else "–"
            ),
            "rows in mixture": report.rows,
        }
        for report in result.reports
    ]


def write_mixture_card(result: MixResult, folder: Path, repo_id: str | None = None) -> DatasetCard:
    card = DatasetCard(
        f"---\n{card_data(result, folder).to_yaml()}\n---\n\n{render_card_body(result, repo_id)}"
    )
    card.save(folder / "README.md")
    return card


def _folder_named(path) -> str:
    """How the card names a source folder: a local one by its name (its place is the mixer's own), one at a URL
    by its URL."""
    return f"`{text_of(path)}`" if is_url(path) else f"`{path.name}` (local)"
