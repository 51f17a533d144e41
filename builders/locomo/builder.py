"""LoCoMo: very long two-person conversations with memory questions (Maharana et al., ACL 2024).

Where the files are (``shards``), the configs (the shared ones plus ``observations`` and ``events``), and
the one rule that spans files: a ``sample_id`` names one sample in the whole dataset.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import orjson
from datasets import Features, List, Value
from datasets.download.streaming_download_manager import StreamingDownloadManager

from builders.locomo import evidence, parse
from convhub import schema
from convhub.engine.builder import ConversationBuilder
from convhub.errors import Notes, SourceError
from convhub.storage.folders import url_files
from convhub.views.definitions import View

URL = "https://raw.githubusercontent.com/snap-research/LoCoMo/main/data/locomo10.json"

# -- the configs of LoCoMo's own side tables ----------------------------------------------------------------

_IDS = {**schema.CONVERSATION_IDS, "session_id": Value("string"), "speaker": Value("string")}


def _side_table_entries(record: dict, name: str) -> Iterator[tuple[dict, dict]]:
    """(session, raw ``observation`` or ``event_summary`` entry) of each session that has one: the parser
    keeps the entry, validated, in the session's extra."""
    for session in record["sessions"]:
        entry = json.loads(session["extra"] or "{}").get(name)
        if entry is not None:
            yield session, entry


def observation_rows(record: dict) -> Iterator[dict]:
    """One row per observation, its evidence normalized like QA evidence (the raw evidence kept).

    The parser validated these entries and counted their normalizations: this reading counts into a
    throwaway ``Notes``.
    """
    ids = {name: record[name] for name in schema.CONVERSATION_IDS}
    turn_ids = {turn["turn_id"] for session in record["sessions"] for turn in session["turns"]}
    for session, entry in _side_table_entries(record, "observation"):
        number = session["session_id"].removeprefix("session_")
        field = f"observation.session_{number}_observation"
        for row in evidence.parse_observations(
            entry, turn_ids, Notes(), "<record>", ids["conversation_id"], field
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
    for session, entry in _side_table_entries(record, "event_summary"):
        for row in parse.parse_events(entry, "<record>", ids["conversation_id"], "event_summary"):
            yield {**ids, "session_id": session["session_id"], **row}


OBSERVATIONS = View(
    "observations",
    Features(
        {
            **_IDS,
            "position": Value("int32"),
            "observation": Value("string"),
            "evidence_turn_ids": List(Value("string")),
            "evidence": schema.json_text(),
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

# -- the builder --------------------------------------------------------------------------------------------


class FirstFileOfEachSampleId:
    """``sample_id`` is the dataset's key, so it must be unique across files, not only within one (a repeat
    inside one file is :func:`parse.parse_indexed`'s to report): the first file naming an id keeps it, and
    a later file naming it again gets an error naming both (tests/locomo check the message)."""

    def __init__(self):
        self.first: dict[str, str] = {}

    def check(self, sample_id: str, path: str, index: int) -> None:
        first = self.first.setdefault(sample_id, path)
        if first != path:
            raise SourceError(path, index, "sample_id", f"duplicate sample_id {sample_id!r}, also in {first}")


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
    #: A ``sessions`` row is a whole conversation (~200 KB of JSON, ~1 MB as Python objects): datasets'
    #: default batch of 1,000 rows held every conversation of the benchmark's 1,000-conversation build in
    #: memory, past its peak-memory target (1 GiB); with 50 the build peaks at 427 MiB.
    WRITER_BATCH_SIZES: ClassVar[dict[str, int]] = {"sessions": 50}

    #: During a build with ``on_bad_record="raise"``: source file → where the worker parsing it writes its
    #: ``[[index, sample_id], ...]``, checked once every worker is done (workers share no memory, but a folder).
    _sample_id_files: dict[str, str] | None = None
    #: Else, where one process reads every file in order (streaming, ``convhub check``): ids checked as read.
    _seen_sample_ids: FirstFileOfEachSampleId | None = None

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
            if not files:
                raise FileNotFoundError(f"no LoCoMo *.json file in {data_dir}")
        elif os.path.isfile(data_dir):
            files = [data_dir]
        else:
            files = sorted(glob.glob(os.path.join(data_dir, "*.json")))
            if not files:
                raise FileNotFoundError(f"no LoCoMo *.json file in {data_dir}")
        # With skip, a build leaves sample_id across files to the build's own conversation_id check, which
        # drops the later record; a build that raises checks in _prepare_split.
        streaming = isinstance(dl_manager, StreamingDownloadManager)
        checked_as_read = streaming or self.config.on_bad_record == "raise"
        self._seen_sample_ids = FirstFileOfEachSampleId() if checked_as_read else None
        return {"test": self._only_subsets(files)}

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
        records = parse.parse_indexed(shard, notes, self.reject, self.config.on_bad_record == "skip")
        if self._sample_id_files is not None:
            ids = []
            for index, record in records:
                ids.append((index, record["conversation_id"]))
                yield record
            Path(self._sample_id_files[shard]).write_bytes(orjson.dumps(ids))
            return
        for index, record in records:
            try:
                if self._seen_sample_ids is not None:
                    self._seen_sample_ids.check(record["conversation_id"], shard, index)
            except SourceError as error:
                self.reject(error, None)
                continue
            yield record

    @contextlib.contextmanager
    def preparing_split(self, split_generator) -> Iterator[None]:
        """Around ``datasets``' parse-and-write of one split (over ``num_proc`` workers): then the sample_id check
        across files, in file order, on the ids the workers wrote: the same first duplicate, named the same
        way, whatever the workers, and no second reading of the source.

        A duplicate raises here, before ``download_and_prepare`` keeps anything (datasets removes its
        unfinished folder), like any SourceError of a worker.
        """
        if self.config.on_bad_record != "raise":
            with super().preparing_split(split_generator):
                yield
            return
        files = split_generator.gen_kwargs["shards"]
        with tempfile.TemporaryDirectory(prefix="convhub-locomo-ids-") as folder:
            self._sample_id_files = {path: os.path.join(folder, f"{i}.json") for i, path in enumerate(files)}
            try:
                with super().preparing_split(split_generator):
                    yield
            finally:
                id_files, self._sample_id_files = self._sample_id_files, None
            seen = FirstFileOfEachSampleId()
            for path, id_file in id_files.items():
                for index, sample_id in orjson.loads(Path(id_file).read_bytes()):
                    seen.check(sample_id, path, index)
