"""``convhub mix``: recipes, filters, budgets, deduplication, interleaving and streaming.

Sources are small build folders written here (Parquet with the shared ``messages`` features and a card
carrying a license), so every expectation is computed from rows the test chose; one test mixes the sample
build of every registered source, whichever sources exist.
"""

from __future__ import annotations

import collections

import datasets
import pytest
from huggingface_hub import DatasetCard

from convhub import mix, schema
from tests.support.mix_sources import (  # noqa: F401 (short_arrow_shutdown_pause: an autouse fixture)
    conversation,
    ids,
    numbered,
    recipe,
    short_arrow_shutdown_pause,
    write_source,
)

# -- recipe validation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("document", "key", "problem"),
    [
        ({"sources": [{"path": "a", "wieght": 1}]}, "sources[0].wieght", "unknown key"),
        ({"sources": [{"path": "a", "repo": "o/a"}]}, "sources[0]", "exactly one of"),
        ({"sources": [{"repo": "no-slash"}]}, "sources[0].repo", "ORG/NAME"),
        ({"sources": [{"path": "a", "weight": 1}, {"path": "b"}]}, "sources[1].weight", "missing"),
        ({"sources": [{"path": "a", "weight": -1}]}, "sources[0].weight", "> 0"),
        ({"sources": [{"path": "a", "weight": 1}, {"path": "b", "probability": 1}]}, "sources", "not both"),
        (
            {"sources": [{"path": "a", "probability": 0.5}, {"path": "b", "probability": 0.4}]},
            "sources[*].probability",
            "sum to 0.9",
        ),
        ({"config": "observations", "sources": [{"path": "a"}]}, "config", "not a shared view"),
        (
            {"stopping_strategy": "longest", "sources": [{"path": "a", "weight": 1}]},
            "stopping_strategy",
            "not one of",
        ),
        (
            {"stopping_strategy": "all_exhausted", "sources": [{"path": "a"}]},
            "stopping_strategy",
            "only applies",
        ),
        (
            {"sources": [{"path": "a", "filters": {"min_turns": 5, "max_turns": 2}}]},
            "sources[0].filters.min_turns",
            "above max_turns",
        ),
        (
            {"sources": [{"path": "a", "filters": {"langauge": "en"}}]},
            "sources[0].filters.langauge",
            "unknown",
        ),
        ({"sources": [{"path": "a", "budget": {"tokens": 0}}]}, "sources[0].budget.tokens", "integer ≥ 1"),
        ({"sources": [{"path": "x/a"}, {"path": "y/a"}]}, "sources[1].name", "already the name"),
        ({"sources": []}, "sources", "non-empty"),
        ({"seed": "7", "sources": [{"path": "a"}]}, "seed", "integer"),
        ({"sources": [{"path": "a", "split": 3}]}, "sources[0].split", "split name"),
        ({"sources": [{"path": "a", "revision": "v1"}]}, "sources[0].revision", "Hub"),
    ],
)
def test_recipe_errors_name_the_key(document, key, problem):
    with pytest.raises(mix.RecipeError, match=problem) as caught:
        mix.parse_recipe(document)
    assert caught.value.key == key
    assert repr(key) in str(caught.value)


def test_recipe_defaults_and_relative_paths(tmp_path):
    parsed = recipe(
        tmp_path,
        """
        filters: {language: en}
        sources:
          - path: builds/a
            weight: 3
          - repo: org/b-unified
            revision: v1
            split: [train, validation]
            weight: 1
            filters: {min_turns: 2}
        """,
    )
    first, second = parsed.sources
    assert parsed.name == "recipe" and parsed.config == "messages" and parsed.output_split == "train"
    assert (
        first.path == (tmp_path / "builds" / "a").resolve()
        and first.name == "a"
        and first.splits == ("train",)
    )
    assert (
        second.name == "b-unified"
        and second.repo == "org/b-unified"
        and second.splits == ("train", "validation")
    )
    assert first.filters == mix.Filters(languages=("en",))
    assert second.filters == mix.Filters(languages=("en",), min_turns=2)  # shared filters, merged
    assert parsed.probabilities == [0.75, 0.25]
    assert parsed.stopping_strategy == "first_exhausted" and parsed.deduplicate is True


