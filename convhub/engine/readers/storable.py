"""The one storable-string check: whether Parquet can hold every string of a record, and where it cannot, which.

Parquet and Arrow store UTF-8 only; ``json`` reads a lone surrogate (``"\\ud800"``) into a Python string UTF-8
cannot encode, so a record holding one would crash the Arrow write, which ``convhub check`` would never reach. The
engine checks every record every source makes (``ConversationBuilder.records_of``: :func:`unstorable`), regrouped
rows cheaper by their ``marshal`` bytes (:class:`SurrogateScreen`); the quarantine checks its entries' text too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import orjson

from convhub.errors import SourceError

if TYPE_CHECKING:
    from convhub.engine.runners.input_shards import SortedPartition

#: What an unstorable record is rejected for.
LONE_SURROGATE = "holds a lone surrogate (e.g. the escape \\ud800), which UTF-8 and so Parquet cannot store"
_CONTAINERS = (dict, list, tuple)


def unstorable(value: Any, file: str, record: str | int | None) -> SourceError | None:
    """The error of a record (or table row) ``value`` of ``file`` Parquet cannot store, naming the field; None
    when it can."""
    field = unencodable_field(value)
    return None if field is None else SourceError(file, record, field, LONE_SURROGATE)


def unencodable_field(value: Any) -> str | None:
    """Where ``value`` holds a string UTF-8 cannot encode (a lone surrogate, which ``json`` reads from
    ``"\\ud800"``), as a path like ``sessions[0].turns[2].text``; None when every string is encodable.

    orjson refuses exactly such strings while encoding at memory speed, so the walk runs only for the rare value
    it refuses (or cannot say: deep nesting, huge integers). An Arrow array inside it
    (``convhub.engine.writers.arrow_rows.ArrowList``, a very long conversation's turns) is passed over without
    making it Python: Arrow holds UTF-8 only, and refused any other string when it was made. A key that is not a
    string (none in a record or a table row, whose keys are field names) is left to the walk too: orjson's option
    for such keys made every record's check slower. A value holding a long list is encoded in pieces
    (:func:`_encodes_in_pieces`).
    """
    kind = type(value)
    if (kind is dict and _holds_long_list(value, ENCODED_DEPTH)) or (
        (kind is list or kind is tuple) and len(value) > ENCODED_SLICE
    ):
        if _encodes_in_pieces(value, ENCODED_DEPTH):
            return None
    else:  # (inline: a regrouped row's key is checked so, a million times in a build)
        try:
            orjson.dumps(value, default=_arrow_or_repr)
            return None
        except (orjson.JSONEncodeError, TypeError):
            pass
    pending: list[tuple[str, Any]] = [("", value)]
    while pending:
        path, item = pending.pop()
        if type(item) is str and not _encodable(item):
            return path or "$"
        if type(item) is dict:
            for key, child in item.items():
                if type(key) is str and not _encodable(key):
                    return f"{path}.{key!a}" if path else ascii(key)
                pending.append((f"{path}.{key}" if path else str(key), child))
        elif type(item) in (list, tuple):
            pending.extend((f"{path}[{index}]", child) for index, child in enumerate(item))
    return None


#: How deep :func:`_encodes_in_pieces` looks for a long list: a record, its sessions, a session, its turns.
ENCODED_DEPTH = 3
#: A list of more elements than ``ENCODED_SLICE`` is encoded that many elements at a time; one of at most
#: ``ENCODED_SHORT_LIST`` is, at ``ENCODED_DEPTH`` or above, looked into element by element (a record's sessions).
ENCODED_SHORT_LIST = 64
ENCODED_SLICE = 4096


def _holds_long_list(value: dict, depth: int) -> bool:
    """Whether a list of more than ``ENCODED_SLICE`` elements lies within ``depth`` levels of ``value`` (a record
    or row), looking only into dicts and short lists, level by level in one loop: an ordinary record or row is then
    encoded in one call, a flat row's look costing a microsecond or two."""
    level = [value]
    for _ in range(depth):
        below = []
        for container in level:
            for item in container.values() if type(container) is dict else container:
                kind = type(item)
                if kind is dict:
                    below.append(item)
                elif kind is list or kind is tuple:
                    if len(item) > ENCODED_SLICE:
                        return True
                    if 0 < len(item) <= ENCODED_SHORT_LIST:
                        below.append(item)
        if not below:
            return False
        level = below
    return False


def _encodes_in_pieces(value: Any, depth: int) -> bool:
    """Whether orjson encodes ``value`` (every string of it encodable, every key a string), encoded in pieces no
    larger than a whole value below ``depth`` levels or ``ENCODED_SLICE`` elements of a long list: the memory of
    one piece's JSON, not the whole record's (encoded whole, a conversation of a million tiny turns is its whole
    JSON at once, which was its build's peak: issue 54, ``docs/performance.md``). Looking into a record's few
    containers costs some microseconds; the few orjson calls a record then needs encode what one call did."""
    kind = type(value)
    if kind in (list, tuple) and len(value) > ENCODED_SHORT_LIST:  # one piece when at most ENCODED_SLICE long
        return all(
            _encodes(value[start : start + ENCODED_SLICE]) for start in range(0, len(value), ENCODED_SLICE)
        )
    if depth == 0 or kind not in (dict, list, tuple):
        return _encodes(value)
    items = value.values() if kind is dict else value
    leaves = [item for item in items if type(item) not in _CONTAINERS]
    if kind is dict and not _encodes(list(value.keys())):  # a key with a lone surrogate: the walk names it
        return False
    return _encodes(leaves) and all(
        _encodes_in_pieces(item, depth - 1) for item in items if type(item) in _CONTAINERS
    )


def _encodes(value: Any) -> bool:
    try:
        orjson.dumps(value, default=_arrow_or_repr)
        return True
    except (orjson.JSONEncodeError, TypeError):
        return False


def _arrow_or_repr(item: Any) -> str | None:
    """What ``unencodable_field``'s encoding writes for a value JSON has no form for: nothing for an Arrow array
    (pyarrow's ``__arrow_array__``: valid UTF-8 throughout), else its ``repr``."""
    return None if hasattr(item, "__arrow_array__") else repr(item)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


#: A lone surrogate (U+D800 to U+DFFF) in a payload's ``marshal`` bytes, which write a string as UTF-8 with
#: surrogates passed: the lead byte 0xED, then 0xA0 or above. UTF-8 proper never has it (after 0xED it stops at
#: 0x9F).
_LONE_SURROGATE_MARSHALLED = re.compile(rb"\xed[\xa0-\xbf]")


def may_hold_lone_surrogate(marshalled: bytes) -> bool:
    """Whether a value, given as its ``marshal.dumps`` bytes (a regrouped row's payload), may hold a string UTF-8
    cannot encode. False says that none of its strings does; True only that one may (its numbers and bytes are
    written as they are), for :func:`unencodable_field` to say (why it pays: :class:`SurrogateScreen`)."""
    return _LONE_SURROGATE_MARSHALLED.search(marshalled) is not None


class SurrogateScreen:
    """A sorted partition's (sort key, payload) rows, passed on as they are, and whether every string they and the
    partition's file names carry is one UTF-8 can encode (``clean``).

    A grouped record is made of those strings alone (``grouped_records``), so while ``clean`` holds, the records
    made so far need no check of their own: a scan of each payload's bytes (``may_hold_lone_surrogate``) and a
    check of each small key cost less than a check of every record (an encoding of the whole record). Once a row
    may hold a lone surrogate, every later record of the partition is checked as before, and the bad one rejected
    by name.
    """

    def __init__(self, partition: SortedPartition):
        self.rows = partition.rows
        self.clean = unencodable_field([name for name, _ in partition.group.files]) is None

    def __iter__(self) -> Iterator[tuple[tuple, bytes]]:
        for key, payload in self.rows:
            if self.clean:
                self.clean = not may_hold_lone_surrogate(payload) and unencodable_field(key) is None
            yield key, payload
