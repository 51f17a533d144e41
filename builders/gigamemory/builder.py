"""GigaMemory: the long-term-memory benchmark of the AI Journey 2025 contest (ai-forever/memory_aij2025).

Each line is a question and the whole dialogue it asks about, and lines far apart can share one: a file is read in
two passes (``line_groups``), its lines grouped by dialogue, one conversation per group."""

from __future__ import annotations

from functools import partial
from typing import Any, ClassVar

from convhub.builder import ConversationBuilder, download_folder
from convhub.builders.gigamemory import line_groups, parse
from convhub.builders.gigamemory.parse import Line, where
from convhub.engine.inputs.listing import JSON_LINES, Listing
from convhub.engine.readers.contract import Place
from convhub.engine.readers.exact_json import load_object
from convhub.engine.readers.record_loop import convert_one, convert_records
from convhub.engine.runners.input_shards import own_shard
from convhub.errors import Notes, Reject, SourceError, raise_error
from convhub.storage.folders import local_copy

#: The public sample; the contest's evaluation sets are closed.
URL = "https://raw.githubusercontent.com/ai-forever/memory_aij2025/main/data/format_example.jsonl"
SPLIT = "test"


class GigamemoryBuilder(ConversationBuilder):
    SOURCE = "gigamemory"
    HUB_NAME = "gigamemory-unified"
    PRETTY_NAME = "GigaMemory (convhub unified)"
    LICENSE = "unknown"
    LANGUAGES = ("ru",)
    HOMEPAGE = "https://github.com/ai-forever/memory_aij2025"
    SOURCE_DATASETS = ("extended|other-gigamemory",)
    DESCRIPTION = (
        "Very long Russian user-assistant dialogues with long-term memory questions (AIJ Contest 2025)."
    )
    ROLE_MAPPING: ClassVar[dict[str, str]] = {"user": "user", "assistant": "assistant", "system": "system"}
    CITATION = """@misc{gigamemory2025,
  title        = {{GigaMemory}: global memory for {LLM} ({AI} Journey Contest 2025)},
  author       = {{ai-forever}},
  year         = {2025},
  howpublished = {\\url{https://github.com/ai-forever/memory_aij2025}}
}"""
    #: First-line bytes per shard: several shards give ``num_proc`` work on a large file.
    SHARD_BYTES = 64 * 1024 * 1024
    #: The same for a plain ``.jsonl`` (a ``.gz`` shard decompresses from the file's start to its first line).
    PLAIN_SHARD_BYTES = 8 * 1024 * 1024
    #: A `sessions` row is a whole ~350k-character dialogue: write (and hold) a few dozen at a time.
    WRITER_BATCH_SIZES: ClassVar[dict[str, int]] = {"sessions": 32}
    #: Each ``*.jsonl`` / ``*.jsonl.gz`` file a subset named by its stem.
    LISTING = Listing(JSON_LINES, split=SPLIT)

    def source_files(self, dl_manager) -> list[tuple[str, str]]:
        """(name, local path or URL) of every ``*.jsonl`` / ``*.jsonl.gz`` of ``--data-dir`` (a folder, a file or a URL)
        or of the public sample, downloaded; a file is a subset named by its stem (``--subset`` keeps some)."""
        return [(file.name, file.path) for file in self.listed_files(dl_manager, URL)]

    def shards(self, dl_manager):
        """Each file's groups of lines in shards. A file at a URL is copied here for pass 1; its shards name the
        URL, which a task where that copy is not (another machine) reads."""
        shards = []
        for file_name, path in self.source_files(dl_manager):
            local = local_copy(path, download_folder(dl_manager)) if "://" in path else path
            try:
                groups, notes = index_file(local, path, self.reject)
            except SourceError as error:  # an empty file: with --on-bad-record skip, the others go on
                self.reject(error, None, scope="file")
                continue
            # a plain file's seeks are free: smaller shards balance num_proc workers
            gz = path.endswith(".gz")
            shard_bytes = self.SHARD_BYTES if gz else min(self.SHARD_BYTES, self.PLAIN_SHARD_BYTES)
            shards += line_groups.group_shards(groups, notes, shard_bytes, path, local, file_name=file_name)
        return {SPLIT: shards}

    def parse_shard(self, shard, notes):
        return parse_shard(own_shard(shard), notes, self.reject)


def index_file(path: str, name: str | None = None, reject: Reject = raise_error):
    """Pass 1 over one file (``name``: the URL ``path`` is a copy of): its groups and notes."""
    shared = "line sharing its dialogue with an earlier line (one conversation, several questions)"
    return line_groups.index_groups(path, "GigaMemory", parse.line_key(), name, reject, where, where, shared)


def parse_shard(shard: dict[str, Any], notes: Notes, reject: Reject = raise_error):
    """Pass 2: one conversation per group of lines, from its first line read again; none when ``reject`` took
    every line of it. Normalizations are counted only for what is kept."""
    for group, raw in line_groups.first_lines(shard, notes, where):
        counted = Notes()
        record = _conversation(group, raw, shard, counted, reject)
        if record is not None and record["questions"]:
            notes.update(counted)
            yield record


def _conversation(group, raw: bytes, shard: dict[str, Any], notes: Notes, reject: Reject) -> dict | None:
    """The conversation of a group; a bad dialogue rejects every line that shares it (each named by its own
    line), a bad question only its line."""
    name, first = shard["path"], group.kept[0]
    sessions = load_object(raw, name, where(first.number))["sessions"]
    convert = partial(parse.conversation, digest=group.key)
    try:
        record = convert_one(place_of(shard, first), sessions, convert, notes)
    except SourceError as error:
        reject(error, raw)
        for line in group.kept[1:]:
            shared = f"{error.problem} (in the dialogue this line shares with line {first.number})"
            line_error = SourceError(name, where(line.number, line.fields), error.field, shared)
            reject(line_error, {**line.fields, "sessions": f"<the sessions of line {first.number}>"})
        return None
    session_ids = {session["session_id"] for session in record["sessions"]}
    question = partial(parse.parse_question, session_ids=session_ids)

    def reject_line(error: SourceError, line: Line) -> None:
        reject(
            error, raw if line is first else {**line.fields, "sessions": "<not kept: the dialogue is valid>"}
        )

    lines = ((place_of(shard, line), line) for line in group.kept)
    record["questions"] = list(convert_records(lines, question, notes, reject_line))
    return record


def place_of(shard: dict[str, Any], line: Line) -> Place:
    """Where a line of a shard's file is: the file (the URL where it was read at one), its listed name (the
    subset's), the line, named by its id where it has one."""
    return Place(shard["path"], shard["file_name"], where(line.number, line.fields), line=line.number)
