"""LoCoMo (Maharana et al., ACL 2024): where its files are, how a file's samples become records (the engine's list
reader and per-record loop around :func:`parse.convert`), and its own ``observations`` and ``events``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from typing import Any, ClassVar

from datasets import Features, List, Value

from convhub import schema
from convhub.builder import ConversationBuilder, ConvHubConfig
from convhub.builders.locomo import audit, evidence, parse
from convhub.engine.inputs.listing import JSON, Listing
from convhub.engine.readers.contract import Place
from convhub.engine.readers.json_list import JsonList
from convhub.engine.runners.input_shards import Shard, own_shard
from convhub.errors import Notes, Reject, SourceError
from convhub.views.definitions import View

URL = "https://raw.githubusercontent.com/snap-research/LoCoMo/main/data/locomo10.json"
#: A file is one JSON list of samples, read one at a time so that memory follows one sample; an error names a
#: sample by its ``sample_id`` where it has one, else by its position. Given ``--on-bad-record skip``, a break in
#: the list costs only the samples it held. A list without a sample is an error.
SAMPLES = JsonList(element="sample", id_field="sample_id", names_by_id=True, long_lists=parse.LONG_LISTS)


def samples_of(path: str, reject: Reject | None = None) -> Iterator[tuple[Place, Any]]:
    """(place, sample) of each sample of one file, as a build reads them (``LocomoBuilder.READER``)."""
    return SAMPLES.read(path, reject)


def side_table_rows(record: dict, name: str) -> Iterator[dict]:
    """The rows of each session's ``observation`` or ``event_summary`` entry (kept raw, once validated, in the
    session's extra), with the conversation's and the session's ids. Observation evidence is normalized as QA
    evidence is (the raw evidence kept as JSON); the parser counted that already, so this counts into nothing."""
    ids = {key: record[key] for key in schema.CONVERSATION_IDS}
    turn_ids = parse.TurnIds(record["sessions"]) if name == "observation" else set()  # (events cite no turn)
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
    READER = SAMPLES
    CONVERT = staticmethod(parse.convert)
    #: A sample_id is the conversation_id: unique in the whole input, not only in its file.
    ID_FIELD = "sample_id"
    ID_ACROSS_FILES = True
    #: Each ``*.json`` file a subset named by its stem.
    LISTING = Listing(JSON, split="test")

    def shards(self, dl_manager) -> dict[str, list[Shard]]:
        """One split, ``test``: the downloaded locomo10.json, or the ``*.json`` files of ``--data-dir``, each a
        shard ``{"path", "name"}`` (``--num-proc`` parallelizes over files) whose name's stem is its ``subset``.
        None is read here."""
        # a file at a URL is opened there by each task (convhub.storage.folders.open_file)
        kept = self.listed_files(dl_manager, URL)
        if self.config.errata is not None:
            if len(kept) != 1:
                names = ", ".join(file.name for file in kept)
                problem = (
                    f"the audit names samples by their position in one LoCoMo file; the input holds {names}"
                )
                raise SourceError(self.config.errata, None, None, problem)
            audit.load(self.config.errata)  # a malformed audit stops the build before any sample is read
        return {"test": [{"path": file.path, "name": file.name} for file in kept]}

    def parse_shard(self, shard, notes):
        """The records of one file (the engine's default), and with ``--errata`` each record's questions given
        the audit's verdicts (``audit.Audit.apply``), every entry checked to name a sample of the file."""
        if self.config.errata is None:
            return super().parse_shard(shard, notes)
        return self._audited(own_shard(shard), audit.load(self.config.errata), notes)

    def _audited(self, shard: dict[str, Any], errata: audit.Audit, notes: Notes) -> Iterator[dict]:
        path, positions, audited = shard["path"], [], set()

        def noted(items: Iterator[tuple[Place, Any]]) -> Iterator[tuple[Place, Any]]:
            for place, sample in items:
                positions.append(place.position)
                sample_box = [sample]
                del sample  # not held here while its record is converted and written
                yield place, sample_box.pop()

        for record in self.converted(noted(self.read_shard(shard)), notes):
            # records are converted one at a time: the last position read is this one's
            errata.apply(record, positions[-1], path, notes)
            audited.add(positions[-1])
            yield record
        errata.check_all_found(positions, audited, path, notes)
