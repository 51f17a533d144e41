"""Source name → builder class. A new source is a new folder under ``builders/`` plus one line here."""

from __future__ import annotations

import importlib

from convhub.engine.builder import ConversationBuilder

BUILDERS = {
    "locomo": "builders.locomo.builder:LocomoBuilder",
    "gigamemory": "builders.gigamemory.builder:GigamemoryBuilder",
    "convlab": "builders.convlab.builder:ConvLabBuilder",
    "mnbvc": "builders.mnbvc.builder:MnbvcBuilder",
    "longmemeval": "builders.longmemeval.builder:LongMemEvalBuilder",
}


def names() -> list[str]:
    return list(BUILDERS)


def get(name: str) -> type[ConversationBuilder]:
    if name not in BUILDERS:
        raise KeyError(f"unknown source {name!r}; known: {', '.join(BUILDERS)}")
    module, attribute = BUILDERS[name].split(":")
    return getattr(importlib.import_module(module), attribute)
