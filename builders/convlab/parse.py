"""ConvLab-3 unified datasets (``dialogues.json``, ``ontology.json``, databases) → canonical records and rows.

Pure functions. Every ConvLab dialogue becomes one canonical record with one session; every field is
reachable: typed where the shared schema has a place (acts, state, speaker, utterance), raw in an
``extra`` otherwise. Each ``*_to_source`` function is the exact inverse of its parser, so that ``convhub
export`` (``convhub.convlab.export``) rebuilds ``dialogues.json`` and ``ontology.json`` as equal JSON values;
the parsers check that inverse on every value and keep the raw value in ``extra`` whenever the typed form
would not give it back.

``dialogues.json`` is read without loading it whole: :func:`scan_json_array` walks the top-level list once
and reports the byte range of every dialogue, and workers read only the ranges of their shard. The index
of an indented file of good dialogues comes from :func:`index_plain_list`, which stays in bytes and gives
the same ranges or declines (the decoding scan then runs and reports any problem).
"""

from __future__ import annotations

import ast
import codecs
import json
import re
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

import orjson
from convhub import schema
from convhub.errors import NESTED_TOO_DEEPLY, Notes, Reject, SourceError, raise_error, require
from convhub.jsonio import loads_exact

ACT_KINDS = ("categorical", "non-categorical", "binary")
ACT_KEYS = {
    "categorical": ("intent", "domain", "slot", "value"),
    "non-categorical": ("intent", "domain", "slot", "value"),
    "binary": ("intent", "domain", "slot"),
}
SPAN_KEYS = ("start", "end")
ROLES = {"user": "user", "system": "assistant"}
#: ConvLab-3 datasets that are not English; every other one is.
LANGUAGES = {"crosswoz": "zh"}

#: Keys convhub itself writes into a turn's ``extra`` (its markers). A source key never lands on one: see
#: :func:`escape_turn_key`.
ACTS_ABSENT = "dialogue_acts_absent"
ACT_KINDS_KEY = "dialogue_acts_kinds"
STATE_EMPTY_DOMAINS = "state_empty_domains"
TURN_MARKERS = frozenset((ACTS_ABSENT, ACT_KINDS_KEY, STATE_EMPTY_DOMAINS))
_ESCAPE = "\\"
TURN_KEYS = {"speaker", "utterance", "utt_idx", "dialogue_acts", "state"}
DIALOGUE_KEYS = {"dataset", "data_split", "dialogue_id", "turns"}
SPLIT_NAME = re.compile(r"^\w+(\.\w+)*$")
#: Split names ``datasets`` keeps for itself (``all`` is the union of every split, in any case).
RESERVED_SPLITS = frozenset(("all",))


# -- streaming the top-level JSON list ---------------------------------------------------------


def _indented_object(text: str, pos: int) -> tuple[Any, int, int] | None:
    """(value, end, byte size) of the object at ``text[pos]`` when the file is indented, else None.

    ``json.dump(..., indent=N)`` closes an object opened on a line of its own at the same indentation, and a
    JSON string never holds a raw newline: so the first ``"\\n" + indentation + "}"`` after ``pos`` is the
    candidate end, found with one ``str.find``. The candidate is kept only when orjson reads the slice as
    one complete object, which proves it is the very element ``raw_decode`` would return (an object ends
    at its matching brace); any doubt returns None and the caller decodes as before.
    """
    if not text.startswith("{", pos):
        return None
    line_start = text.rfind("\n", 0, pos) + 1
    if line_start == 0 or text[line_start:pos].strip(" \t"):
        return None
    closing = "\n" + text[line_start:pos] + "}"
    found = text.find(closing, pos)
    if found < 0:
        return None
    end = found + len(closing)
    data = text[pos:end].encode("utf-8")
    try:  # (numbers past 64 bits come back as floats: the index reads only the id and the split)
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return (value, end, len(data)) if isinstance(value, dict) else None


