"""A mixture recipe (YAML) read into frozen dataclasses; every problem is a ``RecipeError`` naming its key.

Everything a recipe can get wrong is refused here, before any row is read: split names that would not be one
path segment (``output_split: ../../x`` would write outside the output) or that ``datasets`` refuses, weights
that are not finite numbers, and mixtures that would repeat rows past ``max_rows`` whatever the sources hold (a
``repeat`` above it, or ``all_exhausted`` with a source so rare that reaching it takes more draws than that).
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import yaml
from datasets import Features

from convhub import schema
from convhub.engine.writers.output_shards import RESERVED_SPLITS, SPLIT_NAME
from convhub.mix.recipe_values import (
    RecipeError,
    boolean,
    integer,
    mapping,
    no_unknown_keys,
    positive,
    shown,
    split_names,
    string,
    string_list,
)
from convhub.storage.folders import Folder, folder_at, text_of

CONFIG_FEATURES: dict[str, Features] = {
    "messages": schema.MESSAGES_FEATURES,
    "sessions": schema.SESSIONS_FEATURES,
    "turns": schema.TURNS_FEATURES,
    "qa": schema.QA_FEATURES,
}
StoppingStrategy = Literal["first_exhausted", "all_exhausted", "all_exhausted_without_replacement"]
STOPPING_STRATEGIES: tuple[StoppingStrategy, ...] = get_args(StoppingStrategy)
#: The most rows a mixture may have when it has more rows than distinct ones (``repeat``, ``all_exhausted``
#: oversampling); the recipe's ``max_rows`` changes it. A mixture with no row repeated is never refused.
DEFAULT_MAX_ROWS = 10_000_000


RECIPE_KEYS = {
    "name", "pretty_name", "description", "config", "split", "output_split", "eval_split", "seed", "stopping_strategy",
    "tokenizer", "max_tokens", "over_length", "max_rows",
    "deduplicate", "shuffle", "shuffle_buffer", "filters", "sources",
}  # fmt: skip
SOURCE_KEYS = {
    "name",
    "path",
    "repo",
    "revision",
    "config",
    "split",
    "weight",
    "probability",
    "filters",
    "budget",
    "repeat",
    "eval",
    "roles",
    "system",
    "max_tokens",
}
FILTER_KEYS = {"language", "subset", "min_turns", "max_turns", "has_assistant", "alternating", "non_empty"}
#: Filters on the chat itself (``messages`` config only): what strict templates and TRL require of a row.
CHAT_FILTERS = ("has_assistant", "alternating", "non_empty")
BUDGET_KEYS = {"tokens", "characters"}


@dataclass(frozen=True)
class Filters:
    languages: tuple[str, ...] | None = None
    subsets: tuple[str, ...] | None = None
    min_turns: int | None = None
    max_turns: int | None = None
    #: Keep only rows with an assistant message / user-assistant alternation from the user (after an optional
    #: system message) / no empty content.
    has_assistant: bool = False
    alternating: bool = False
    non_empty: bool = False

    def is_empty(self) -> bool:
        return self == Filters()

    @property
    def chat(self) -> bool:
        return self.has_assistant or self.alternating or self.non_empty

    def describe(self) -> str:
        parts = []
        if self.languages:
            parts.append("language " + "/".join(self.languages))
        if self.subsets:
            parts.append("subset " + "/".join(self.subsets))
        if self.min_turns is not None:
            parts.append(f"≥{self.min_turns} turns")
        if self.max_turns is not None:
            parts.append(f"≤{self.max_turns} turns")
        parts.extend(name.replace("_", " ") for name in CHAT_FILTERS if getattr(self, name))
        return ", ".join(parts) or "none"


@dataclass(frozen=True)
class Budget:
    tokens: int | None = None
    characters: int | None = None

    def is_empty(self) -> bool:
        return self.tokens is None and self.characters is None

    def describe(self) -> str:
        parts = []
        if self.tokens is not None:
            parts.append(f"{self.tokens:,} tokens")
        if self.characters is not None:
            parts.append(f"{self.characters:,} characters")
        return ", ".join(parts) or "none"


@dataclass(frozen=True)
class SourceEntry:
    """One source of a recipe: a build folder (``path``: local, or a URL) or a Hub dataset repo (``repo``)."""

    name: str
    config: str
    splits: tuple[str, ...]
    path: Folder | None = None
    repo: str | None = None
    revision: str | None = None
    weight: float | None = None
    probability: float | None = None
    filters: Filters = Filters()
    budget: Budget = Budget()
    #: Passes over the source's selected rows (epochs): 2 puts each row in twice.
    repeat: int = 1
    #: Conversations held out for the eval split: a share (0 < x < 1) or a count (an integer ≥ 1).
    eval: float | int | None = None
    #: ``messages`` only: chat roles renamed (``{user: assistant, assistant: user}`` swaps them), and the system
    #: message every row starts with ("" removes the source's own; None keeps it).
    roles: tuple[tuple[str, str], ...] = ()
    system: str | None = None
    #: Rows longer than this many tokens are dropped or truncated (the recipe's ``over_length``).
    max_tokens: int | None = None

    @property
    def location(self) -> str:
        return text_of(self.path) if self.path is not None else str(self.repo)


@dataclass(frozen=True)
class Recipe:
    name: str
    config: str
    sources: tuple[SourceEntry, ...]
    output_split: str = "train"
    #: The held-out split's name, written when a source has ``eval``.
    eval_split: str = "validation"
    #: A tokenizer (local folder or Hub id) that counts tokens with its chat template; None: whitespace words.
    tokenizer: str | None = None
    #: What happens to a row over its source's ``max_tokens``: ``drop`` it, or ``truncate`` it (messages only:
    #: the last messages go until it fits and ends on an assistant message).
    over_length: str = "drop"
    pretty_name: str | None = None
    description: str | None = None
    seed: int = 0
    stopping_strategy: StoppingStrategy = "first_exhausted"
    deduplicate: bool = True
    shuffle: bool = False
    shuffle_buffer: int = 10_000
    #: See ``DEFAULT_MAX_ROWS``: rows a mixture with repeated rows may not exceed.
    max_rows: int = DEFAULT_MAX_ROWS
    document: dict = field(default_factory=dict, compare=False)  # the YAML as written, for the card

    @property
    def interleaved(self) -> bool:
        """Weighted recipes interleave; a recipe with no weights concatenates its sources in order."""
        return any(entry.weight is not None or entry.probability is not None for entry in self.sources)

    @property
    def probabilities(self) -> list[float] | None:
        """The weights or probabilities normalised to sum to 1 (numpy refuses a sum off by more than ~1e-8)."""
        if not self.interleaved:
            return None
        shares = [
            entry.probability if entry.probability is not None else entry.weight for entry in self.sources
        ]
        return _normalised([share for share in shares if share is not None])  # all or none (_check_weights)


def _normalised(values: list[float]) -> list[float]:
    largest = max(values)  # scaled first: weights near the float maximum would sum to inf
    scaled = [value / largest for value in values]
    total = sum(scaled)
    return [value / total for value in scaled]


def load_recipe(path: str | os.PathLike) -> Recipe:
    """Read a recipe file; relative source paths are relative to the recipe file's folder."""
    path = Path(path)
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise RecipeError("<document>", f"{path} is not valid YAML: {error}") from error
    except (OSError, UnicodeDecodeError) as error:  # a folder, a missing or unreadable file, not UTF-8
        problem = "is a folder, not a recipe file" if path.is_dir() else f"cannot be read: {error}"
        raise RecipeError("<document>", f"{path} {problem}") from error
    except RecursionError as error:  # the YAML composer recurses once per level of nesting
        raise RecipeError("<document>", f"{path} is nested too deeply to be a recipe") from error
    return parse_recipe(document, base_dir=path.parent, default_name=path.stem)


