"""Source name → builder class. A new source is a new folder under ``builders/`` plus one line here."""

from __future__ import annotations

import importlib

from convhub.engine.sources.builder import ConversationBuilder

BUILDERS = {
    "locomo": "convhub.builders.locomo.builder:LocomoBuilder",
    "gigamemory": "convhub.builders.gigamemory.builder:GigamemoryBuilder",
    "convlab": "convhub.builders.convlab.builder:ConvLabBuilder",
    "mnbvc": "convhub.builders.mnbvc.builder:MnbvcBuilder",
    "longmemeval": "convhub.builders.longmemeval.builder:LongMemEvalBuilder",
    "beam": "convhub.builders.beam.builder:BeamBuilder",
}


def names() -> list[str]:
    return list(BUILDERS)


def get(name: str) -> type[ConversationBuilder]:
    if name not in BUILDERS:
        raise KeyError(f"unknown source {name!r}; known: {', '.join(BUILDERS)}")
    module, attribute = BUILDERS[name].split(":")
    return getattr(importlib.import_module(module), attribute)
