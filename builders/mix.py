"""Training mixtures: several convhub datasets mixed by a recipe into one Hub-ready folder.

Every convhub source publishes the shared views (``messages``, ``sessions``, ``turns``, ``qa``) with the
same features, so mixing them is ``datasets.interleave_datasets`` (weighted) or ``concatenate_datasets``
(no weights) and nothing hand-written. A recipe (YAML, see ``examples/recipe.yaml``) names the sources
(local build folders or Hub repos), the config, the weights, per-source filters and token or character
budgets, deduplication across sources, a seed and the stopping strategy.

The same pipeline runs on ``Dataset`` (map-style, the default of ``convhub mix``) and on
``IterableDataset`` (``streaming=True``: nothing is downloaded up front, a budgeted source is read only up
to its budget). Each step has one meaning in both modes:

1. load each source's split(s) of the config, and add provenance columns (``_mix_*``: recipe entry,
   position in the source, content hash, turns, tokens, characters);
2. filter (language, subset, minimum and maximum turns);
3. budget: rows drawn at random (the recipe's seed) while the token (and/or character) total fits, kept in
   the source's order; then ``repeat`` passes over them;
4. interleave with the recipe's probabilities, seed and stopping strategy, or concatenate;
5. deduplicate: the first occurrence of a content hash in the mixed order wins; a row repeated by
   oversampling (``all_exhausted``) is the *same* row (same entry and position), so it is kept;
6. shuffle (optional) and drop the provenance columns.

Tokens are counted with the recipe's ``tokenizer`` (``transformers.AutoTokenizer``, its chat template applied
to ``messages`` rows) when it names one, else as whitespace-separated words (the card says which); use a
``characters`` budget for text without spaces (Chinese) when there is no tokenizer. A source's ``max_tokens``
drops or truncates longer rows (the recipe's ``over_length``), before the held-out split and the budget.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
import tempfile
import unicodedata
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import yaml
from convhub import schema
from convhub.cards import (
    CONFIG_TASKS,
    TAGS,
    add_configs,
    is_non_commercial,
    repo_marker,
    size_category,
    template,
    tidy,
)
from convhub.hub_errors import redact
from convhub.staging import check_output, staged_folder
from convhub.stats import markdown_table
from datasets import Dataset, Features, IterableDataset, Value
from datasets.data_files import DataFilesDict, sanitize_patterns
from datasets.utils.metadata import MetadataConfigs
from datasets.utils.py_utils import convert_file_size_to_int
from huggingface_hub import DatasetCard, DatasetCardData

logger = logging.getLogger(__name__)

CONFIG_FEATURES: dict[str, Features] = {
    "messages": schema.MESSAGES_FEATURES,
    "sessions": schema.SESSIONS_FEATURES,
    "turns": schema.TURNS_FEATURES,
    "qa": schema.QA_FEATURES,
}
STOPPING_STRATEGIES = ("first_exhausted", "all_exhausted", "all_exhausted_without_replacement")

PROVENANCE = Features(
    {
        "_mix_entry": Value("int32"),
        "_mix_position": Value("int64"),
        "_mix_hash": Value("string"),
        "_mix_turns": Value("int64"),
        "_mix_tokens": Value("int64"),
        "_mix_characters": Value("int64"),
    }
)
PROVENANCE_COLUMNS = list(PROVENANCE)

RECIPE_KEYS = {
    "name", "pretty_name", "description", "config", "split", "output_split", "eval_split", "seed", "stopping_strategy",
    "tokenizer", "max_tokens", "over_length",
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

#: Licenses that forbid commercial use: Creative Commons "NC" variants and the like.
UNKNOWN_LICENSES = {"unknown", "other", "none", ""}


class RecipeError(ValueError):
    """A recipe that cannot be used; the message names the recipe key, e.g. ``sources[1].weight``."""

    def __init__(self, key: str, problem: str):
        self.key = key
        super().__init__(f"recipe key {key!r}: {problem}")


# -- the recipe ----------------------------------------------------------------------------------


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
    """One source of a recipe: a local build folder (``path``) or a Hub dataset repo (``repo``)."""

    name: str
    config: str
    splits: tuple[str, ...]
    path: Path | None = None
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
        return str(self.path) if self.path is not None else str(self.repo)


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
    stopping_strategy: str = "first_exhausted"
    deduplicate: bool = True
    shuffle: bool = False
    shuffle_buffer: int = 10_000
    document: dict = field(default_factory=dict, compare=False)  # the YAML as written, for the card

    @property
    def interleaved(self) -> bool:
        """Weighted recipes interleave; a recipe with no weights concatenates its sources in order."""
        return any(entry.weight is not None or entry.probability is not None for entry in self.sources)

    @property
    def probabilities(self) -> list[float] | None:
        if not self.interleaved:
            return None
        if self.sources[0].probability is not None:
            return [entry.probability for entry in self.sources]
        total = sum(entry.weight for entry in self.sources)
        return [entry.weight / total for entry in self.sources]


def load_recipe(path: str | os.PathLike) -> Recipe:
    """Read a recipe file; relative source paths are relative to the recipe file's folder."""
    path = Path(path)
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise RecipeError("<document>", f"{path} is not valid YAML: {error}") from error
    return parse_recipe(document, base_dir=path.parent, default_name=path.stem)


