"""LoCoMo (Maharana et al., ACL 2024): where its files are, how a file's samples become records (the engine's list
reader and per-record loop around :func:`parse.parse_sample`), and its own ``observations`` and ``events``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from typing import Any, ClassVar

from datasets import Features, List, Value
from datasets.download.streaming_download_manager import StreamingDownloadManager

from convhub import schema
from convhub.builders.locomo import audit, evidence, parse
from convhub.engine.inputs.listing import JSON
from convhub.engine.readers.json_list import read_elements
from convhub.engine.readers.record_loop import convert_records
from convhub.engine.sources.builder import ConversationBuilder, ConvHubConfig
from convhub.engine.sources.input_shards import Shard, own_shard
from convhub.errors import Notes, Reject, SourceError
from convhub.storage.folders import open_file
from convhub.views.definitions import View

URL = "https://raw.githubusercontent.com/snap-research/LoCoMo/main/data/locomo10.json"


def samples_of(
    path: str, reject: Reject | None = None, positions: list[int] | None = None
) -> Iterator[tuple[str | int, Any]]:
    """(``parse.record_name``, sample) of each sample of one file (a JSON list), read one at a time so that memory
    follows one sample. Given ``reject`` (``--on-bad-record skip``), a break in the list goes to it with the
    bytes skipped (scope ``span``), costing only the samples they held. A list without a sample is an error.
    Given ``positions``, each sample's position in the list is appended to it before the sample is yielded."""
    with open_file(path) as handle:
        for position, sample in read_elements(handle, str(path), "sample", "sample_id", reject):
            if positions is not None:
                positions.append(position)
            sample_box = [sample]
            del sample  # not held here while its record is converted and written
            yield parse.record_name(position, sample_box[0]), sample_box.pop()


def side_table_rows(record: dict, name: str) -> Iterator[dict]:
    """The rows of each session's ``observation`` or ``event_summary`` entry (kept raw, once validated, in the
    session's extra), with the conversation's and the session's ids. Observation evidence is normalized as QA
    evidence is (the raw evidence kept as JSON); the parser counted that already, so this counts into nothing."""
    ids = {key: record[key] for key in schema.CONVERSATION_IDS}
    turn_ids = parse.TurnIds(record["sessions"]) if name == "observation" else None  # (events cite no turn)
    for session in record["sessions"]:
        entry, field = json.loads(session["extra"] or "{}").get(name), f"{name}.{session['session_id']}"
        if entry is None:
            continue
        if name == "event_summary":
            rows = parse.parse_events(entry, field)
        else:
            rows = evidence.parse_observations(entry, turn_ids, Notes(), field)
            rows = [{**row, "evidence": schema.to_json(row["evidence"])} for row in rows]
        yield from ({**ids, "session_id": session["session_id"], **row} for row in rows)


TEXT = schema.string()
_KEYS = {**schema.CONVERSATION_IDS, "session_id": TEXT, "speaker": TEXT, "position": Value("int32")}
OBSERVATIONS = View(
    "observations",
    Features({**_KEYS, "observation": TEXT, "evidence_turn_ids": List(TEXT), "evidence": schema.json_text()}),
    "LoCoMo's per-session observations about each speaker, with evidence turn ids.",
    partial(side_table_rows, name="observation"),
)
EVENTS = View(
    "events",
    Features({**_KEYS, "event": TEXT, "date": TEXT}),
    "LoCoMo's event_summary: the events of each speaker's life per session.",
    partial(side_table_rows, name="event_summary"),
)