# -- the pipeline ---------------------------------------------------------------------------------


def test_concatenation_keeps_order_and_every_row(tmp_path):
    write_source(tmp_path / "a", numbered("a", 3))
    write_source(tmp_path / "b", numbered("b", 2))
    mixed = mix.mixture(recipe(tmp_path, "sources: [{path: a}, {path: b}]"))
    assert ids(mixed) == ["a-0", "a-1", "a-2", "b-0", "b-1"]
    assert mixed.features == schema.MESSAGES_FEATURES


def test_duplicates_across_and_within_sources_keep_the_first(tmp_path):
    shared = ["Hello  there", "General\u00a0Kenobi"]  # differs from the copy below only in spacing
    write_source(
        tmp_path / "a",
        [conversation("a-0", ["x", "y"]), conversation("a-1", shared), conversation("a-2", ["x", "y"])],
    )
    write_source(
        tmp_path / "b", [conversation("b-0", ["Hello there", "General Kenobi"]), conversation("b-1", ["z"])]
    )
    mixer = mix.Mixer(recipe(tmp_path, "sources: [{path: a}, {path: b}]"))
    assert ids(mixer.mixture()) == ["a-0", "a-1", "b-1"]
    assert dict(mixer.deduplicator.removed) == {0: 1, 1: 1}


def test_roles_are_part_of_the_content(tmp_path):
    swapped = conversation("b-0", ["x", "y"])
    swapped["messages"] = [{"role": "assistant", "content": "x"}, {"role": "user", "content": "y"}]
    write_source(tmp_path / "a", [conversation("a-0", ["x", "y"])])
    write_source(tmp_path / "b", [swapped])
    assert ids(mix.mixture(recipe(tmp_path, "sources: [{path: a}, {path: b}]"))) == ["a-0", "b-0"]


def test_deduplicate_false_keeps_copies(tmp_path):
    write_source(tmp_path / "a", [conversation("a-0", ["x"]), conversation("a-1", ["x"])])
    assert ids(mix.mixture(recipe(tmp_path, "deduplicate: false\nsources: [{path: a}]"))) == ["a-0", "a-1"]


def test_filters_language_subset_and_turns(tmp_path):
    rows = [
        conversation("en", ["1", "2"], language="en"),
        conversation("en-gb", ["1", "2", "3"], language="en-GB"),
        conversation("eng", ["1", "2", "4"], language="eng"),  # not a BCP-47 subtag of en
        conversation("zh", ["你好", "好"], language="zh"),
        conversation("en-long", ["1", "2", "3", "4", "5"], language="en"),
        conversation("en-other-subset", ["1", "2", "6"], language="en", subset="s2"),
    ]
    write_source(tmp_path / "a", rows)
    text = "sources: [{path: a, filters: {language: en, subset: s1, min_turns: 2, max_turns: 4}}]"
    mixer = mix.Mixer(recipe(tmp_path, text))
    assert ids(mixer.mixture()) == ["en", "en-gb"]
    report = mixer.reports[0]
    assert (report.rows_loaded, report.rows_after_filters, report.rows_after_budget) == (6, 2, 2)


def test_token_budget_draws_rows_at_random_with_the_seed_and_keeps_the_source_order(tmp_path):
    # 100 sessions of 10 conversations, in conversation order (as a LoCoMo build lists them): 10 tokens a row
    rows = [conversation(f"c{c}-s{s}", [f"{c} {s} b c d", "f g h i j"]) for c in range(10) for s in range(10)]
    write_source(tmp_path / "a", rows)
    parsed = recipe(tmp_path, "seed: 1\nsources: [{path: a, budget: {tokens: 300}}]")
    chosen = ids(mix.mixture(parsed))
    assert len(chosen) == 30  # 300 tokens
    assert chosen == sorted(chosen, key=[row["conversation_id"] for row in rows].index)  # the source's order
    assert len({row_id.split("-")[0] for row_id in chosen}) >= 8  # not the first 3 conversations
    assert chosen == ids(mix.mixture(parsed))  # the same seed, the same rows
    assert chosen != ids(
        mix.mixture(recipe(tmp_path, "seed: 2\nsources: [{path: a, budget: {tokens: 300}}]"))
    )
    streamed = ids(mix.mixture(parsed, streaming=True))
    assert len(streamed) == 30 and len({row_id.split("-")[0] for row_id in streamed}) >= 5  # a shuffle buffer
    assert streamed == ids(mix.mixture(parsed, streaming=True))