def parse_recipe(document: Any, base_dir: str | os.PathLike = ".", default_name: str = "mixture") -> Recipe:
    """Validate a recipe given as a mapping (parsed YAML), with errors naming the offending key."""
    if not isinstance(document, dict):
        raise RecipeError("<document>", f"a recipe is a mapping, got {type(document).__name__}")
    _no_unknown_keys(document, RECIPE_KEYS, "")
    config = _string(document, "config", "", default="messages")
    if config not in CONFIG_FEATURES:
        raise RecipeError("config", f"{config!r} is not a shared view; use one of {sorted(CONFIG_FEATURES)}")
    default_splits = _splits(document.get("split", "train"), "split")
    shared_filters = _mapping(document, "filters", "")
    sources_document = document.get("sources")
    if not isinstance(sources_document, list) or not sources_document:
        raise RecipeError("sources", "a non-empty list of sources is required")
    sources = tuple(
        _source(item, f"sources[{index}]", config, default_splits, shared_filters, Path(base_dir))
        for index, item in enumerate(sources_document)
    )
    _check_names_unique(sources)
    _check_weights(sources)
    stopping = _string(document, "stopping_strategy", "", default="first_exhausted")
    if stopping not in STOPPING_STRATEGIES:
        raise RecipeError("stopping_strategy", f"{stopping!r} is not one of {list(STOPPING_STRATEGIES)}")
    recipe = Recipe(
        name=_string(document, "name", "", default=default_name),
        config=config,
        sources=sources,
        output_split=_string(document, "output_split", "", default="train"),
        eval_split=_string(document, "eval_split", "", default="validation"),
        tokenizer=_string(document, "tokenizer", "", default=None),
        over_length=_string(document, "over_length", "", default="drop"),
        pretty_name=_string(document, "pretty_name", "", default=None),
        description=_string(document, "description", "", default=None),
        seed=_integer(document, "seed", "", default=0, minimum=0),
        stopping_strategy=stopping,
        deduplicate=_boolean(document, "deduplicate", "", default=True),
        shuffle=_boolean(document, "shuffle", "", default=False),
        shuffle_buffer=_integer(document, "shuffle_buffer", "", default=10_000, minimum=1),
        document=document,
    )
    if recipe.over_length not in ("drop", "truncate"):
        raise RecipeError("over_length", f"is drop or truncate, got {recipe.over_length!r}")
    shared_limit = _integer(document, "max_tokens", "", default=None, minimum=1)
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
    return recipe


