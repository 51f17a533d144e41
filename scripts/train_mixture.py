"""Train a few steps on a convhub mixture with TRL's SFTTrainer: assistant tokens only, packed sequences.

It shows the whole path from a mixture to ``trl.SFTTrainer`` with nothing downloaded: the tokenizer is a
BPE trained on the mixture's own text (``tokenizers``) wrapped in ``PreTrainedTokenizerFast`` with a Jinja
chat template that marks each assistant message (``{% generation %}``), so ``assistant_only_loss`` puts the
loss on what the assistant says and nothing else; ``packing`` fills each sequence with several sessions. The
model is a randomly initialized two-layer ``LlamaForCausalLM``. Swap in a real tokenizer and model
(``AutoTokenizer.from_pretrained(...)``, whose template needs the same markers) for real training; the data
part stays the same.

    pip install torch==2.13.0 && pip install ".[train]"       # torch first: the CPU build
    convhub build --all --sample --output out && convhub mix examples/recipe.yaml --output out/mix
    python scripts/train_mixture.py out/mix --steps 30         # a mixture folder or a Hub repo
    python scripts/train_mixture.py --recipe examples/recipe.yaml --streaming --steps 30
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import tempfile
from pathlib import Path

import datasets
import torch
import transformers
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
from trl import SFTConfig, SFTTrainer

ROLE_TOKENS = ["<|system|>", "<|user|>", "<|assistant|>"]
SPECIAL_TOKENS = ["<pad>", "<unk>", "<s>", "</s>", *ROLE_TOKENS]

#: One line per message, its role as a special token. An assistant message and the ``eos_token`` that ends
#: it sit inside ``{% generation %}``: the tokens TRL's ``assistant_only_loss`` trains on (the model learns to
#: answer and to stop, never to write the user's side). ``add_generation_prompt`` opens an assistant turn.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] == 'assistant' %}"
    "<|assistant|> {% generation %}{{ message['content'] }}{{ eos_token }}{% endgeneration %}\n"
    "{% else %}<|{{ message['role'] }}|> {{ message['content'] }}\n{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|> {% endif %}"
)


def mixture_texts(mixture, limit: int = 5_000):
    """Message texts of the first ``limit`` rows: what the offline tokenizer is trained on."""
    for row in itertools.islice(mixture, limit):
        for message in row["messages"]:
            yield message["content"]


def build_tokenizer(texts, vocab_size: int = 600) -> PreTrainedTokenizerFast:
    """A small BPE tokenizer trained here, with the chat template; works for spaced and unspaced scripts."""
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.normalizer = normalizers.NFKC()
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False)
    tokenizer.train_from_iterator(texts, trainer=trainer)
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        pad_token="<pad>",
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        additional_special_tokens=ROLE_TOKENS,
    )
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


def tiny_model(tokenizer: PreTrainedTokenizerFast, max_length: int, seed: int) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=max_length,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=True,
    )
    return LlamaForCausalLM(config)


def train(
    mixture,
    steps: int = 20,
    seed: int = 0,
    max_length: int = 128,
    batch_size: int = 4,
    learning_rate: float = 5e-3,
    output_dir: str | None = None,
) -> tuple[list[float], SFTTrainer]:
    """Run ``steps`` optimizer steps of TRL's SFTTrainer on the CPU (assistant-only loss, packing); return the
    loss of every step."""
    transformers.set_seed(seed)
    tokenizer = build_tokenizer(mixture_texts(mixture))
    model = tiny_model(tokenizer, max_length, seed)
    with tempfile.TemporaryDirectory(prefix="convhub-train-") as scratch:
        arguments = SFTConfig(
            output_dir=output_dir or scratch,
            max_steps=steps,
            per_device_train_batch_size=batch_size,
            learning_rate=learning_rate,
            lr_scheduler_type="constant",
            logging_steps=1,
            save_strategy="no",
            report_to="none",
            use_cpu=True,
            bf16=False,
            activation_checkpointing=False,
            seed=seed,
            data_seed=seed,
            dataloader_num_workers=0,
            disable_tqdm=True,
            optim="adamw_torch",
            max_length=max_length,
            packing=True,
            assistant_only_loss=True,
        )
        trainer = SFTTrainer(
            model=model,
            args=arguments,
            train_dataset=mixture.select_columns(["messages"]),
            processing_class=tokenizer,
        )
        trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    return losses, trainer


def load_mixture(location: str | None, recipe: str | None, streaming: bool):
    """A written mixture (folder or Hub repo) or a recipe mixed on the fly."""
    if recipe is not None:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout too
        from convhub.mix import mixture

        return mixture(recipe, streaming=streaming)
    return datasets.load_dataset(location, "messages", split="train", streaming=streaming)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mixture", nargs="?", help="a mixture folder (convhub mix --output) or Hub repo id")
    parser.add_argument("--recipe", help="mix this recipe on the fly instead of loading a written mixture")
    parser.add_argument("--streaming", action="store_true", help="stream the rows (an IterableDataset)")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-length", type=int, default=128)
    args = parser.parse_args(argv)
    if (args.mixture is None) == (args.recipe is None):
        parser.error("give a MIXTURE folder/repo or --recipe (one of them)")
    mixture = load_mixture(args.mixture, args.recipe, args.streaming)
    losses, trainer = train(mixture, steps=args.steps, seed=args.seed, max_length=args.max_length)
    print(
        f"model: {trainer.model.num_parameters():,} parameters; vocabulary {trainer.model.config.vocab_size}"
    )
    print("loss per step: " + " ".join(f"{loss:.3f}" for loss in losses))
    first, last = _mean(losses[:3]), _mean(losses[-3:])
    print(f"first 3 steps {first:.3f} → last 3 steps {last:.3f}")
    return 0 if all(math.isfinite(loss) for loss in losses) and last < first else 1


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


if __name__ == "__main__":
    sys.exit(main())
