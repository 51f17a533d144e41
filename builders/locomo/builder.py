"""LoCoMo: very long two-person conversations with memory questions (Maharana et al., ACL 2024).

Where its files are (``shards``), how a file's samples become records (the engine's list reader and per-record
loop around :func:`parse.parse_sample`), and its own configs, ``observations`` and ``events``."""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

from datasets import Features, List, Value
from datasets.download.streaming_download_manager import StreamingDownloadManager

from builders.locomo import evidence, parse
from convhub import schema
from convhub.engine.builder import ConversationBuilder
from convhub.engine.json_list import scan_json_array
from convhub.engine.records import convert_records
from convhub.errors import Notes, Reject, SourceError
from convhub.storage.folders import open_file, url_files
from convhub.views.definitions import View

URL = "https://raw.githubusercontent.com/snap-research/LoCoMo/main/data/locomo10.json"

# -- reading a file ------------------------------------------------------------------------------------------


def samples_of(path: str, reject: Reject | None = None) -> Iterator[tuple[str | int, Any]]:
    """(name, sample) of each sample of one file (one JSON list), read one at a time by the engine's reader:
    memory follows one sample, not the file. A sample is named by ``parse.record_name``. Given ``reject``
    (``--on-bad-record skip``), a break in the list goes to it with the bytes skipped (scope ``span``) and
    costs only the samples they held. A list without a sample is an error, as an empty file is."""
    count = 0  # samples read or lost to a break: a list whose every sample a break lost is not an empty one

    def on_break(error: SourceError, raw: bytes, held: int) -> None:
        nonlocal count
        count += held
        reject(error, raw, "span", records=held)

    with open_file(path) as handle:
        for _, _, position, sample in scan_json_array(
            handle, str(path), on_break=reject and on_break, element="sample", key="sample_id"
        ):
            count += 1
            yield parse.record_name(position, sample), sample
    if not count:
        raise SourceError(path, None, None, "no samples: the list is empty")


# -- the configs of LoCoMo's own side tables ----------------------------------------------------------------


def _side_table_rows(record: dict, name: str, rows) -> Iterator[dict]:
    """The rows ``rows(entry, field)`` makes of each session's ``observation`` or ``event_summary`` entry (which
    the parser validated and kept raw in the session's extra), with the conversation's ids and the session's."""
    ids = {name: record[name] for name in schema.CONVERSATION_IDS}
    for session in record["sessions"]:
        entry = json.loads(session["extra"] or "{}").get(name)
        if entry is not None:
            for row in rows(entry, f"{name}.{session['session_id']}"):
                yield {**ids, "session_id": session["session_id"], **row}


def observation_rows(record: dict) -> Iterator[dict]:
    """One row per observation, its evidence normalized like QA evidence (the raw evidence kept as JSON); the
    parser counted the normalizations already, so this reading counts into a throwaway ``Notes``."""
    turn_ids = {turn["turn_id"] for session in record["sessions"] for turn in session["turns"]}

    def rows(entry: Any, field: str) -> list[dict]:
        return evidence.parse_observations(entry, turn_ids, Notes(), field)

    for row in _side_table_rows(record, "observation", rows):
        yield {**row, "evidence": schema.to_json(row["evidence"])}


def event_rows(record: dict) -> Iterator[dict]:
    """One row per event of ``event_summary``, with the date LoCoMo gives for that session's events."""
    return _side_table_rows(record, "event_summary", parse.parse_events)


STRING = Value("string")
_KEYS = {**schema.CONVERSATION_IDS, "session_id": STRING, "speaker": STRING, "position": Value("int32")}
OBSERVATIONS = View(
    "observations",
    Features(
        {**_KEYS, "observation": STRING, "evidence_turn_ids": List(STRING), "evidence": schema.json_text()}
    ),
    "LoCoMo's per-session observations about each speaker, with evidence turn ids.",
    observation_rows,
)
EVENTS = View(
    "events",
    Features({**_KEYS, "event": STRING, "date": STRING}),
    "LoCoMo's event_summary: the events of each speaker's life per session.",
    event_rows,
)

# -- the builder --------------------------------------------------------------------------------------------


