"""Per-row measures of the shared views: turns, content hash, token and character counts, filters, dedup."""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections import Counter

from datasets import Features, Value

from convhub.mix.recipe import Filters, RecipeError, SourceEntry

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


def add_provenance(batch: dict, indices: list[int], entry_index: int, count=whitespace_tokens) -> dict:
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


def truncate_row(row: dict, limit: int, count) -> dict:
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


def passes_filters(languages, subsets, turns, filters: Filters) -> list[bool]:
    keep = []
    for language, subset, count in zip(languages, subsets, turns, strict=True):
        keep.append(
            (filters.languages is None or _language_matches(language, filters.languages))
            and (filters.subsets is None or subset in filters.subsets)
            and (filters.min_turns is None or count >= filters.min_turns)
            and (filters.max_turns is None or count <= filters.max_turns)
        )
    return keep


def recast_chat(messages: list[dict], entry: SourceEntry) -> dict:
    """A row's messages with the entry's role renaming and system message."""
    roles = dict(entry.roles)
    recast = [{"role": roles.get(m["role"], m["role"]), "content": m["content"]} for m in messages]
    if entry.system is not None:
        recast = [m for m in recast[:1] if m["role"] != "system"] + recast[1:]
        if entry.system:
            recast.insert(0, {"role": "system", "content": entry.system})
    return {"messages": recast}


def chat_passes(messages: list[dict], filters: Filters) -> bool:
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