def _runs_past_buffer(decoder: json.JSONDecoder, text: str, pos: int) -> bool:
    """Whether the element at ``pos`` does not decode from what the buffer holds (cut by its end, most often).

    ``raw_decode(text, pos)`` would say the same, but its error counts the lines of the whole buffer before
    the cut (4 MB): decoding a copy of the element's start makes that count short. The caller then reads
    more, exactly as the decoding loop below does after a failed ``raw_decode``.
    """
    element = text[pos:]
    try:
        decoder.raw_decode(element)
    except json.JSONDecodeError as error:
        return _maybe_cut(error, element)  # (an error the file has whatever follows: reading on won't help)
    return False


#: A key every ConvLab dialogue has once and nothing inside one has: it counts the dialogues a break holds.
_DIALOGUE_KEY = re.compile(r'"dialogue_id"\s*:')
_TEXT_SPACE = re.compile(r"[ \t\r\n]*")
_SCAN_SPACE = re.compile("[ \t\r\n\ufeff]*")
#: How far past a candidate dialogue start :func:`scan_json_array` reads to decide whether it is one.
_RESYNC_MAX_DIALOGUE_CHARS = 64 << 20
#: What :func:`scan_json_array` calls at a break in the list: the error, the exact bytes it skipped (from
#: the break to the next dialogue it could read, or to the end of the file) and how many dialogues they held.
OnBreak = Callable[[SourceError, bytes, int], None]


def _maybe_cut(error: json.JSONDecodeError, text: str) -> bool:
    """Whether more text after the buffer's end could make this error go away (else it is the file's own).

    JSON is read left to right: an error well before the end of the text read so far is where the file
    breaks whatever follows, except an unterminated string (named at its start, it may end after the cut).
    """
    return error.pos >= len(text) - 16 or error.msg.startswith("Unterminated string")