def _source(item, key, config, default_splits, shared_filters, base_dir: Path) -> SourceEntry:
    if not isinstance(item, dict):
        raise RecipeError(key, f"a source is a mapping with `path` or `repo`, got {item!r}")
    _no_unknown_keys(item, SOURCE_KEYS, key)
    path = _string(item, "path", key, default=None)
    repo = _string(item, "repo", key, default=None)
    if (path is None) == (repo is None):
        raise RecipeError(
            key, "give exactly one of `path` (a local build folder) or `repo` (a Hub dataset id)"
        )
    if repo is not None and repo.count("/") != 1:
        raise RecipeError(f"{key}.repo", f"{repo!r} is not a Hub dataset id of the form ORG/NAME")
    if path is not None and item.get("revision") is not None:
        raise RecipeError(f"{key}.revision", "only a Hub `repo` has revisions")
    resolved = (base_dir / path).resolve() if path is not None else None
    filters = {**shared_filters, **_mapping(item, "filters", key)}
    return SourceEntry(
        name=_string(item, "name", key, default=(resolved.name if resolved else repo.split("/")[1])),
        config=_string(item, "config", key, default=config),
        splits=_splits(item["split"], f"{key}.split") if "split" in item else default_splits,
        path=resolved,
        repo=repo,
        revision=_string(item, "revision", key, default=None),
        weight=_positive(item, "weight", key),
        probability=_positive(item, "probability", key, maximum=1.0),
        filters=_filters(filters, f"{key}.filters"),
        budget=_budget(_mapping(item, "budget", key), f"{key}.budget"),
        repeat=_integer(item, "repeat", key, default=1, minimum=1),
        eval=_eval(item.get("eval"), f"{key}.eval"),
        roles=_roles(_mapping(item, "roles", key), f"{key}.roles"),
        system=_string(item, "system", key, default=None),
        max_tokens=_integer(item, "max_tokens", key, default=None, minimum=1),
    )


def _roles(document: dict, key: str) -> tuple[tuple[str, str], ...]:
    for source_role, chat_role in document.items():
        if source_role not in schema.ROLES or chat_role not in schema.ROLES:
            raise RecipeError(f"{key}.{source_role}", f"roles are {list(schema.ROLES)}, got {chat_role!r}")
    return tuple(sorted(document.items()))


