"""LoCoMo: very long two-person conversations with memory questions (Maharana et al., ACL 2024)."""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from datasets import Features, Json, List, Value
from datasets.download.streaming_download_manager import StreamingDownloadManager

from builders import schema
from builders.base import ConversationBuilder
from builders.errors import Notes, SourceError
from builders.locomo import parse
from builders.views import View

URL = "https://raw.githubusercontent.com/snap-research/LoCoMo/main/data/locomo10.json"

_IDS = {**schema.CONVERSATION_IDS, "session_id": Value("string"), "speaker": Value("string")}


def _turn_ids(record: dict) -> set[str]:
    return {turn["turn_id"] for session in record["sessions"] for turn in session["turns"]}


def _session_table(session: dict, name: str) -> dict | None:
    """The raw ``event_summary`` or ``observation`` entry the parser kept in a session's extra."""
    return json.loads(session["extra"] or "{}").get(name)


def observation_rows(record: dict) -> Iterator[dict]:
    """One row per observation, its evidence normalized like QA evidence (the raw evidence kept).

    The parser has already validated these entries and counted their normalizations, so this re-parse
    counts into a throwaway ``Notes``.
    """
    ids = {name: record[name] for name in schema.CONVERSATION_IDS}
    turn_ids = _turn_ids(record)
    for session in record["sessions"]:
        entry = _session_table(session, "observation")
        if entry is None:
            continue
        field = f"observation.session_{session['session_id'].removeprefix('session_')}_observation"
        for row in parse.parse_observations(
            entry, turn_ids, Notes(), "<record>", record["conversation_id"], field
        ):
            yield {
                **ids,
                "session_id": session["session_id"],
                **row,
                "evidence": schema.to_json(row["evidence"]),
            }


def event_rows(record: dict) -> Iterator[dict]:
    """One row per event of ``event_summary``, with the date LoCoMo gives for that session's events."""
    ids = {name: record[name] for name in schema.CONVERSATION_IDS}
    for session in record["sessions"]:
        entry = _session_table(session, "event_summary")
        if entry is None:
            continue
        for row in parse.parse_events(entry, "<record>", record["conversation_id"], "event_summary"):
            yield {**ids, "session_id": session["session_id"], **row}


OBSERVATIONS = View(
    "observations",
    Features(
        {
            **_IDS,
            "position": Value("int32"),
            "observation": Value("string"),
            "evidence_turn_ids": List(Value("string")),
            "evidence": Json(),
        }
    ),
    "LoCoMo's per-session observations about each speaker, with evidence turn ids.",
    observation_rows,
)
EVENTS = View(
    "events",
    Features({**_IDS, "position": Value("int32"), "event": Value("string"), "date": Value("string")}),
    "LoCoMo's event_summary: the events of each speaker's life per session.",
    event_rows,
)


def _check_unique_sample_ids(files: list[str]) -> None:
    """``sample_id`` is the dataset's key, so it must be unique across files, not only within one.

    Shards are parsed apart (in several processes with ``--num-proc``), so this is checked here, before
    any shard is built; a LoCoMo file is small enough (2.8 MB) to read twice.
    """
    first_file: dict[str, str] = {}
    for path in files:
        for index, sample in enumerate(parse.read_samples(path)):
            sample_id = sample.get("sample_id") if isinstance(sample, dict) else None
            if not isinstance(sample_id, str):
                continue  # parse_sample reports it, naming the field
            if sample_id in first_file and first_file[sample_id] != path:
                raise SourceError(
                    path,
                    index,
                    "sample_id",
                    f"duplicate sample_id {sample_id!r}, also in {first_file[sample_id]}",
                )
            first_file.setdefault(sample_id, path)


def _unique_across_files(records, path: str, seen: dict[str, str], reject):
    """Streamed records; a sample_id an earlier file of the stream already had goes to ``reject``."""
    for record in records:
        sample_id = record["conversation_id"]
        if seen.setdefault(sample_id, path) != path:
            problem = f"duplicate sample_id {sample_id!r}, also in {seen[sample_id]}"
            reject(SourceError(path, sample_id, "sample_id", problem), None)
            continue
        yield record


class LocomoBuilder(ConversationBuilder):
    SOURCE = "locomo"
    HUB_NAME = "locomo-unified"
    PRETTY_NAME = "LoCoMo (convhub unified)"
    LICENSE = "cc-by-nc-4.0"
    LANGUAGES = ("en",)
    HOMEPAGE = "https://snap-research.github.io/locomo/"
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
    #: A ``sessions`` row is a whole conversation (~200 KB of JSON, ~1 MB as Python objects): datasets'
    #: default batch of 1,000 rows held every conversation of a 1,000-conversation build in memory.
    SESSIONS_WRITER_BATCH_SIZE = 50

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.config.name == "sessions" and kwargs.get("writer_batch_size") is None:
            self._writer_batch_size = self.SESSIONS_WRITER_BATCH_SIZE

    def shards(self, dl_manager):
        """One split, ``test``: the downloaded locomo10.json, or the ``*.json`` files of ``--data-dir``.

        Each file is a shard (and its stem the ``subset``), so ``--num-proc`` parallelizes over files and
        ``--subset NAME`` keeps only ``NAME.json``.
        """
        data_dir = self.config.data_dir
        if data_dir is None:
            files = [dl_manager.download(URL)]
        elif os.path.isfile(data_dir):
            files = [data_dir]
        else:
            files = sorted(glob.glob(os.path.join(data_dir, "*.json")))
            if not files:
                raise FileNotFoundError(f"no LoCoMo *.json file in {data_dir}")
        files = self._only_subsets(files)
        # Streaming checks ids as rows go (a first row must not wait for every file to be read twice).
        self._streamed_ids = {} if isinstance(dl_manager, StreamingDownloadManager) else None
        if len(files) > 1 and self.config.on_bad_record == "raise" and self._streamed_ids is None:
            _check_unique_sample_ids(files)  # with skip, the build's own id check drops the later one
        return {"test": files}

    def _only_subsets(self, files: list[str]) -> list[str]:
        wanted = self.config.subsets
        if not wanted:
            return files
        kept = [path for path in files if Path(path).stem in wanted]
        unknown = set(wanted) - {Path(path).stem for path in kept}
        if unknown:
            known = ", ".join(Path(path).stem for path in files)
            raise FileNotFoundError(
                f"no LoCoMo file for subset(s) {', '.join(sorted(unknown))}; files: {known}"
            )
        return kept

    def parse_shard(self, shard, notes):
        records = parse.parse_file(shard, notes, self.reject)
        seen = getattr(self, "_streamed_ids", None)
        return records if seen is None else _unique_across_files(records, shard, seen, self.reject)