def scan_json_array(
    stream: IO[bytes], path: str, chunk_size: int = 1 << 22, on_break: OnBreak | None = None
) -> Iterator[tuple[int, int, Any]]:
    """(start byte, end byte, value) of each element of a top-level JSON list, reading ``chunk_size`` at a time.

    Memory holds one chunk and one element, never the whole file: this is how a MultiWOZ-sized
    ``dialogues.json`` (200+ MB) is indexed. Byte offsets let a worker ``seek`` to its dialogues later.

    Where the list breaks (invalid JSON, a missing comma, a truncated end) the error is raised; given
    ``on_break``, the scan instead skips to the next ``{`` that decodes to an object with a
    ``dialogue_id`` followed by ``,`` or ``]`` (the next dialogue of the list), reports the skipped bytes
    and the dialogues they held (each has one ``"dialogue_id":``; a broken object counts at least
    one) to ``on_break``, and goes on: one missing comma costs no dialogue, a broken dialogue that one.
    Positions after a break count the dialogues lost in it, so they stay positions in the file.
    """
    decoder = json.JSONDecoder()
    utf8 = codecs.getincrementaldecoder("utf-8")()
    text, pos, byte_pos, eof = "", 0, 0, False

    def fill() -> bool:
        nonlocal text, pos, eof
        if eof:
            return False
        chunk = stream.read(max(chunk_size, len(text) - pos))
        eof = not chunk
        try:
            text = text[pos:] + utf8.decode(chunk, final=eof)
        except UnicodeDecodeError as error:
            raise SourceError(path, None, None, f"not valid UTF-8: {error}") from error
        pos = 0
        return True

    def skip_space() -> str:
        nonlocal pos, byte_pos
        while True:
            end = _SCAN_SPACE.match(
                text, pos
            ).end()  # (one C loop: a long run of spaces costs no Python step each)
            if end > pos:
                byte_pos += end - pos + 2 * text.count("\ufeff", pos, end)  # a BOM is 3 bytes
                pos = end
            if pos < len(text) or not fill():
                return text[pos] if pos < len(text) else ""

    def candidate(at: int) -> bool | None:
        """Whether a dialogue of the list starts at ``text[at]`` (None: the buffer ends too soon to say)."""
        try:
            value, end = decoder.raw_decode(text, at)
        except json.JSONDecodeError as error:
            cut = _maybe_cut(error, text)
            return None if cut and not eof and len(text) - at < _RESYNC_MAX_DIALOGUE_CHARS else False
        except RecursionError:
            return False
        if not isinstance(value, dict) or "dialogue_id" not in value:
            return False
        after = _TEXT_SPACE.match(text, end).end()
        if after == len(text):
            return None if not eof else False
        return text[after] in ",]"

    def resync(error: SourceError, search_from: int, in_element: bool) -> bool:
        """Skip from ``pos`` to the next dialogue (True) or to the end of the file (False); report the skip."""
        nonlocal pos, byte_pos, index
        offset = search_from - pos  # (offsets from pos: filling the buffer moves pos to 0)
        while True:
            found = text.find("{", pos + offset)
            if found < 0:
                offset = len(text) - pos
                if fill():
                    continue
                found = len(text)
                break
            verdict, offset = candidate(found), found - pos
            if verdict is None and fill():
                continue  # the same candidate, with more of the file
            if verdict:
                break
            offset += 1
        span = text[pos:found]
        raw = span.encode("utf-8")
        lost = len(_DIALOGUE_KEY.findall(span))
        if in_element and span.startswith("{"):  # a broken object is a dialogue even without its id
            lost = max(lost, 1)
        on_break(error, raw, lost)
        pos, byte_pos, index = found, byte_pos + len(raw), index + lost
        return found < len(text)

    first = skip_space()
    if first == "":
        raise SourceError(path, None, None, "the file is empty (expected a JSON list of dialogues)")
    if first != "[":
        raise SourceError(path, None, None, "expected a JSON list of dialogues")
    pos, byte_pos = pos + 1, byte_pos + 1
    index, hits, misses, resumed = 0, 0, 0, False
    while True:
        char = skip_space()
        if char == "]" and not resumed:
            pos, byte_pos = pos + 1, byte_pos + 1
            break
        if index and not resumed:
            if char != ",":
                error = SourceError(
                    path, index, None, f"expected ',' or ']' after dialogue {index - 1}, got {char!r}"
                )
                if on_break is None:
                    raise error
                if not resync(error, pos, in_element=False):
                    return
                resumed = True
                continue
            pos, byte_pos = pos + 1, byte_pos + 1
            skip_space()
        resumed = False
        # the fast path, while it mostly works: a compact file stops trying at its first element
        fast = None
        while misses <= hits:
            fast = _indented_object(text, pos)
            if fast is not None:
                break
            misses += 1
            if eof or not _runs_past_buffer(decoder, text, pos) or not fill():
                break
        if fast is not None:
            value, end, size = fast
            yield byte_pos, byte_pos + size, value
            pos, byte_pos, index, hits = end, byte_pos + size, index + 1, hits + 1
            continue
        broken = None
        while True:
            try:
                value, end = decoder.raw_decode(text, pos)
            except json.JSONDecodeError as error:
                if _maybe_cut(error, text) and fill():
                    continue
                broken = SourceError(path, index, None, f"not valid JSON: {error}")
                if on_break is None:
                    raise broken from error
            except RecursionError:
                broken = SourceError(path, index, None, NESTED_TOO_DEEPLY)
                if on_break is None:
                    raise broken from None
            else:
                if end == len(text) and not eof and not isinstance(value, (dict, list)) and fill():
                    continue  # a number cut at the chunk's end
            break
        if broken is not None:
            if not resync(broken, pos + 1, in_element=True):
                return
            resumed = True
            continue
        size = len(text[pos:end].encode("utf-8"))
        yield byte_pos, byte_pos + size, value
        pos, byte_pos, index = end, byte_pos + size, index + 1
    if skip_space():
        raise SourceError(path, None, None, "data after the end of the top-level list")


_BYTES_SPACE = re.compile(rb"[ \t\r\n]*")
#: The fast index gives up on a dialogue larger than this (the decoding scan reads it a chunk at a time).
_FAST_MAX_DIALOGUE_BYTES = 64 << 20


