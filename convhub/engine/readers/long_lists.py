"""A JSON-list element decoded as the reader's buffer cuts it (:func:`decode_with_long_lists`), a large one's long
lists held as their text (:class:`LazyJsonArray`), not as Python values.

Why: a LoCoMo sample or a LongMemEval instance of one session of a million tiny turns decoded by ``json`` whole is
a dict per turn, several times the input before its parser starts, and the build's peak with the parser's Arrow
turns beside it (issue 54; ``docs/performance.md``). So the element is walked in Python only along the paths its
source names (``LongLists``); every other value, and every item of a list on such a path, is read by ``json``'s
own decoder (``raw_decode``), so each value is exactly the one ``json.loads`` gives (NaN, integers of any size,
lone surrogates, the last of duplicate keys).
"""

from __future__ import annotations

import json
import math
import re
from array import array
from collections.abc import Callable, Iterator, Sequence
from json.decoder import scanstring as _scanstring  # pyright: ignore[reportAttributeAccessIssue]  (json reads keys with it)
from typing import Any

#: A list on a long-list path of more items than this keeps none: each is decoded (a syntax error is found where
#: it is) and let go, the list keeps its text (``ArrowList.ROWS_CHUNK``: the parsers make as long a session Arrow).
KEPT_ITEMS = 4096
#: A lazy list notes where every ``STRIDE``-th item starts, for indexing without decoding from the first.
STRIDE = 1024

#: The longest path (``LongLists``) a source may name: lazy lists lie no deeper.
DEEPEST_PATH = 4
#: A path into an element whose list, when long, is lazy: each step a key (a string, or a pattern its keys match
#: whole) or ``int`` for every item of a list. LoCoMo's: ``("conversation", re.compile(r"session_[1-9]\d*"))``;
#: LongMemEval's: ``("haystack_sessions", int)``.
LongLists = tuple[tuple["str | re.Pattern[str] | type[int]", ...], ...]

JSON_SPACE = re.compile(r"[ \t\n\r]*")  # JSON's whitespace, as json's decoder skips it
_DECODER = json.JSONDecoder()  # (as the reader's: json.loads's values)
_SEPARATOR = re.compile(r"[ \t\n\r]*,?[ \t\n\r]*")  # (between two items of a list read whole before)


def may_be_cut(error: json.JSONDecodeError, text: str) -> bool:
    """Whether more text after the buffer's end could make this error go away (else it is the file's own):
    JSON is read left to right, so only an error at the end, or an unterminated string, may be the cut."""
    return error.pos >= len(text) - 16 or error.msg.startswith("Unterminated string")


class _Broken(Exception):
    """The walk met something it does not read: ``json`` decodes the element whole to say what."""


class _Large(Exception):
    """A value that is not read whole by ``json``: it is walked, its long lists lazy."""


class LazyJsonArray(Sequence):
    """A JSON list held as its text: ``len``, iteration, indexing and equality as the list ``json.loads`` gives,
    each item decoded again (by ``json``'s decoder, from the same text) when it is reached. Not a ``list``: what
    stores or encodes a raw value takes :func:`materialized`; a parser iterates it once.

    ``starts``: where every ``STRIDE``-th of its ``count`` items starts in ``text``, which it copies its own span
    of, up to ``stop`` (its ``]``), not holding the reader's buffer."""

    __slots__ = ("_length", "_starts", "_text")

    def __init__(self, text: str, stop: int, starts: array, count: int) -> None:
        first = starts[0]
        self._text, self._length = text[first:stop], count
        self._starts = array("q", (start - first for start in starts))

    def _items_from(self, index: int) -> Iterator[Any]:
        position = self._starts[index // STRIDE]
        for number in range(index - index % STRIDE, self._length):
            item, position = _DECODER.raw_decode(self._text, position)
            position = _SEPARATOR.match(self._text, position).end()  # type: ignore[union-attr]  (past the comma)
            if number >= index:
                yield item

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[Any]:
        return self._items_from(0)

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return list(self)[index]
        position = index + self._length if index < 0 else index
        if not 0 <= position < self._length:
            raise IndexError("list index out of range")
        return next(self._items_from(position))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (list, LazyJsonArray)):
            return NotImplemented
        return len(self) == len(other) and all(
            mine == theirs for mine, theirs in zip(self, other, strict=True)
        )

    __hash__ = None  # type: ignore[assignment]  # (as a list's)

    def __repr__(self) -> str:
        return f"LazyJsonArray({self._length} items)"


#: What a parser takes for a JSON list where its source reads long lists lazily.
JSON_LIST = (list, LazyJsonArray)


def materialized(value: Any, depth: int = DEEPEST_PATH) -> Any:
    """``value`` with every :class:`LazyJsonArray` in it (in dicts and lists down to ``depth`` levels, where a
    path puts them) made the list it stands for, for what stores or encodes a raw record whole (the quarantine);
    ``value`` itself when it holds none. (Not deeper: a raw value nested thousands deep is no stack's trouble.)"""
    if isinstance(value, LazyJsonArray):
        return [materialized(item, depth - 1) for item in value]
    if depth <= 0 or type(value) not in (dict, list):
        return value
    if type(value) is dict:
        made = {key: materialized(item, depth - 1) for key, item in value.items()}
        return value if all(made[key] is item for key, item in value.items()) else made
    made_items = [materialized(item, depth - 1) for item in value]
    return value if all(mine is item for mine, item in zip(made_items, value, strict=True)) else made_items