def parse_recipe(document: Any, base_dir: str | os.PathLike = ".", default_name: str = "mixture") -> Recipe:
    """Validate a recipe given as a mapping (parsed YAML), with errors naming the offending key."""
    if not isinstance(document, dict):
        raise RecipeError("<document>", f"a recipe is a mapping, got {type(document).__name__}")
    no_unknown_keys(document, RECIPE_KEYS, "")
    config = string(document, "config", "", default="messages")
    if config not in CONFIG_FEATURES:
        raise RecipeError("config", f"{config!r} is not a shared view; use one of {sorted(CONFIG_FEATURES)}")
    default_splits = split_names(document.get("split", "train"), "split")
    shared_filters = mapping(document, "filters", "")
    sources_document = document.get("sources")
    if not isinstance(sources_document, list) or not sources_document:
        raise RecipeError("sources", "a non-empty list of sources is required")
    sources = tuple(
        _source(item, f"sources[{index}]", config, default_splits, shared_filters, Path(base_dir))
        for index, item in enumerate(sources_document)
    )
    _check_names_unique(sources)
    _check_weights(sources)
    stopping = string(document, "stopping_strategy", "", default="first_exhausted")
    if stopping not in STOPPING_STRATEGIES:
        raise RecipeError("stopping_strategy", f"{stopping!r} is not one of {list(STOPPING_STRATEGIES)}")
    recipe = Recipe(
        name=string(document, "name", "", default=default_name),
        config=config,
        sources=sources,
        output_split=_split_name(document, "output_split", default="train"),
        eval_split=_split_name(document, "eval_split", default="validation"),
        tokenizer=string(document, "tokenizer", "", default=None),
        over_length=string(document, "over_length", "", default="drop"),
        pretty_name=string(document, "pretty_name", "", default=None),
        description=string(document, "description", "", default=None),
        seed=integer(document, "seed", "", default=0, minimum=0),
        stopping_strategy=stopping,
        deduplicate=boolean(document, "deduplicate", "", default=True),
        shuffle=boolean(document, "shuffle", "", default=False),
        shuffle_buffer=integer(document, "shuffle_buffer", "", default=10_000, minimum=1),
        max_rows=integer(document, "max_rows", "", default=DEFAULT_MAX_ROWS, minimum=1),
        document=document,
    )
    if recipe.over_length not in ("drop", "truncate"):
        raise RecipeError("over_length", f"is drop or truncate, got {recipe.over_length!r}")
    shared_limit = integer(document, "max_tokens", "", default=None, minimum=1)
    if shared_limit is not None:
        sources = tuple(
            entry if entry.max_tokens is not None else dataclasses.replace(entry, max_tokens=shared_limit)
            for entry in recipe.sources
        )
        recipe = dataclasses.replace(recipe, sources=sources)
    for index, entry in enumerate(recipe.sources):
        if recipe.over_length == "truncate" and entry.max_tokens and entry.config != "messages":
            raise RecipeError("over_length", "truncate applies to the messages config; use drop")
        if entry.config != "messages" and (entry.roles or entry.system is not None or entry.filters.chat):
            raise RecipeError(
                f"sources[{index}]", "roles, system and the chat filters apply to the messages config"
            )
    if recipe.eval_split == recipe.output_split:
        raise RecipeError("eval_split", f"must differ from output_split ({recipe.output_split!r})")
    if "stopping_strategy" in document and not recipe.interleaved:
        raise RecipeError("stopping_strategy", "only applies when sources have a weight or probability")
    _check_growth(recipe)
    return recipe