def index_plain_list(
    stream: IO[bytes], path: str, chunk_size: int = 1 << 22
) -> dict[str, list[tuple[int, int, int]]] | None:
    """:func:`index_dialogues`' index of an indented list of good dialogues, a third cheaper; else None.

    The scan of :func:`scan_json_array` decodes the file to text, then finds and encodes every dialogue
    again: this one stays in bytes. A dialogue ends at the first ``"\\n" + its indentation + "}"`` (what
    ``json.dump(..., indent=N)`` writes), and is kept only when orjson reads exactly that slice as one
    object: an object ends at its matching brace, so the slice is the very element the decoding scan
    finds, and orjson also proves it valid UTF-8 and JSON. Between dialogues only ASCII whitespace and
    commas are allowed. Anything else (a BOM, a compact file, bad JSON, a dialogue the index would
    refuse) returns None, and the caller runs :func:`index_dialogues`, which reports every problem
    exactly as before: None is never an error, only "not sure".
    """
    buffer, base, pos, eof = b"", 0, 0, False
    gave_up: list[bool] = []  # (next_char's None then means "not sure", not the end of the file)

    def fill() -> bool:
        """Read one more chunk, keeping the buffer from the line holding ``pos`` (its indentation)."""
        nonlocal buffer, base, pos, eof
        if eof:
            return False
        chunk = stream.read(chunk_size)
        if not chunk:
            eof = True
            return False
        keep = max(0, buffer.rfind(b"\n", 0, pos))
        buffer, base, pos = buffer[keep:] + chunk, base + keep, pos - keep
        return True

    def next_char() -> int | None:
        nonlocal pos
        while True:
            pos = _BYTES_SPACE.match(buffer, pos).end()
            if pos < len(buffer):
                return buffer[pos]
            if pos - max(0, buffer.rfind(b"\n", 0, pos)) > _FAST_MAX_DIALOGUE_BYTES:
                gave_up.append(True)  # a line of spaces longer than any dialogue: not an indented list
                return None
            if not fill():
                return None

    if next_char() != ord("[") or gave_up:
        return None
    pos += 1
    by_split: dict[str, list[tuple[int, int, int]]] = {}
    seen: set[str] = set()
    position = 0
    while True:
        char = next_char()
        if char == ord("]"):
            pos += 1
            break
        if position:
            if char != ord(","):
                return None
            pos += 1
            char = next_char()
        if char != ord("{"):
            return None
        line_start = buffer.rfind(b"\n", 0, pos) + 1
        indentation = buffer[line_start:pos]
        if line_start == 0 or indentation.strip(b" \t"):
            return None
        closing = b"\n" + indentation + b"}"
        searched = 0  # bytes after pos already searched
        while (found := buffer.find(closing, pos + searched)) < 0:
            searched = max(0, len(buffer) - pos - len(closing))
            if searched > _FAST_MAX_DIALOGUE_BYTES or not fill():
                return None
        end = found + len(closing)
        try:
            dialogue = orjson.loads(memoryview(buffer)[pos:end])
            _index_dialogue(dialogue, position, path, seen)
        except (orjson.JSONDecodeError, SourceError):
            return None
        seen.add(dialogue["dialogue_id"])
        by_split.setdefault(dialogue["data_split"], []).append((base + pos, base + end, position))
        pos, position = end, position + 1
    if next_char() is not None or gave_up:
        return None
    return by_split


def index_dialogues(
    stream: IO[bytes], path: str, reject: Reject = raise_error, recover: bool = False
) -> dict[str, list[tuple[int, int, int]]]:
    """Split → [(start byte, end byte, position in the file)] of its dialogues, checking ids are unique.

    A bad dialogue goes to ``reject`` with its value (raising by default). When the list itself breaks
    (invalid JSON, a truncated file), the rest of the file goes there once and what came before stays;
    with ``recover`` (``--on-bad-record skip``) the scan reads on from the next dialogue after the break,
    and ``reject`` gets the break's exact bytes, scope ``"span"`` and ``records``: the dialogues it held.
    (Invalid UTF-8 still ends the scan: the rest of the file goes to ``reject`` once.)
    """
    by_split: dict[str, list[tuple[int, int, int]]] = {}
    seen: set[str] = set()

    lost_before = 0  # (a position counts the dialogues lost in breaks before it)

    def on_break(error: SourceError, raw: bytes, lost: int) -> None:
        nonlocal lost_before
        lost_before += lost
        reject(error, raw, "span", records=lost)

    scan = scan_json_array(stream, path, on_break=on_break if recover else None)
    read = 0
    while True:
        try:
            start, end, dialogue = next(scan)
            position, read = read + lost_before, read + 1
        except StopIteration:
            break
        except SourceError as error:
            reject(error, None, "file")
            break
        try:
            _index_dialogue(dialogue, position, path, seen)
        except SourceError as error:
            reject(error, dialogue)
            continue
        seen.add(dialogue["dialogue_id"])
        by_split.setdefault(dialogue["data_split"], []).append((start, end, position))
    return by_split