def test_character_budget_and_token_budget_together(tmp_path):
    write_source(
        tmp_path / "a", [conversation(f"a-{i}", ["你好世", f"很好{i}"]) for i in range(5)]
    )  # 6 chars, 2 tokens
    parsed = recipe(tmp_path, "sources: [{path: a, budget: {characters: 20, tokens: 100}}]")
    assert len(ids(mix.mixture(parsed))) == 3


def test_repeat_puts_each_selected_row_in_that_many_times_and_the_card_says_so(tmp_path):
    write_source(tmp_path / "a", numbered("a", 5))
    write_source(tmp_path / "b", numbered("b", 4))
    result = mix.write_mixture(
        recipe(tmp_path, "sources: [{path: a, repeat: 3}, {path: b}]"), tmp_path / "out"
    )
    loaded = ids(datasets.load_dataset(str(tmp_path / "out"), split="train"))
    assert collections.Counter(loaded) == {
        **{f"a-{i}": 3 for i in range(5)},
        **{f"b-{i}": 1 for i in range(4)},
    }
    a, b = result.reports
    assert (a.rows, a.distinct_rows, b.rows, b.distinct_rows) == (15, 5, 4, 4)
    card = (tmp_path / "out" / "README.md").read_text(encoding="utf-8")
    assert "| a | `a` (local) | a | apache-2.0 | – (concatenated) | 15 | 5 | 3 |" in card


def test_eval_holds_out_whole_conversations_as_a_second_split(tmp_path):
    # 20 conversations of 3 sessions each: a held-out conversation has all 3 rows in the eval split
    rows = [
        conversation(f"c{c}", [f"{c} {s} q", f"{c} {s} a"]) | {"session_index": s}
        for c in range(20)
        for s in range(3)
    ]
    write_source(tmp_path / "a", rows)
    write_source(tmp_path / "b", numbered("b", 10))
    text = "seed: 5\nsources: [{path: a, eval: 0.25}, {path: b, eval: 2}]"
    result = mix.write_mixture(recipe(tmp_path, text), tmp_path / "out")
    loaded = datasets.load_dataset(str(tmp_path / "out"))
    assert sorted(loaded) == ["train", "validation"]
    train, held = set(ids(loaded["train"])), set(ids(loaded["validation"]))
    assert not train & held  # no conversation in both splits
    assert len(held) == 5 + 2 and len(loaded["validation"]) == 5 * 3 + 2 and result.eval_rows == 17
    assert len(train) == 15 + 8 and len(loaded["train"]) == 15 * 3 + 8
    a, b = result.reports
    assert (a.eval_conversations, a.eval_rows, b.eval_conversations, b.eval_rows) == (5, 15, 2, 2)
    card = DatasetCard.load(tmp_path / "out" / "README.md")
    assert "A held-out split, `validation`, has 17 rows" in card.content
    assert {entry["split"] for entry in card.data.configs[0]["data_files"]} == {"train", "validation"}
    again = mix.write_mixture(recipe(tmp_path, text), tmp_path / "again")
    assert set(ids(datasets.load_dataset(str(again.output), split="validation"))) == held  # seeded
    with pytest.raises(mix.RecipeError, match="leaves one of the splits empty"):
        mix.mixture(recipe(tmp_path, "sources: [{path: b, eval: 10}]"))
    with pytest.raises(mix.RecipeError, match=r"sources\[0\]\.eval"):
        mix.mixture(recipe(tmp_path, "sources: [{path: b, eval: 1.5}]"))


