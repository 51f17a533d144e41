"""Source name → builder class, found by looking, not by a list: a source is a folder ``builders/<name>/`` holding a
``builder.py`` that defines one :class:`ConversationBuilder` subclass. Adding a folder adds the source to every
command, test and benchmark that asks ``names()``; nothing else names it (``docs/adding-a-source.md``).

``names()`` lists the folders without importing their builders (the CLI's choices cost no import of the parsers);
``get()`` imports the one asked for.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import pkgutil

from convhub.builder import ConversationBuilder

#: Where the sources live: ``builders/`` at the checkout's root, imported through the ``convhub/builders`` link.
#: Looked up by name, as a plugin folder is: the sources import convhub, convhub never imports them by name.
PACKAGE = "convhub.builders"
#: The module of a source's folder that defines its builder.
BUILDER_MODULE = "builder"


def names() -> list[str]:
    """Every source, sorted by name: each package under ``builders/`` with a ``builder`` module."""
    return list(_found())


@functools.cache
def _found() -> tuple[str, ...]:
    packages = [
        module.name
        for module in pkgutil.iter_modules(importlib.import_module(PACKAGE).__path__)
        if module.ispkg
    ]
    return tuple(sorted(name for name in packages if not name.startswith("_") and _has_builder(name)))


def _has_builder(name: str) -> bool:
    return importlib.util.find_spec(f"{PACKAGE}.{name}.{BUILDER_MODULE}") is not None


def module_name(name: str) -> str:
    """The package of source ``name`` (``convhub.builders.<name>``): its modules' loggers start with it."""
    return f"{PACKAGE}.{name}"


def get(name: str) -> type[ConversationBuilder]:
    """The builder class of source ``name``: the one ConversationBuilder subclass its ``builder`` module defines
    (classes it imports, such as a base class, do not count). An unknown name is a KeyError naming the known."""
    if name not in _found():
        raise KeyError(f"unknown source {name!r}; known: {', '.join(_found())}")
    return _builder_class(name)


@functools.cache
def _builder_class(name: str) -> type[ConversationBuilder]:
    module = importlib.import_module(f"{module_name(name)}.{BUILDER_MODULE}")
    defined = [
        value
        for _, value in inspect.getmembers(module, inspect.isclass)
        if issubclass(value, ConversationBuilder) and value.__module__ == module.__name__
    ]
    if len(defined) != 1:
        classes = ", ".join(cls.__name__ for cls in defined) or "none"
        raise TypeError(
            f"{module.__name__} must define exactly one ConversationBuilder subclass, the source's; it defines "
            f"{classes}"
        )
    return defined[0]