def _split_name(document, name: str, default: str) -> str:
    """A split the mixture writes: one path segment ``datasets`` accepts (the rule builds use), not ``all``."""
    value = string(document, name, "", default=default)
    if not SPLIT_NAME.fullmatch(value):
        raise RecipeError(
            name, f"{shown(value)} is not a split name: letters, digits and _, parts joined by single dots"
        )
    if value.lower() in RESERVED_SPLITS:
        raise RecipeError(
            name, f"{shown(value)} is a split name datasets reserves (the union of every split)"
        )
    return value


def _check_growth(recipe: Recipe) -> None:
    """Refuse, before any row is read, what would repeat rows past ``max_rows`` whatever the sources hold: a
    ``repeat`` above it (one row already makes that many), or ``all_exhausted`` with a source drawn so rarely
    that reaching it once takes more draws than that (1e-9 : 1e9 never finishes)."""
    for index, entry in enumerate(recipe.sources):
        if entry.repeat > recipe.max_rows:
            raise RecipeError(
                f"sources[{index}].repeat",
                f"{entry.repeat:,} passes make more rows than max_rows ({recipe.max_rows:,}) from a single row; "
                "lower repeat (or raise max_rows)",
            )
    probabilities = recipe.probabilities
    if recipe.stopping_strategy != "all_exhausted" or probabilities is None:  # (None: concatenated, no draws)
        return
    rarest = min(range(len(probabilities)), key=probabilities.__getitem__)
    draws = math.inf if probabilities[rarest] == 0 else 1 / probabilities[rarest]
    if draws > recipe.max_rows:
        name = "probability" if recipe.sources[rarest].probability is not None else "weight"
        raise RecipeError(
            f"sources[{rarest}].{name}",
            f"probability {probabilities[rarest]:.3g}: stopping_strategy all_exhausted draws until every source "
            f"is used up, and drawing this one once takes about {draws:,.0f} rows, past max_rows "
            f"({recipe.max_rows:,}); raise this {name}, or use first_exhausted or all_exhausted_without_replacement",
        )