def test_per_source_roles_system_prompt_and_chat_filters(tmp_path):
    write_source(
        tmp_path / "a",
        [
            conversation("ok", ["hi", "hello"]),
            conversation("opens-assistant", ["x", "y"])
            | {"messages": [{"role": "assistant", "content": "x"}, {"role": "user", "content": "y"}]},
            conversation("user-only", ["x"]),
            conversation("empty", ["q", " "]),
        ],
    )
    text = """
        sources:
          - path: a
            system: Be brief.
            filters: {has_assistant: true, alternating: true, non_empty: true}
        """
    [row] = mix.mixture(recipe(tmp_path, text)).to_list()
    assert row["conversation_id"] == "ok"
    assert row["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]
    swapped = mix.mixture(recipe(tmp_path, "sources: [{path: a, roles: {user: assistant, assistant: user}}]"))
    assert [m["role"] for m in swapped[1]["messages"]] == ["user", "assistant"]  # opens-assistant, swapped
    with pytest.raises(mix.RecipeError, match="apply to the messages config"):
        mix.mixture(recipe(tmp_path, "config: turns\nsources: [{path: a, system: x}]"))
    with pytest.raises(mix.RecipeError, match="roles are"):
        mix.mixture(recipe(tmp_path, "sources: [{path: a, roles: {user: bot}}]"))


@pytest.fixture
def local_tokenizer(tmp_path):
    """A word-level tokenizer with a chat template, saved as a folder AutoTokenizer loads offline."""
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["[UNK]", "<|user|>", "<|assistant|>", "<|system|>"]
    words += [f"{p}{i}{k}" for p in "ab" for i in range(40) for k in "qa"]
    backend = Tokenizer(models.WordLevel({word: i for i, word in enumerate(words)}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]")
    tokenizer.chat_template = "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} {% endfor %}"
    folder = tmp_path / "tokenizer"
    tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.slow
def test_a_tokenizer_counts_tokens_with_its_chat_template_and_max_tokens_drops_or_truncates(
    tmp_path, local_tokenizer
):
    # 3 words per message; with the template's role marker, 4 tokens a message
    long_row = conversation("a-long", ["a1q a1q a1q", "a1a a1a a1a", "a2q a2q a2q", "a2a a2a a2a"])
    write_source(tmp_path / "a", [*numbered("a", 3), long_row])
    base = f"tokenizer: {local_tokenizer}\nsources: [{{path: a, max_tokens: 10}}]\n"
    result = mix.write_mixture(recipe(tmp_path, base), tmp_path / "drop")
    [report] = result.reports
    assert report.tokens == 3 * 8 and report.over_length_dropped == 1  # 8 tokens a two-message row
    truncated = mix.write_mixture(recipe(tmp_path, base + "over_length: truncate\n"), tmp_path / "cut")
    rows = datasets.load_dataset(str(tmp_path / "cut"), split="train").to_list()
    assert [row["conversation_id"] for row in rows] == ["a-0", "a-1", "a-2", "a-long"]
    assert rows[-1]["messages"] == long_row["messages"][:2]  # cut to fit, ending on the assistant
    assert truncated.reports[0].over_length_truncated == 1
    card = (tmp_path / "cut" / "README.md").read_text(encoding="utf-8")
    assert f"tokens of `{local_tokenizer}`" in card and "| 0/1 |" in card
    whitespace = mix.write_mixture(recipe(tmp_path, "sources: [{path: a}]"), tmp_path / "ws")
    assert "whitespace tokens: the recipe names no tokenizer" in (whitespace.output / "README.md").read_text()


def test_a_test_split_mixed_into_training_is_warned_about_and_languages_come_from_the_rows(tmp_path):
    write_source(tmp_path / "bench", numbered("q", 3), split="test")
    write_source(tmp_path / "chat", [*numbered("c", 3), conversation("zh", ["你好", "你好"], language="zh")])
    text = "sources: [{path: bench, split: test}, {path: chat, filters: {language: en}}]"
    result = mix.write_mixture(recipe(tmp_path, text), tmp_path / "out")
    [warning] = result.contamination_warnings()
    assert warning.startswith("bench: its `test` split is in this mixture's `train` split")
    card = DatasetCard.load(tmp_path / "out" / "README.md")
    assert "Benchmark contamination" in card.content and warning in card.content
    assert card.data.language == ["en"]  # the chat source's card says en and zh; its zh row was filtered out


def test_interleaving_is_seeded_and_follows_probabilities(tmp_path):
    write_source(tmp_path / "a", numbered("a", 300))
    write_source(tmp_path / "b", numbered("b", 300))
    text = "seed: 3\nsources: [{path: a, weight: 3}, {path: b, weight: 1}]\n"
    first = ids(mix.mixture(recipe(tmp_path, text)))
    assert first == ids(mix.mixture(recipe(tmp_path, text)))
    assert first != ids(mix.mixture(recipe(tmp_path, text.replace("seed: 3", "seed: 4"))))
    counts = collections.Counter(row_id.split("-")[0] for row_id in first)
    assert counts["b"] == 300 or counts["a"] == 300  # first_exhausted: stops when one source runs out
    share_a = counts["a"] / sum(counts.values())
    assert 0.6 < share_a < 0.9, counts


def test_all_exhausted_repeats_the_small_source_and_keeps_its_repeats(tmp_path):
    write_source(tmp_path / "a", numbered("a", 40))
    write_source(tmp_path / "small", numbered("s", 3))
    text = "stopping_strategy: all_exhausted\nsources: [{path: a, weight: 1}, {path: small, weight: 1}]\n"
    mixer = mix.Mixer(recipe(tmp_path, text))
    rows = ids(mixer.mixture())
    assert {row for row in rows if row.startswith("a-")} == {f"a-{i}" for i in range(40)}
    assert sum(row.startswith("s-") for row in rows) > 3  # oversampled
    assert not mixer.deduplicator.removed  # repeats of one row are not duplicates


def test_streaming_gives_the_same_rows_in_the_same_order(tmp_path):
    write_source(tmp_path / "a", [*numbered("a", 50), conversation("dup-a", ["same", "text"])])
    write_source(tmp_path / "b", [conversation("dup-b", ["same", "text"]), *numbered("b", 30, words=2)])
    text = """
        seed: 11
        stopping_strategy: all_exhausted
        sources:
          - {path: a, weight: 2, filters: {min_turns: 2}}
          - {path: b, weight: 1}
        """
    parsed = recipe(tmp_path, text)  # no budget: a streamed budget draws from a shuffle buffer instead
    in_memory = mix.mixture(parsed)
    streamed = mix.mixture(parsed, streaming=True)
    assert isinstance(streamed, datasets.IterableDataset)
    assert streamed.features == schema.MESSAGES_FEATURES
    assert list(streamed) == in_memory.to_list()
    assert list(streamed) == in_memory.to_list()  # a second pass (epoch) gives the same rows


def test_a_source_filtered_to_nothing(tmp_path):
    write_source(tmp_path / "a", numbered("a", 4))
    write_source(tmp_path / "b", numbered("b", 3))
    weighted = "sources: [{path: a, weight: 1}, {path: b, weight: 1, filters: {min_turns: 3}}]"
    with pytest.raises(
        mix.RecipeError, match="b has no rows left to interleave \\(3 loaded, 0 after filters"
    ) as caught:
        mix.mixture(recipe(tmp_path, weighted))
    assert caught.value.key == "sources[1]"
    concatenated = "sources: [{path: a}, {path: b, filters: {min_turns: 3}}]"
    result = mix.write_mixture(recipe(tmp_path, concatenated), tmp_path / "out")
    assert result.rows == 4
    assert result.warnings() == ["b: contributed no rows (filters, budget or stopping strategy)"]


def test_a_missing_split_names_the_source(tmp_path):
    write_source(tmp_path / "a", numbered("a", 2), split="test")
    with pytest.raises(mix.RecipeError, match="sources\\[0\\]") as caught:
        mix.mixture(recipe(tmp_path, "sources: [{path: a}]"))
    assert "train" in str(caught.value)
