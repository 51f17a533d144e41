"""``scripts/train_mixture.py``: the example recipe's mixture through a chat template into the real Trainer.

Needs the ``train`` extra (``pip install torch==2.13.0 && pip install ".[train]"``); CI installs it. The
tokenizer is trained here and the model is randomly initialized: nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import datasets
import pytest
import yaml

from convhub import mix

#: The train extra is looked up, not imported: torch takes 5-15 s to import, which a run that chooses none of these
#: tests (``-m "not slow"``, each xdist worker's collection) should not pay. The script imports it when it runs.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        any(importlib.util.find_spec(name) is None for name in ("torch", "transformers")),
        reason="the train extra is not installed: pip install torch==2.13.0 '.[train]'",
    ),
]

ROOT = Path(__file__).resolve().parents[2]


def load_script():
    spec = importlib.util.spec_from_file_location("train_mixture", ROOT / "scripts" / "train_mixture.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def short_arrow_shutdown_pause(monkeypatch):
    """Streamed Parquet pauses 5 s after each interleaved pass (apache/arrow#45214); local files need less."""
    monkeypatch.setattr(datasets.config, "SLEEP_TIME_ON_THREADS_SHUTDOWN", 0.1)


@pytest.fixture(scope="module")
def train_mixture():
    return load_script()


@pytest.fixture(scope="module")
def example_recipe(sample_builds) -> mix.Recipe:
    """examples/recipe.yaml with each source pointed at the sample build of the same name."""
    document = yaml.safe_load((ROOT / "examples" / "recipe.yaml").read_text(encoding="utf-8"))
    builds = {result.output.name: result.output for result in sample_builds.values()}
    for source in document["sources"]:
        source["path"] = str(builds[Path(source["path"]).name])
    return mix.parse_recipe(document)


@pytest.fixture(scope="module")
def mixture_folder(example_recipe, tmp_path_factory) -> Path:
    output = tmp_path_factory.mktemp("mixture") / "convhub-mix-example"
    mix.write_mixture(example_recipe, output)
    return output


def test_chat_template_and_offline_tokenizer(train_mixture, mixture_folder):
    rows = datasets.load_dataset(str(mixture_folder), split="train")
    tokenizer = train_mixture.build_tokenizer(train_mixture.mixture_texts(rows))
    messages = [{"role": "user", "content": "hello there"}, {"role": "assistant", "content": "hi"}]
    text = tokenizer.apply_chat_template(messages, tokenize=False)
    assert text == "<s><|user|> hello there\n<|assistant|> hi</s>"  # (Jinja drops the last newline)
    prompt = tokenizer.apply_chat_template(messages[:1], tokenize=False, add_generation_prompt=True)
    assert prompt.endswith("<|assistant|> ")
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    for token in ("<s>", "<|user|>", "<|assistant|>", "</s>"):
        assert ids.count(tokenizer.convert_tokens_to_ids(token)) == 1  # one id each, never split
    assert tokenizer.unk_token_id not in tokenizer(rows[0]["messages"][0]["content"])["input_ids"]
    masked = tokenizer.apply_chat_template(
        messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    marked = [
        token for token, mask in zip(masked["input_ids"], masked["assistant_masks"], strict=True) if mask
    ]
    assert tokenizer.decode(marked).replace(" ", "") == "hi</s>"  # the reply and its end, nothing else


def assistant_spans_only(tokenizer, input_ids: list[int], labels: list[int]) -> tuple[int, int]:
    """Walk a (packed) sequence by its role tokens; every token with a label must be in an assistant message.
    Returns (labelled tokens, assistant messages whose end-of-turn token is labelled)."""
    role_ids = {
        tokenizer.convert_tokens_to_ids(f"<|{role}|>"): role for role in ("user", "assistant", "system")
    }
    role, labelled, stops = None, 0, 0
    for token, label in zip(input_ids, labels, strict=True):
        if token in role_ids or token == tokenizer.bos_token_id:
            role = role_ids.get(token)
            assert label == -100, "a role marker carries loss"
            continue
        if label != -100:
            assert role == "assistant", f"a {role} token carries loss: {tokenizer.decode([token])!r}"
            labelled += 1
            stops += token == tokenizer.eos_token_id
    return labelled, stops


def test_sft_trainer_puts_the_loss_on_assistant_tokens_only_of_all_four_sources(
    train_mixture, sample_builds, tmp_path
):
    """TRL's SFTTrainer, assistant-only loss and packing, on a mixture of every source's sample messages."""
    sources = [
        {"path": str(result.output), "split": next(iter(result.configs["messages"].splits))}
        for result in sample_builds.values()
    ]
    mixture = mix.write_mixture(mix.parse_recipe({"name": "all-four", "sources": sources}), tmp_path / "mix")
    assert {report.entry.name for report in mixture.reports if report.rows} == {
        r.output.name for r in sample_builds.values()
    }
    rows = datasets.load_dataset(str(tmp_path / "mix"), split="train")
    losses, trainer = train_mixture.train(rows, steps=10, seed=0, max_length=96)
    assert trainer.args.assistant_only_loss and trainer.args.packing
    tokenizer = trainer.processing_class
    labelled = stops = 0
    for batch in trainer.get_train_dataloader():
        for input_ids, labels in zip(batch["input_ids"].tolist(), batch["labels"].tolist(), strict=True):
            found, ended = assistant_spans_only(tokenizer, input_ids, labels)
            labelled, stops = labelled + found, stops + ended
    assistant_messages = sum(m["role"] == "assistant" for row in rows for m in row["messages"])
    assert (
        labelled > 0 and stops >= assistant_messages // 2
    )  # the model is taught to end its turn (packing cuts some)
    first, last = sum(losses[:3]) / 3, sum(losses[-3:]) / 3
    assert all(math.isfinite(loss) for loss in losses) and last < first, losses


def test_trainer_loss_is_finite_and_decreases(train_mixture, mixture_folder):
    rows = datasets.load_dataset(str(mixture_folder), split="train")
    losses, trainer = train_mixture.train(rows, steps=12, seed=0, max_length=64)
    assert len(losses) == 12 and trainer.state.global_step == 12
    assert all(math.isfinite(loss) for loss in losses)
    first, last = sum(losses[:3]) / 3, sum(losses[-3:]) / 3
    assert last < first - 0.1, losses
    assert losses[0] == pytest.approx(math.log(trainer.model.config.vocab_size), rel=0.1)  # random init


def test_trainer_runs_on_the_streamed_mixture(train_mixture, example_recipe):
    streamed = mix.mixture(example_recipe, streaming=True)
    assert isinstance(streamed, datasets.IterableDataset)
    losses, _ = train_mixture.train(streamed, steps=4, seed=0, max_length=64)
    assert len(losses) == 4 and all(math.isfinite(loss) for loss in losses)


def test_command_line(train_mixture, mixture_folder, capsys):
    assert train_mixture.main([str(mixture_folder), "--steps", "6", "--max-length", "48"]) == 0
    out = capsys.readouterr().out
    assert "loss per step:" in out and "→ last 3 steps" in out