class LocomoBuilder(ConversationBuilder):
    SOURCE = "locomo"
    HUB_NAME = "locomo-unified"
    PRETTY_NAME = "LoCoMo (convhub unified)"
    LICENSE = "cc-by-nc-4.0"
    LANGUAGES = ("en",)
    HOMEPAGE = "https://snap-research.github.io/locomo/"
    SOURCE_DATASETS = ("extended|other-locomo",)
    DESCRIPTION = "Very long-term conversations between two people, with memory questions."
    ROLE_MAPPING: ClassVar[dict[str, str]] = {"speaker_a": "user", "speaker_b": "assistant"}
    CITATION = """@inproceedings{maharana2024locomo,
  title     = {Evaluating Very Long-Term Conversational Memory of {LLM} Agents},
  author    = {Maharana, Adyasha and Lee, Dong-Ho and Tulyakov, Sergey and Bansal, Mohit and
               Barbieri, Francesco and Fang, Yuwei},
  booktitle = {Proceedings of the 62nd Annual Meeting of the Association for Computational Linguistics},
  year      = {2024}
}"""
    EXTRA_VIEWS = (OBSERVATIONS, EVENTS)
    #: A ``sessions`` row is a whole conversation (~200 KB of JSON, ~1 MB as Python objects): datasets' default
    #: batch of 1,000 rows held every conversation of the benchmark's input in memory, past its 1 GiB target.
    WRITER_BATCH_SIZES: ClassVar[dict[str, int]] = {"sessions": 50}

    #: sample_id → the file that named it first, where one process reads every file in order (a stream,
    #: ``convhub check``, each worker of a build that raises). A repeat across workers, and across files in a
    #: build that skips, is the build's own conversation_id check's (``convhub.engine.duplicate_ids``).
    _first_files: dict[str, str] | None = None

    def shards(self, dl_manager):
        """One split, ``test``: the downloaded locomo10.json, or the ``*.json`` files of ``--data-dir``.

        Each file is a shard (and its stem the ``subset``), so ``--num-proc`` parallelizes over files and
        ``--subset NAME`` keeps only ``NAME.json``. None is read here.
        """
        data_dir = self.config.data_dir
        if data_dir is None:
            files = [dl_manager.download(URL)]
        elif "://" in data_dir:  # each task opens its file there (convhub.storage.folders.open_file)
            files = [url for _, url in url_files(data_dir, (".json",))]
        elif os.path.isfile(data_dir):
            files = [data_dir]
        else:
            files = sorted(glob.glob(os.path.join(data_dir, "*.json")))
        if not files:
            raise FileNotFoundError(f"no LoCoMo *.json file in {data_dir}")
        wanted = set(self.config.subsets or ())
        unknown = wanted - {Path(path).stem for path in files}
        if unknown:
            known = ", ".join(Path(path).stem for path in files)
            raise FileNotFoundError(
                f"no LoCoMo file for subset(s) {', '.join(sorted(unknown))}; files: {known}"
            )
        streaming = isinstance(dl_manager, StreamingDownloadManager)
        self._first_files = {} if streaming or self.config.on_bad_record == "raise" else None
        return {"test": [path for path in files if not wanted or Path(path).stem in wanted]}

    def parse_shard(self, shard, notes):
        """The records of one file, through the engine's per-record loop. A sample_id seen before in this file,
        or first in another file this process read (``_first_files``; reading the same file again, as a stream
        does on each pass, repeats nothing), is rejected."""
        subset, skip, seen_here = Path(shard).stem, self.config.on_bad_record == "skip", set()
        samples = samples_of(shard, self.reject if skip else None)
        convert = lambda sample, counted: parse.parse_sample(sample, subset, counted)  # noqa: E731
        for record in convert_records(shard, samples, convert, notes, self.reject):
            sample_id = record["conversation_id"]
            first = shard if self._first_files is None else self._first_files.setdefault(sample_id, shard)
            if sample_id in seen_here or first != shard:
                problem = f"duplicate sample_id {sample_id!r}, also in {first}"
                self.reject(SourceError(shard, sample_id, "sample_id", problem), None)
                continue
            seen_here.add(sample_id)
            yield record