def _index_dialogue(dialogue: Any, position: int, path: str, seen: set[str]) -> None:
    """Check what the index needs of one dialogue: an object with a usable split and a new id."""
    if not isinstance(dialogue, dict):
        raise SourceError(path, position, None, f"expected a dialogue object, got {type(dialogue).__name__}")
    split = require(dialogue, "data_split", str, path, position)
    if not SPLIT_NAME.match(split):
        raise SourceError(path, position, "data_split", f"{split!r} is not a usable split name")
    if split.lower() in RESERVED_SPLITS:
        named = dialogue.get("dialogue_id")
        named = f"dialogue {named!r}: " if isinstance(named, str) else ""
        problem = f"{named}{split!r} is a split name datasets reserves (the union of every split)"
        raise SourceError(path, position, "data_split", problem)
    dialogue_id = require(dialogue, "dialogue_id", str, path, position)
    if dialogue_id in seen:
        raise SourceError(path, position, "dialogue_id", f"duplicate dialogue_id {dialogue_id!r}")


def read_ranges(
    stream: IO[bytes], ranges: Iterable[tuple[int, int, int]], path: str
) -> Iterator[tuple[int, Any]]:
    """(position, dialogue) for each byte range, read in file order with forward seeks only."""
    for start, end, position in sorted(ranges):
        stream.seek(start)
        data = stream.read(end - start)
        try:
            yield position, loads_exact(data)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise SourceError(path, position, None, f"not valid JSON: {error}") from error


# -- dialogues ---------------------------------------------------------------------------------


def parse_dialogue(
    dialogue: Any, subset: str, notes: Notes, path: str = "<memory>", position: int = 0
) -> dict:
    """One ConvLab dialogue → one canonical record (one session holding every turn)."""
    if not isinstance(dialogue, dict):
        raise SourceError(path, position, None, f"expected a dialogue object, got {type(dialogue).__name__}")
    dialogue_id = require(dialogue, "dialogue_id", str, path, position)
    dataset = require(dialogue, "dataset", str, path, dialogue_id)
    require(dialogue, "data_split", str, path, dialogue_id)
    raw_turns = require(dialogue, "turns", list, path, dialogue_id)
    turns = [parse_turn(turn, notes, path, dialogue_id, index) for index, turn in enumerate(raw_turns)]
    extra = {key: value for key, value in dialogue.items() if key not in DIALOGUE_KEYS}
    if dataset != subset:
        notes.add("dialogue whose `dataset` differs from its folder name (kept in extra.dataset)")
        extra["dataset"] = dataset
    if "goal" not in dialogue:
        notes.add("dialogue without goal")
    if not turns:
        notes.add("dialogue without turns")
    elif len(turns) == 1:
        notes.add("dialogue with a single turn")
    session = schema.empty_session(dialogue_id, turns)
    return {
        "conversation_id": dialogue_id,
        "source": "convlab",
        "subset": subset,
        "language": LANGUAGES.get(subset, "en"),
        "speakers": list(dict.fromkeys(turn["speaker"] for turn in turns)),
        "sessions": [session],
        "questions": [],
        "extra": schema.to_json(extra) if extra else None,
    }


def parse_turn(turn: Any, notes: Notes, path: str, dialogue_id: str, index: int) -> dict:
    where = f"{dialogue_id} turn {index}"
    if not isinstance(turn, dict):
        raise SourceError(path, where, None, f"expected a turn object, got {type(turn).__name__}")
    speaker = require(turn, "speaker", str, path, where)
    if speaker not in ROLES:
        raise SourceError(path, where, "speaker", f"{speaker!r} is neither 'user' nor 'system'")
    utterance = require(turn, "utterance", str, path, where)
    utt_idx = require(turn, "utt_idx", int, path, where)
    if utt_idx != index:
        notes.add("utt_idx that differs from the turn's position (turn_id keeps utt_idx)")
    if not utterance:
        notes.add("empty utterance")
    record = schema.empty_turn(str(utt_idx), speaker, ROLES[speaker], utterance)
    extra = {escape_turn_key(key): value for key, value in turn.items() if key not in TURN_KEYS}
    if "dialogue_acts" in turn:
        record["dialogue_acts"] = parse_acts(turn["dialogue_acts"], extra, notes)
    else:
        notes.add("turn without dialogue_acts (extra.dialogue_acts_absent)")
        extra[ACTS_ABSENT] = True
    if "state" in turn:
        record["state"] = parse_state(turn["state"], extra, notes)
    record["extra"] = schema.to_json(extra) if extra else None
    return record