def _eval(value, key: str) -> float | int | None:
    """A share of conversations (0 < x < 1) or a number of them (an integer ≥ 1)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RecipeError(key, f"a share of conversations (0 < x < 1) or a count (≥ 1), got {value!r}")
    if isinstance(value, float) and not 0 < value < 1:
        raise RecipeError(key, f"a share of conversations is between 0 and 1 (exclusive), got {value!r}")
    if isinstance(value, int) and value < 1:
        raise RecipeError(key, f"a count of conversations is ≥ 1, got {value!r}")
    return value


def _filters(document: dict, key: str) -> Filters:
    _no_unknown_keys(document, FILTER_KEYS, key)
    filters = Filters(
        languages=_string_list(document, "language", key),
        subsets=_string_list(document, "subset", key),
        min_turns=_integer(document, "min_turns", key, default=None, minimum=0),
        max_turns=_integer(document, "max_turns", key, default=None, minimum=0),
        **{name: _boolean(document, name, key, default=False) for name in CHAT_FILTERS},
    )
    if None not in (filters.min_turns, filters.max_turns) and filters.min_turns > filters.max_turns:
        raise RecipeError(f"{key}.min_turns", f"{filters.min_turns} is above max_turns {filters.max_turns}")
    return filters


def _budget(document: dict, key: str) -> Budget:
    _no_unknown_keys(document, BUDGET_KEYS, key)
    return Budget(
        tokens=_integer(document, "tokens", key, default=None, minimum=1),
        characters=_integer(document, "characters", key, default=None, minimum=1),
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
        if not math.isclose(total, 1.0, abs_tol=1e-6):
            raise RecipeError("sources[*].probability", f"probabilities sum to {total:g}, not 1")


def _no_unknown_keys(document: dict, allowed: set[str], key: str) -> None:
    for name in document:
        if name not in allowed:
            where = f"{key}.{name}" if key else str(name)
            raise RecipeError(where, f"unknown key; allowed here: {', '.join(sorted(allowed))}")


def _where(key: str, name: str) -> str:
    return f"{key}.{name}" if key else name


def _string(document, name, key, default):
    value = document.get(name, default)
    if value is not None and not isinstance(value, str):
        raise RecipeError(_where(key, name), f"must be a string, got {value!r}")
    return value


def _mapping(document, name, key) -> dict:
    value = document.get(name) or {}
    if not isinstance(value, dict):
        raise RecipeError(_where(key, name), f"must be a mapping, got {value!r}")
    return value


def _boolean(document, name, key, default) -> bool:
    value = document.get(name, default)
    if not isinstance(value, bool):
        raise RecipeError(_where(key, name), f"must be true or false, got {value!r}")
    return value


def _integer(document, name, key, default, minimum):
    value = document.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise RecipeError(_where(key, name), f"must be an integer ≥ {minimum}, got {value!r}")
    return value


def _positive(document, name, key, maximum=math.inf):
    value = document.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= maximum:
        bound = f" and ≤ {maximum:g}" if maximum != math.inf else ""
        raise RecipeError(_where(key, name), f"must be a number > 0{bound}, got {value!r}")
    return float(value)


def _string_list(document, name, key) -> tuple[str, ...] | None:
    value = document.get(name)
    if value is None:
        return None
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        raise RecipeError(
            _where(key, name), f"must be a string or a non-empty list of strings, got {value!r}"
        )
    return tuple(values)


def _splits(value, key) -> tuple[str, ...]:
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        raise RecipeError(key, f"must be a split name or a list of split names, got {value!r}")
    return tuple(values)


# -- per-row measures -----------------------------------------------------------------------------


def row_turns(row: dict) -> list[tuple[str, str]]:
    """(role, text) of every turn a row of a shared view holds: what is hashed, counted and budgeted."""
    if "messages" in row:
        return [(m["role"] or "", m["content"] or "") for m in row["messages"]]
    if "sessions" in row:
        return [(t["role"] or "", t["text"] or "") for s in row["sessions"] for t in s["turns"]]
    if "question" in row:
        answer = row["answer"] if row["answer"] is not None else row["adversarial_answer"]
        return [("user", row["question"] or ""), ("assistant", answer or "")]
    return [(row["role"] or "", row["text"] or "")]


def normalize_text(text: str) -> str:
    """NFKC and collapsed whitespace: copies that differ only in spacing or width are the same text."""
    return " ".join(unicodedata.normalize("NFKC", text).split())


def content_hash(turns: list[tuple[str, str]]) -> str:
    """Hash of the normalized (role, text) sequence; ids, source names and metadata play no part."""
    normalized = [[role, normalize_text(text)] for role, text in turns]
    payload = json.dumps(normalized, ensure_ascii=False, separators=(",", ":"))
    return hashlib.blake2b(payload.encode("utf-8"), digest_size=16).hexdigest()


def whitespace_tokens(row: dict, turns: list[tuple[str, str]]) -> int:
    """The fallback count when the recipe names no tokenizer: whitespace-separated words."""
    return sum(len(text.split()) for _, text in turns)


class TokenizerCount:
    """Tokens as a model sees them: ``apply_chat_template`` for ``messages`` rows when the tokenizer has a chat
    template, else the tokens of each turn's text. Loaded with ``transformers.AutoTokenizer`` (a local folder
    or a Hub id), which is in the ``train`` extra."""

    def __init__(self, name: str):
        try:
            from transformers import AutoTokenizer
        except ImportError as error:
            raise RecipeError(
                "tokenizer", 'counting with a tokenizer needs transformers: pip install ".[train]"'
            ) from error
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(name)
        except (OSError, ValueError) as error:
            raise RecipeError("tokenizer", f"cannot load {name!r}: {error}") from error
        self.name = name
        self.templated = bool(getattr(self.tokenizer, "chat_template", None))

    def __call__(self, row: dict, turns: list[tuple[str, str]]) -> int:
        if self.templated and "messages" in row:
            encoded = self.tokenizer.apply_chat_template(row["messages"], tokenize=True)
            return len(
                encoded["input_ids"] if isinstance(encoded, dict) or hasattr(encoded, "keys") else encoded
            )
        return sum(len(self.tokenizer(text, add_special_tokens=False)["input_ids"]) for _, text in turns)


def _add_provenance(batch: dict, indices: list[int], entry_index: int, count=whitespace_tokens) -> dict:
    rows = [dict(zip(batch, values, strict=True)) for values in zip(*batch.values(), strict=True)]
    turns = [row_turns(row) for row in rows]
    return {
        "_mix_entry": [entry_index] * len(rows),
        "_mix_position": list(indices),
        "_mix_hash": [content_hash(t) for t in turns],
        "_mix_turns": [len(t) for t in turns],
        "_mix_tokens": [count(row, t) for row, t in zip(rows, turns, strict=True)],
        "_mix_characters": [sum(len(text) for _, text in t) for t in turns],
    }


def _truncate(row: dict, limit: int, count) -> dict:
    """The row with its last messages removed until it fits ``limit`` and ends on an assistant message; its
    provenance measured again. A row that cannot fit keeps no message (the caller drops it)."""
    messages = list(row["messages"])
    while messages and (messages[-1]["role"] != "assistant" or _measure(row, messages, count) > limit):
        messages.pop()
    if not any(m["role"] == "assistant" for m in messages):
        messages = []
    shortened = {**row, "messages": messages}
    turns = row_turns(shortened)
    shortened["_mix_turns"] = len(turns)
    shortened["_mix_tokens"] = count(shortened, turns) if messages else 0
    shortened["_mix_characters"] = sum(len(text) for _, text in turns)
    return shortened


def _measure(row: dict, messages: list[dict], count) -> int:
    candidate = {**row, "messages": messages}
    return count(candidate, row_turns(candidate))


def _passes_filters(languages, subsets, turns, filters: Filters) -> list[bool]:
    keep = []
    for language, subset, count in zip(languages, subsets, turns, strict=True):
        keep.append(
            (filters.languages is None or _language_matches(language, filters.languages))
            and (filters.subsets is None or subset in filters.subsets)
            and (filters.min_turns is None or count >= filters.min_turns)
            and (filters.max_turns is None or count <= filters.max_turns)
        )
    return keep


def _recast_chat(messages: list[dict], entry: SourceEntry) -> dict:
    """A row's messages with the entry's role renaming and system message."""
    roles = dict(entry.roles)
    recast = [{"role": roles.get(m["role"], m["role"]), "content": m["content"]} for m in messages]
    if entry.system is not None:
        recast = [m for m in recast[:1] if m["role"] != "system"] + recast[1:]
        if entry.system:
            recast.insert(0, {"role": "system", "content": entry.system})
    return {"messages": recast}


def _chat_passes(messages: list[dict], filters: Filters) -> bool:
    body = messages[1:] if messages and messages[0]["role"] == "system" else messages
    expected = ("user", "assistant")
    return (
        (not filters.has_assistant or any(m["role"] == "assistant" for m in body))
        and (not filters.alternating or all(m["role"] == expected[i % 2] for i, m in enumerate(body)))
        and (not filters.non_empty or all((m["content"] or "").strip() for m in messages))
    )


def _language_matches(language: str | None, wanted: tuple[str, ...]) -> bool:
    """``en`` matches ``en`` and ``en-GB``; ``zh-Hans`` matches only itself (BCP-47 prefix match)."""
    if not language:
        return False
    language = language.lower()
    return any(language == w.lower() or language.startswith(w.lower() + "-") for w in wanted)


# -- the pipeline ---------------------------------------------------------------------------------


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


class Deduplicator:
    """First occurrence of each content hash wins, in the order rows arrive.

    A row is identified by (recipe entry, position in its source): when ``all_exhausted`` repeats a
    source, the repeated rows are the kept rows themselves and stay. Memory: one dict entry per distinct
    content hash (a 32-character key and an int, about 200 bytes), so 10 million distinct rows cost about
    2 GB. In streaming mode the state lives in the process iterating: with several DataLoader workers or
    ranks, each deduplicates its own part of the stream only.
    """

    def __init__(self) -> None:
        self.first: dict[str, int] = {}
        self.removed: Counter = Counter()

    def keep(self, entries: list[int], positions: list[int], hashes: list[str]) -> list[bool]:
        kept = []
        for entry, position, digest in zip(entries, positions, hashes, strict=True):
            identity = (entry << 40) | position
            winner = self.first.setdefault(digest, identity)
            kept.append(winner == identity)
            if winner != identity:
                self.removed[entry] += 1
        return kept


def source_card(entry: SourceEntry) -> DatasetCard | None:
    """The source's own dataset card (local README.md or the Hub repo's), or None when it has none."""
    if entry.path is not None:
        readme = entry.path / "README.md"
        return DatasetCard.load(readme) if readme.is_file() else None
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
    parts = []
    local_files = _local_data_files(entry, index) if entry.path is not None else None
    for split in entry.splits:
        try:
            if local_files is None:
                loaded = datasets.load_dataset(
                    entry.repo, entry.config, split=split, revision=entry.revision, streaming=streaming
                )
            elif split not in local_files:
                raise ValueError(f'Unknown split "{split}". Should be one of {sorted(local_files)}.')
            else:
                loaded = datasets.load_dataset(
                    "parquet", data_files={split: local_files[split]}, split=split, streaming=streaming
                )
        except (ValueError, FileNotFoundError) as error:
            raise RecipeError(
                f"sources[{index}]", f"cannot load {entry.location} ({entry.config}/{split}): {error}"
            ) from error
        parts.append(loaded)
    dataset = parts[0] if len(parts) == 1 else datasets.concatenate_datasets(parts)
    if dataset.features is not None and dataset.features != features:
        raise RecipeError(
            f"sources[{index}].config",
            f"{entry.location} config {entry.config!r} does not have the recipe's shared features "
            f"(rebuild it with this convhub): {dataset.features}",
        )
    return dataset


def _local_data_files(entry: SourceEntry, index: int) -> dict[str, list[str]]:
    """Split → Parquet files of a local build folder's config, resolved from its card like ``load_dataset``.

    The folder is read as plain Parquet files rather than ``load_dataset(folder)``: ``datasets`` keys the
    cache of a folder with a card by the folder's name and YAML only, so a rebuilt folder (or another folder
    of the same name) would load stale rows; the ``parquet`` loader keys it by the files and their mtimes.
    """
    readme = entry.path / "README.md"
    if not readme.is_file():
        raise RecipeError(f"sources[{index}].path", f"{entry.path} is not a build folder (no README.md)")
    configs = MetadataConfigs.from_dataset_card_data(DatasetCard.load(readme).data)
    if entry.config not in configs:
        raise RecipeError(
            f"sources[{index}].config",
            f"{entry.path} has no config {entry.config!r}; it has {sorted(configs)}",
        )
    patterns = sanitize_patterns(configs[entry.config]["data_files"])
    resolved = DataFilesDict.from_patterns(patterns, base_path=str(entry.path))
    return {split: list(files) for split, files in resolved.items()}


class Mixer:
    """Runs a recipe's pipeline; keeps the per-source reports and the deduplicator's counts."""

    def __init__(self, recipe: Recipe, streaming: bool = False):
        self.recipe = recipe
        self.streaming = streaming
        self.features = CONFIG_FEATURES[recipe.config]
        self.with_provenance = Features({**self.features, **PROVENANCE})
        self.reports = [describe_source(entry) for entry in recipe.sources]
        self.deduplicator = Deduplicator()
        #: Each source's held-out rows (with provenance), kept apart by conversation from its training rows.
        self.held_out: list = []
        self.count = TokenizerCount(recipe.tokenizer) if recipe.tokenizer else whitespace_tokens

    def mixture(self, provenance: bool = False) -> Dataset | IterableDataset:
        prepared = [self._prepare(index, entry) for index, entry in enumerate(self.recipe.sources)]
        if self.recipe.interleaved:
            mixed = datasets.interleave_datasets(
                prepared,
                probabilities=self.recipe.probabilities,
                seed=self.recipe.seed,
                stopping_strategy=self.recipe.stopping_strategy,
            )
        else:
            mixed = datasets.concatenate_datasets(prepared)
        if self.recipe.deduplicate:
            mixed = self._deduplicate(mixed)
        if self.recipe.shuffle:
            mixed = (
                mixed.shuffle(seed=self.recipe.seed, buffer_size=self.recipe.shuffle_buffer)
                if self.streaming
                else mixed.shuffle(seed=self.recipe.seed)
            )
        return mixed if provenance else mixed.remove_columns(PROVENANCE_COLUMNS)

    def _prepare(self, index: int, entry: SourceEntry) -> Dataset | IterableDataset:
        report = self.reports[index]
        dataset = load_source(entry, index, self.features, self.streaming)
        if entry.roles or entry.system is not None:
            dataset = dataset.map(
                _recast_chat, input_columns=["messages"], fn_kwargs={"entry": entry}, features=self.features
            )
        dataset = dataset.map(
            _add_provenance,
            batched=True,
            with_indices=True,
            fn_kwargs={"entry_index": index, "count": self.count},
            features=self.with_provenance,
        )
        if not self.streaming:
            report.rows_loaded = len(dataset)
        if not entry.filters.is_empty():
            dataset = dataset.filter(
                _passes_filters,
                batched=True,
                input_columns=["language", "subset", "_mix_turns"],
                fn_kwargs={"filters": entry.filters},
            )
        if entry.filters.chat:
            dataset = dataset.filter(
                _chat_passes, input_columns=["messages"], fn_kwargs={"filters": entry.filters}
            )
        if entry.max_tokens is not None:
            dataset = self._within_length(dataset, entry.max_tokens, report)
        if entry.eval is not None:
            dataset = self._hold_out(dataset, entry, index)
        if not self.streaming:
            report.rows_after_filters = len(dataset)
        if not entry.budget.is_empty():
            dataset = self._within_budget(dataset, entry.budget, self.recipe.seed + index)
        if entry.repeat > 1:  # the same rows again (same entry and position: deduplication keeps them)
            dataset = datasets.concatenate_datasets([dataset] * entry.repeat)
        if not self.streaming:
            report.rows_after_budget = len(dataset) // entry.repeat
            if len(dataset) == 0 and self.recipe.interleaved:  # datasets refuses; say which source and why
                raise RecipeError(
                    f"sources[{index}]",
                    f"{entry.name} has no rows left to interleave ({report.rows_loaded} loaded, "
                    f"{report.rows_after_filters} after filters {entry.filters.describe()}, 0 after the budget)",
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
            _truncate, fn_kwargs={"limit": limit, "count": self.count}, features=self.with_provenance
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

    def _hold_out(self, dataset, entry: SourceEntry, index: int):
        """Set aside ``entry.eval`` of the source's conversations (at random, the recipe's seed): every row of a
        held-out conversation goes to the eval split and none to training. Returns the training rows."""
        if self.streaming:
            raise RecipeError(
                f"sources[{index}].eval", "a held-out split needs the map-style mix (no --streaming)"
            )
        conversations = sorted(set(dataset.unique("conversation_id")))
        count = entry.eval if isinstance(entry.eval, int) else round(entry.eval * len(conversations))
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


# -- the Hub-ready folder -------------------------------------------------------------------------


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
        """License and contamination warnings, then sources that ended up with no rows."""
        empty = [report for report in self.reports if report.rows == 0]
        return (
            self.license_warnings()
            + self.contamination_warnings()
            + [
                f"{report.entry.name}: contributed no rows (filters, budget or stopping strategy)"
                for report in empty
            ]
        )

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
            if streaming:  # materialize once: only what the mixture reads is fetched
                mixed = Dataset.from_generator(
                    _iterate, features=mixer.with_provenance, gen_kwargs={"rows": mixed}, cache_dir=cache_dir
                )
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


def _iterate(rows) -> Iterator[dict]:
    yield from rows


def _count(mixed: Dataset, mixer: Mixer) -> None:
    """Rows, distinct rows, tokens, characters and languages per recipe entry, from the provenance columns in
    Arrow batches."""
    columns = ["_mix_entry", "_mix_position", "_mix_tokens", "_mix_characters", "language"]
    positions: dict[int, set[int]] = {}
    for batch in mixed.select_columns(columns).with_format("arrow").iter(batch_size=100_000):
        grouped = batch.group_by("_mix_entry").aggregate(
            [("_mix_entry", "count"), ("_mix_tokens", "sum"), ("_mix_characters", "sum")]
        )
        for row in grouped.to_pylist():
            report = mixer.reports[row["_mix_entry"]]
            report.rows += row["_mix_entry_count"]
            report.tokens += row["_mix_tokens_sum"]
            report.characters += row["_mix_characters_sum"]
        by_language = batch.group_by(["_mix_entry", "language"]).aggregate([("_mix_entry", "count")])
        for row in by_language.to_pylist():
            mixer.reports[row["_mix_entry"]].languages_found[row["language"]] += row["_mix_entry_count"]
        for entry, position in zip(
            batch.column("_mix_entry").to_pylist(), batch.column("_mix_position").to_pylist(), strict=True
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

    The mixed rows are an index into the sources' tables: ``to_parquet`` reads them in batches, with no
    ``flatten_indices`` copy (which costs ~10x more on a finely interleaved mixture).
    """
    underlying_rows = max(len(mixed.data), 1)
    num_bytes = mixed.data.nbytes * len(mixed) // underlying_rows
    count = max(1, math.ceil(num_bytes / max_shard_bytes))
    files = []
    for index in range(count):
        relative = f"{recipe.config}/{split}-{index:05d}-of-{count:05d}.parquet"
        mixed.shard(count, index, contiguous=True).to_parquet(staging / relative)
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
    from convhub.build import ConfigBuild

    recipe = result.recipe
    splits = {recipe.output_split: datasets.SplitInfo(recipe.output_split, result.num_bytes, result.rows)}
    files = {recipe.output_split: result.files}
    if result.eval_files:
        splits[recipe.eval_split] = datasets.SplitInfo(recipe.eval_split, result.eval_bytes, result.eval_rows)
        files[recipe.eval_split] = result.eval_files
    return ConfigBuild(recipe.config, CONFIG_FEATURES[recipe.config], splits=splits, files=files)


def render_card_body(result: MixResult, repo_id: str | None = None) -> str:
    from convhub.views import SHARED_VIEWS

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
                "from": f"`{entry.repo}`" if entry.repo else f"`{entry.path.name}` (local)",
                "dataset": report.pretty_name or "–",
                "license": report.license + (" ⚠ non-commercial" if report.non_commercial else ""),
                "probability": f"{probabilities[index]:.3f}" if probabilities else "– (concatenated)",
                "rows": report.rows,
                "distinct rows": report.distinct_rows,
                "passes": report.entry.repeat,
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
