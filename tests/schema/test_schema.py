"""The canonical record's TypedDicts say the same shape as its Features, field for field and type for type."""

from __future__ import annotations

import collections.abc
import datetime
import types
import typing

from datasets import Features, List, Value

from convhub import schema

SCALARS = {"string": str, "int32": int, "bool": bool, "timestamp[ms]": datetime.datetime}


def _python_type(feature) -> object:
    if isinstance(feature, Value):
        return SCALARS[feature.dtype]
    if isinstance(feature, dict):  # a struct: its TypedDict
        return dict
    assert isinstance(feature, List), feature
    return list


def _check(typed: type, features: dict, path: str) -> None:
    hints = typing.get_type_hints(typed)
    assert list(hints) == list(features), (path, list(hints), list(features))
    for name, feature in features.items():
        hint = hints[name]
        args = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        base = typing.get_origin(hint) or hint
        if base in (typing.Union, types.UnionType):
            (base,) = args
            args = list(typing.get_args(base))
            base = typing.get_origin(base) or base
        if isinstance(feature, dict):  # a struct (a question's audit): its TypedDict, field for field
            assert typing.is_typeddict(base), (path, name, hint)
            _check(base, feature, f"{path}.{name}")
            continue
        # a list the record may hold as another sequence (a long session's turns as an Arrow array) says so
        allowed = (
            (list, collections.abc.Sequence) if _python_type(feature) is list else (_python_type(feature),)
        )
        assert base in allowed, (path, name, hint, feature)
        if isinstance(feature, List) and isinstance(feature.feature, dict):
            (item,) = args
            _check(item, feature.feature, f"{path}.{name}")


def test_the_conversation_typeddict_is_the_sessions_features():
    _check(schema.Conversation, dict(schema.SESSIONS_FEATURES), "sessions")


def test_the_message_typeddict_is_the_messages_feature():
    _check(schema.Message, schema.MESSAGE, "message")


def test_the_empty_values_have_every_field_of_their_typeddict():
    assert set(schema.empty_turn("t", "s", "user", "x")) == set(typing.get_type_hints(schema.Turn))
    assert set(schema.empty_session("s", [])) == set(typing.get_type_hints(schema.Session))
    assert set(schema.empty_question("q", "?")) == set(typing.get_type_hints(schema.Question))
    assert (
        Features(schema.SESSIONS_FEATURES).encode_example(
            {
                "conversation_id": "c",
                "source": "locomo",
                "subset": "s",
                "language": "en",
                "speakers": [],
                "sessions": [schema.empty_session("s", [schema.empty_turn("t", "a", "user", "hi")])],
                "questions": [schema.empty_question("q", "?")],
                "extra": None,
            }
        )["sessions"][0]["turns"][0]["text"]
        == "hi"
    )