def escape_turn_key(key: str) -> str:
    """A source turn key as the turn's ``extra`` holds it: a marker's name, after any number of ``\\``, gets
    one ``\\`` more (``state_empty_domains`` → ``\\state_empty_domains``), every other key stays as it is.

    So the markers (bare) and the source keys never share a name in ``extra``, whatever a source holds, and
    :func:`unescape_turn_key` gives every source key back; no key is refused. Normal ConvLab turns have no
    such key: their ``extra`` is unchanged.
    """
    return _ESCAPE + key if key.lstrip(_ESCAPE) in TURN_MARKERS else key


def unescape_turn_key(key: str) -> str:
    """The inverse of :func:`escape_turn_key`, for every key of ``extra`` but the (bare) markers."""
    return key[len(_ESCAPE) :] if key.startswith(_ESCAPE) and key.lstrip(_ESCAPE) in TURN_MARKERS else key


def parse_acts(acts: Any, extra: dict, notes: Notes) -> list[dict]:
    """``{kind: [act]}`` → typed acts in source order; raw kept in ``extra`` unless they rebuild exactly.

    "Rebuild exactly" is ``acts_to_source(typed, kinds) == acts``, decided while reading (a test holds the
    two equal): a dict of lists of dicts whose every key is a typed field holding a value the field keeps.
    """
    typed: list[dict] = []
    kinds: list[str] = []
    exact = isinstance(acts, dict)
    if exact:
        for kind, items in acts.items():
            kinds.append(kind)
            if not isinstance(items, list):
                exact = False
                continue
            for act in items:
                if isinstance(act, dict):
                    typed.append(_typed_act(kind, act))
                    exact = exact and all(map(_act_field_kept, act.items()))
                else:
                    exact = False
    if set(kinds) != set(ACT_KINDS):
        notes.add("dialogue_acts without all three kinds (its kinds kept in extra.dialogue_acts_kinds)")
        extra[ACT_KINDS_KEY] = kinds
    if not exact:
        notes.add("dialogue_acts not representable as typed acts (raw kept in the turn's extra)")
        extra["dialogue_acts"] = acts
        extra.pop(ACT_KINDS_KEY, None)
        return typed
    for act in typed:
        if act["type"] == "non-categorical" and act["start"] is None:
            notes.add("non-categorical act without start/end (start and end null)")
        if act["type"] == "binary" and (act["domain"] == "" or act["slot"] == ""):
            notes.add("binary act with an empty domain or slot")
    return typed


_ACT_TEXT_FIELDS = frozenset(("intent", "domain", "slot", "value"))
_ACT_SPAN_FIELDS = frozenset(SPAN_KEYS)


def _act_field_kept(item: tuple[str, Any]) -> bool:
    """Whether one (key, value) of a source act comes back from its typed act (see ``_typed_act``)."""
    key, value = item
    if key in _ACT_TEXT_FIELDS:
        return isinstance(value, str)
    if key in _ACT_SPAN_FIELDS:
        return _is_span(value)
    return False


def _is_span(value: Any) -> bool:
    """Whether a source ``start``/``end`` fits the typed act's int32 field (a bool is not a span)."""
    return isinstance(value, int) and not isinstance(value, bool) and -(2**31) <= value < 2**31


def _typed_act(kind: str, act: dict) -> dict:
    def text(key: str) -> str | None:
        value = act.get(key)
        return value if isinstance(value, str) else None

    def span(key: str) -> int | None:
        value = act.get(key)
        return value if _is_span(value) else None

    return {
        "type": kind,
        "intent": text("intent"),
        "domain": text("domain"),
        "slot": text("slot"),
        "value": text("value"),
        "start": span("start"),
        "end": span("end"),
    }