def _source(
    item: Any, key: str, config: str, default_splits: tuple[str, ...], shared_filters: dict, base_dir: Path
) -> SourceEntry:
    if not isinstance(item, dict):
        raise RecipeError(key, f"a source is a mapping with `path` or `repo`, got {shown(item)}")
    no_unknown_keys(item, SOURCE_KEYS, key)
    path = string(item, "path", key, default=None)
    repo = string(item, "repo", key, default=None)
    resolved: Folder | None = None
    if path is not None and repo is None:
        # a URL (a build Spark wrote to HDFS or S3) as it is; a local path from the recipe's folder
        resolved = folder_at(path) if "://" in path else (base_dir / path).resolve()
        default_name = resolved.name
    elif repo is not None and path is None:
        if repo.count("/") != 1:
            raise RecipeError(f"{key}.repo", f"{repo!r} is not a Hub dataset id of the form ORG/NAME")
        default_name = repo.split("/")[1]
    else:
        raise RecipeError(
            key, "give exactly one of `path` (a build folder, local or a URL) or `repo` (a Hub dataset id)"
        )
    if path is not None and item.get("revision") is not None:
        raise RecipeError(f"{key}.revision", "only a Hub `repo` has revisions")
    filters = {**shared_filters, **mapping(item, "filters", key)}
    return SourceEntry(
        name=string(item, "name", key, default=default_name),
        config=string(item, "config", key, default=config),
        splits=split_names(item["split"], f"{key}.split") if "split" in item else default_splits,
        path=resolved,
        repo=repo,
        revision=string(item, "revision", key, default=None),
        weight=positive(item, "weight", key),
        probability=positive(item, "probability", key, maximum=1.0),
        filters=_filters(filters, f"{key}.filters"),
        budget=_budget(mapping(item, "budget", key), f"{key}.budget"),
        repeat=integer(item, "repeat", key, default=1, minimum=1),
        eval=_eval(item.get("eval"), f"{key}.eval"),
        roles=_roles(mapping(item, "roles", key), f"{key}.roles"),
        system=string(item, "system", key, default=None),
        max_tokens=integer(item, "max_tokens", key, default=None, minimum=1),
    )


def _roles(document: dict, key: str) -> tuple[tuple[str, str], ...]:
    for source_role, chat_role in document.items():
        if source_role not in schema.ROLES or chat_role not in schema.ROLES:
            raise RecipeError(
                f"{key}.{source_role}", f"roles are {list(schema.ROLES)}, got {shown(chat_role)}"
            )
    return tuple(sorted(document.items()))


def _eval(value, key: str) -> float | int | None:
    """A share of conversations (0 < x < 1) or a number of them (an integer ≥ 1)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RecipeError(key, f"a share of conversations (0 < x < 1) or a count (≥ 1), got {shown(value)}")
    if isinstance(value, float) and not 0 < value < 1:
        raise RecipeError(key, f"a share of conversations is between 0 and 1 (exclusive), got {shown(value)}")
    if isinstance(value, int) and value < 1:
        raise RecipeError(key, f"a count of conversations is ≥ 1, got {shown(value)}")
    return value


def _filters(document: dict, key: str) -> Filters:
    no_unknown_keys(document, FILTER_KEYS, key)
    filters = Filters(
        languages=string_list(document, "language", key),
        subsets=string_list(document, "subset", key),
        min_turns=integer(document, "min_turns", key, default=None, minimum=0),
        max_turns=integer(document, "max_turns", key, default=None, minimum=0),
        **{name: boolean(document, name, key, default=False) for name in CHAT_FILTERS},
    )
    if (
        filters.min_turns is not None
        and filters.max_turns is not None
        and filters.min_turns > filters.max_turns
    ):
        raise RecipeError(f"{key}.min_turns", f"{filters.min_turns} is above max_turns {filters.max_turns}")
    return filters


def _budget(document: dict, key: str) -> Budget:
    no_unknown_keys(document, BUDGET_KEYS, key)
    return Budget(
        tokens=integer(document, "tokens", key, default=None, minimum=1),
        characters=integer(document, "characters", key, default=None, minimum=1),
    )


def _check_names_unique(sources) -> None:
    seen = {}
    for index, entry in enumerate(sources):
        if entry.name in seen:
            raise RecipeError(
                f"sources[{index}].name",
                f"{entry.name!r} is already the name of sources[{seen[entry.name]}]; give each source a `name`",
            )
        seen[entry.name] = index


def _check_weights(sources) -> None:
    weighted = [entry.weight is not None for entry in sources]
    probable = [entry.probability is not None for entry in sources]
    if any(weighted) and any(probable):
        raise RecipeError(
            "sources", "use `weight` on every source or `probability` on every source, not both"
        )
    for flags, name in ((weighted, "weight"), (probable, "probability")):
        if any(flags) and not all(flags):
            missing = flags.index(False)
            raise RecipeError(
                f"sources[{missing}].{name}", f"missing: every source needs a {name} once one has"
            )
    if all(probable):
        total = sum(entry.probability for entry in sources)
        if not math.isclose(total, 1.0, abs_tol=1e-6):  # then normalised: see Recipe.probabilities
            raise RecipeError("sources[*].probability", f"probabilities sum to {total:g}, not 1")
