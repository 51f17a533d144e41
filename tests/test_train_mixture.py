"""``scripts/train_mixture.py``: the example recipe's mixture through a chat template into the real Trainer.

Needs the ``train`` extra (``pip install torch==2.13.0 && pip install ".[train]"``); CI installs it. The
tokenizer is trained here and the model is randomly initialized: nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the train extra is not installed: pip install torch==2.13.0 '.[train]'")
pytest.importorskip("transformers", reason="the train extra is not installed: pip install '.[train]'")

import datasets
import yaml

from builders import mix

ROOT = Path(__file__).resolve().parent.parent


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
    assert text == "<s><|user|> hello there\n<|assistant|> hi\n</s>"
    prompt = tokenizer.apply_chat_template(messages[:1], tokenize=False, add_generation_prompt=True)
    assert prompt.endswith("<|assistant|> ")
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    for token in ("<s>", "<|user|>", "<|assistant|>", "</s>"):
        assert ids.count(tokenizer.convert_tokens_to_ids(token)) == 1  # one id each, never split
    assert tokenizer.unk_token_id not in tokenizer(rows[0]["messages"][0]["content"])["input_ids"]

    encoded = train_mixture.tokenize(rows, tokenizer, max_length=64)
    assert encoded.column_names == ["input_ids", "attention_mask"]
    assert len(encoded) == len(rows)
    assert max(len(ids) for ids in encoded["input_ids"]) <= 64
    first = tokenizer.apply_chat_template(rows[0]["messages"], tokenize=False)
    assert encoded[0]["input_ids"] == tokenizer(first, add_special_tokens=False)["input_ids"][:64]


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