class LocomoBuilder(ConversationBuilder):
    SOURCE = "locomo"
    HUB_NAME = "locomo-unified"
    PRETTY_NAME = "LoCoMo (convhub unified)"
    LICENSE = "cc-by-nc-4.0"
    LANGUAGES = ("en",)
    HOMEPAGE = "https://snap-research.github.io/locomo/"
    SOURCE_DATASETS = ("extended|other-locomo",)
    DESCRIPTION = "Very long-term conversations between two people, with memory questions."
    ROLE_MAPPING: ClassVar[dict[str, str]] = dict(parse.ROLES)
    CITATION = """@inproceedings{maharana2024locomo,
  title     = {Evaluating Very Long-Term Conversational Memory of {LLM} Agents},
  author    = {Maharana, Adyasha and Lee, Dong-Ho and Tulyakov, Sergey and Bansal, Mohit and
               Barbieri, Francesco and Fang, Yuwei},
  booktitle = {Proceedings of the 62nd Annual Meeting of the Association for Computational Linguistics},
  year      = {2024}
}"""

    config: ConvHubConfig  # what datasets made of BUILDER_CONFIG_CLASS, typed as such
    EXTRA_VIEWS = (OBSERVATIONS, EVENTS)
    TAKES_ERRATA = True
    #: A ``sessions`` row is a whole conversation (~1 MB as Python objects): 1,000 a batch would pass 1 GiB.
    WRITER_BATCH_SIZES: ClassVar[dict[str, int]] = {"sessions": 50}
    #: sample_id → the file naming it first, where one process reads every file (a stream, ``convhub check``, a
    #: build that raises); other repeats are the build's conversation_id check's (``engine.duplicate_ids``).
    _first_files: dict[str, str] | None = None

    def shards(self, dl_manager) -> dict[str, list[Shard]]:
        """One split, ``test``: the downloaded locomo10.json, or the ``*.json`` files of ``--data-dir``, each a
        shard ``{"path", "name"}`` (``--num-proc`` parallelizes over files) whose name's stem is its ``subset``.
        None is read here."""
        # a file at a URL is opened there by each task (convhub.storage.folders.open_file)
        kept = self.subset_files(dl_manager, URL, "LoCoMo", JSON)
        if self.config.errata is not None:
            if len(kept) != 1:
                names = ", ".join(name for name, _ in kept)
                problem = (
                    f"the audit names samples by their position in one LoCoMo file; the input holds {names}"
                )
                raise SourceError(self.config.errata, None, None, problem)
            audit.load(self.config.errata)  # a malformed audit stops the build before any sample is read
        streaming = isinstance(dl_manager, StreamingDownloadManager)
        self._first_files = {} if streaming or self.config.on_bad_record == "raise" else None
        return {"test": [{"path": path, "name": name} for name, path in kept]}

    def parse_shard(self, shard, notes):
        """The records of one file. A sample_id seen before in this file, or first in another file this process
        read (``_first_files``: reading one file again, as a stream's passes do, repeats nothing), is rejected.
        With ``--errata``, each record's questions get the audit's verdicts (``audit.Audit.apply``)."""
        shard = own_shard(shard)
        path, subset = shard["path"], JSON.stem(shard["name"])
        skip, seen_here = self.config.on_bad_record == "skip", set()
        errata = None if self.config.errata is None else audit.load(self.config.errata)
        positions: list[int] = []
        audited: set[int] = set()
        samples = samples_of(path, self.reject if skip else None, positions)
        convert = lambda sample, counted: parse.parse_sample(sample, subset, counted)  # noqa: E731
        for record in convert_records(path, samples, convert, notes, self.reject):
            sample_id = record["conversation_id"]
            first = path if self._first_files is None else self._first_files.setdefault(sample_id, path)
            if sample_id in seen_here or first != path:
                problem = f"duplicate sample_id {sample_id!r}, also in {first}"
                self.reject(SourceError(path, sample_id, "sample_id", problem), None)
                continue
            seen_here.add(sample_id)
            if (
                errata is not None
            ):  # records are converted one at a time: the last position read is this one's
                errata.apply(record, positions[-1], path, notes)
                audited.add(positions[-1])
            yield record
        if errata is not None:
            errata.check_all_found(positions, audited, path, notes)