def acts_to_source(typed: list[dict], kinds: Iterable[str] = ACT_KINDS) -> dict:
    """Typed acts → ConvLab's ``{kind: [act]}`` (absent ``start``/``end`` and ``value`` stay absent)."""
    acts: dict[str, list[dict]] = {kind: [] for kind in kinds}
    for act in typed:
        item = {
            key: act[key]
            for key in ("intent", "domain", "slot", "value", "start", "end")
            if act[key] is not None
        }
        acts.setdefault(act["type"], []).append(item)
    return acts


def parse_state(state: Any, extra: dict, notes: Notes) -> list[dict]:
    """``{domain: {slot: value}}`` → one {domain, slot, value} per present slot ("" and "dontcare" included).

    Absent slots are simply not listed. Empty domain dicts (``{"weather": {}}``) and an empty state are
    kept in ``extra.state_empty_domains``; anything else that would not rebuild exactly is kept raw.
    "Rebuild exactly" is ``state_to_source(typed, empty_domains) == state``, decided while reading (a
    test holds the two equal): a dict of dicts of strings.
    """
    typed: list[dict] = []
    empty_domains: list[str] = []
    exact = isinstance(state, dict)
    if exact:
        for domain, slots in state.items():
            if not isinstance(slots, dict):
                exact = False
            elif not slots:
                empty_domains.append(domain)
            else:
                for slot, value in slots.items():
                    if isinstance(value, str):
                        typed.append({"domain": domain, "slot": slot, "value": value})
                    else:
                        exact = False
    if empty_domains or not typed:
        extra[STATE_EMPTY_DOMAINS] = empty_domains
    if not exact:
        notes.add("state not representable as typed slots (raw kept in the turn's extra)")
        extra["state"] = state
        extra.pop(STATE_EMPTY_DOMAINS, None)
        return typed
    if empty_domains:
        notes.add("empty domain dict in a state (kept in extra.state_empty_domains)", len(empty_domains))
    return typed


def state_to_source(typed: list[dict], empty_domains: Iterable[str] = ()) -> dict:
    state: dict[str, dict[str, str]] = {domain: {} for domain in empty_domains}
    for item in typed:
        state.setdefault(item["domain"], {})[item["slot"]] = item["value"]
    return state


# -- ontology ----------------------------------------------------------------------------------


def parse_act_string(text: str) -> dict:
    """``"{'user': True, 'system': False, 'intent': 'inform', ...}"`` (a Python repr) → its fields."""
    try:
        value = ast.literal_eval(text) if isinstance(text, str) else None
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        value = None
    value = value if isinstance(value, dict) else {}
    fields = {
        key: value.get(key) if isinstance(value.get(key), str) else None
        for key in ("intent", "domain", "slot")
    }
    flags = {key: value.get(key) if isinstance(value.get(key), bool) else None for key in ("user", "system")}
    return {**fields, **flags}


def ontology_row(ontology: Any, subset: str, notes: Notes, path: str) -> dict:
    """``ontology.json`` → one typed row; sections that would not rebuild exactly are kept raw in ``extra``.

    ``extra`` holds source keys only: an absent section is a null column (a present one is a list, empty
    or not), so no source key, whatever its name, can be taken for convhub's bookkeeping.
    """
    if not isinstance(ontology, dict):
        raise SourceError(path, None, None, f"expected an ontology object, got {type(ontology).__name__}")
    row = {"subset": subset, **dict.fromkeys(ONTOLOGY_COLUMNS.values())}
    extra = {key: value for key, value in ontology.items() if key not in ONTOLOGY_SECTIONS}
    for key, (to_typed, to_source) in ONTOLOGY_SECTIONS.items():
        if key not in ontology:
            continue
        try:
            typed = to_typed(ontology[key])
            exact = to_source(typed) == ontology[key]
        except (AttributeError, TypeError, KeyError, ValueError):
            typed, exact = [], False
        row[ONTOLOGY_COLUMNS[key]] = typed
        if not exact:
            notes.add(f"ontology {key} not representable as typed rows (raw kept in the ontology's extra)")
            extra[key] = ontology[key]
    row["extra"] = schema.to_json(extra) if extra else None
    return row