#: Gives the reader's buffer with more of the file after it (the same text, longer), or None at the end.
ReadMore = Callable[[], "str | None"]


def decode_with_long_lists(
    text: str, pos: int, long_lists: LongLists, more: ReadMore, large: int
) -> tuple[Any, int]:
    """The value at ``text[pos]`` and its end, reading on (``more``) where the text ends inside it: ``json``'s
    value, unless the text holds more than ``large`` characters from ``pos`` before it is read (a large value, or
    one after it in the buffer); then it is walked with its long lists on ``long_lists`` lazy, the walk reading
    on, not begun again. What the walk cannot read, ``json``'s decoder reads whole, raising its own error
    (``JSONDecodeError``, ``ValueError``, ``RecursionError``): an error is the one, at the byte, that a whole
    decode raises."""
    if any(len(path) > DEEPEST_PATH for path in long_lists):
        raise ValueError(f"a long-list path of more than {DEEPEST_PATH} steps")
    walk = _Walk(text, more)
    try:
        try:
            return walk.leaf(pos, large if long_lists else math.inf)
        except _Large:
            return walk.value(pos, long_lists)
    except _Broken:
        return _DECODER.raw_decode(walk.text, pos)


class _Walk:
    """One walk over an element's text (see :func:`decode_with_long_lists`)."""

    def __init__(self, text: str, more: ReadMore) -> None:
        self.text, self.more = text, more

    def read_more(self) -> bool:
        """More of the file after the text (positions in it stay), or False at its end."""
        text = self.more()
        if text is None:
            return False
        self.text = text
        return True

    def value(self, pos: int, paths: LongLists) -> tuple[Any, int]:
        char = self.text[pos : pos + 1]
        if () in paths and char == "[":
            return self.list(pos, (), long=True)
        if char == "{" and (paths := tuple(path for path in paths if path and path[0] is not int)):
            return self.object(pos, paths)
        if char == "[" and (paths := tuple(path for path in paths if path and path[0] is int)):
            return self.list(pos, tuple(path[1:] for path in paths))
        return self.leaf(pos)

    def leaf(self, pos: int, most: float = math.inf) -> tuple[Any, int]:
        """One value read by ``json``'s decoder (a number at the text's end read again with more after it), or
        :class:`_Large` once the text holds more than ``most`` characters from ``pos`` and the value is unread."""
        while True:
            if len(self.text) - pos > most:
                raise _Large
            try:
                value, end = _DECODER.raw_decode(self.text, pos)
            except json.JSONDecodeError as error:
                self.read_more_or_break(error)
                continue
            except (ValueError, RecursionError):
                raise _Broken from None
            if end < len(self.text) or not self.read_more():
                return value, end

    def read_more_or_break(self, error: json.JSONDecodeError) -> None:
        """More of the file where it could make ``error`` go away (as the reader judges a whole decode's)."""
        if not (may_be_cut(error, self.text) and self.read_more()):
            raise _Broken from None

    def space(self, pos: int) -> int:
        """Past the spaces at ``pos``, which must be before the end of the file."""
        while (end := JSON_SPACE.match(self.text, pos).end()) >= len(self.text):  # type: ignore[union-attr]
            if not self.read_more():
                raise _Broken
        return end

    def after_item(self, pos: int, closing: str) -> tuple[int, bool]:
        """Past the ``,`` (False) or ``closing`` (True) after an item."""
        pos = self.space(pos)
        if self.text[pos] == closing:
            return pos + 1, True
        if self.text[pos] != ",":
            raise _Broken
        return self.space(pos + 1), False

    def object(self, pos: int, paths: LongLists) -> tuple[dict, int]:
        result: dict[str, Any] = {}
        pos = self.space(pos + 1)
        if self.text[pos] == "}":
            return result, pos + 1
        done = False
        while not done:
            if self.text[pos] != '"':
                raise _Broken
            while True:
                try:
                    key, pos = _scanstring(self.text, pos + 1, True)
                    break
                except json.JSONDecodeError as error:
                    self.read_more_or_break(error)
            pos = self.space(pos)
            if self.text[pos] != ":":
                raise _Broken
            below = tuple(  # (the paths whose step is this key, or a pattern it matches whole)
                path[1:]
                for path in paths
                if path[0] == key or (isinstance(path[0], re.Pattern) and path[0].fullmatch(key))
            )
            result[key], pos = self.value(self.space(pos + 1), below)
            pos, done = self.after_item(pos, "}")
        return result, pos

    def list(self, pos: int, paths: LongLists, long: bool = False) -> tuple[list | LazyJsonArray, int]:
        """A list, its items walked on ``paths``; a ``long`` one's (on a long-list path) read by ``json``, and past
        ``KEPT_ITEMS`` of them none kept: then a :class:`LazyJsonArray` of them."""
        kept: list[Any] | None = []
        starts, count = array("q"), 0
        pos = self.space(pos + 1)
        if self.text[pos] == "]":
            return [], pos + 1
        done = False
        while not done:
            if long and count % STRIDE == 0:
                starts.append(pos)
            item, pos = self.leaf(pos) if long else self.value(pos, paths)
            count += 1
            if kept is not None:
                kept.append(item)
                if long and count > KEPT_ITEMS:
                    kept = None
            del item
            pos, done = self.after_item(pos, "]")
        if kept is not None:
            return kept, pos
        return LazyJsonArray(self.text, pos - 1, starts, count), pos
