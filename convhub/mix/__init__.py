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

A mixture that repeats rows (``repeat``, or ``all_exhausted`` drawing a small source again and again) may not
pass the recipe's ``max_rows``: what cannot stay under it is refused before mixing, naming the key to change
(map-style from the sources' lengths; streamed as the rows arrive). A source repeated beyond its ``repeat`` is a
warning, and the card's "passes" are the real ones.

Tokens are counted with the recipe's ``tokenizer`` (``transformers.AutoTokenizer``, its chat template applied
to ``messages`` rows) when it names one, else as whitespace-separated words (the card says which); use a
``characters`` budget for text without spaces (Chinese) when there is no tokenizer. A source's ``max_tokens``
drops or truncates longer rows (the recipe's ``over_length``), before the held-out split and the budget.

Modules: ``recipe`` (the YAML read and checked), ``rows`` (per-row measures and filters), ``pipeline`` (the steps
above on ``datasets``), ``output`` (the Hub-ready folder and its card). This package exports what callers use.
"""

from convhub.mix.output import MixResult, passes, write_mixture, write_mixture_card
from convhub.mix.pipeline import Mixer, SourceReport, mixture
from convhub.mix.recipe import (
    CONFIG_FEATURES,
    Filters,
    Recipe,
    RecipeError,
    SourceEntry,
    load_recipe,
    parse_recipe,
)

__all__ = [
    "CONFIG_FEATURES",
    "Filters",
    "MixResult",
    "Mixer",
    "Recipe",
    "RecipeError",
    "SourceEntry",
    "SourceReport",
    "load_recipe",
    "mixture",
    "parse_recipe",
    "passes",
    "write_mixture",
    "write_mixture_card",
]