def _text(value: Any) -> str | None:
    """A string for a typed string column, or None (the caller then finds the rebuild differs)."""
    return value if isinstance(value, str) else None


def _domains_to_typed(domains: dict) -> list[dict]:
    return [
        {
            "name": name,
            "description": _text(domain.get("description")),
            "slots": [
                {
                    "name": slot_name,
                    "description": _text(slot.get("description")),
                    "is_categorical": slot.get("is_categorical")
                    if isinstance(slot.get("is_categorical"), bool)
                    else None,
                    "possible_values": [
                        value for value in slot.get("possible_values", []) if isinstance(value, str)
                    ],
                }
                for slot_name, slot in domain.get("slots", {}).items()
            ],
        }
        for name, domain in domains.items()
    ]


def _domains_to_source(typed: list[dict]) -> dict:
    return {
        domain["name"]: {
            "description": domain["description"],
            "slots": {
                slot["name"]: {
                    "description": slot["description"],
                    "is_categorical": slot["is_categorical"],
                    "possible_values": slot["possible_values"],
                }
                for slot in domain["slots"]
            },
        }
        for domain in typed
    }


def _intents_to_typed(intents: dict) -> list[dict]:
    return [
        {"name": name, "description": _text(intent.get("description"))} for name, intent in intents.items()
    ]


def _intents_to_source(typed: list[dict]) -> dict:
    return {intent["name"]: {"description": intent["description"]} for intent in typed}


def _act_inventory_to_typed(inventory: dict) -> list[dict]:
    return [
        {"type": kind, **parse_act_string(text), "raw": _text(text)}
        for kind, items in inventory.items()
        for text in items
    ]


def _act_inventory_to_source(typed: list[dict]) -> dict:
    inventory: dict[str, list[str]] = {}
    for act in typed:
        inventory.setdefault(act["type"], []).append(act["raw"])
    return inventory


def _ontology_state_to_typed(state: dict) -> list[dict]:
    return [
        {"domain": domain, "slot": slot, "value": _text(value)}
        for domain, slots in state.items()
        for slot, value in slots.items()
    ]


ONTOLOGY_SECTIONS = {
    "domains": (_domains_to_typed, _domains_to_source),
    "intents": (_intents_to_typed, _intents_to_source),
    "dialogue_acts": (_act_inventory_to_typed, _act_inventory_to_source),
    "state": (_ontology_state_to_typed, state_to_source),
}
ONTOLOGY_COLUMNS = {
    "domains": "domains",
    "intents": "intents",
    "dialogue_acts": "dialogue_acts",
    "state": "state",
}


# -- database ----------------------------------------------------------------------------------


def database_domain(file_name: str, ontology_domains: list[str]) -> str:
    """``hotel_db.json`` → ``hotel``; a single-domain dataset's file (``CamRestDB.json``) → that domain."""
    stem = file_name.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    name = re.sub(r"[_-]?db$", "", stem, flags=re.IGNORECASE)
    if name not in ontology_domains and len(ontology_domains) == 1:
        return ontology_domains[0]
    return name


def database_rows(content: Any, subset: str, file_name: str, domain: str) -> Iterator[dict]:
    """One row per entity: a list file gives its elements, a ``{key: [entity]}`` file its keys' elements.

    Anything else is one row holding the whole content, an empty list or a key with no entity included
    (no entity row would keep it, and ``convhub export`` must write the file back).
    """
    base = {"subset": subset, "file": file_name}
    if isinstance(content, list) and content:
        groups = [(None, domain, content)]  # (key, domain, entities)
    elif isinstance(content, dict) and content and all(isinstance(v, list) and v for v in content.values()):
        groups = [(key, key, entities) for key, entities in content.items()]
    else:
        yield {**base, "key": None, "domain": domain, "entity_index": None, "entity": schema.to_json(content)}
        return
    for key, group_domain, entities in groups:
        for index, entity in enumerate(entities):
            yield {
                **base,
                "key": key,
                "domain": group_domain,
                "entity_index": index,
                "entity": schema.to_json(entity),
            }
