"""LoCoMo: very long two-person conversations with memory questions (Maharana et al., ACL 2024)."""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Iterator

from datasets import Features, Json, List, Value

from builders import schema
from builders.base import ConversationBuilder
from builders.errors import Notes
from builders.locomo import parse
from builders.views import View

URL = "https://raw.githubusercontent.com/snap-research/LoCoMo/main/data/locomo10.json"

_IDS = {**schema.CONVERSATION_IDS, "session_id": Value("string"), "speaker": Value("string")}


def observation_rows(record: dict) -> Iterator[dict]:
    """One row per observation, its evidence normalized like QA evidence (the raw evidence kept)."""
    ids = {name: record[name] for name in schema.CONVERSATION_IDS}
    turn_ids = {turn["turn_id"] for session in record["sessions"] for turn in session["turns"]}
    for session in record["sessions"]:
        by_speaker = json.loads(session["extra"] or "{}").get("observation") or {}
        for speaker, observations in by_speaker.items():
            for position, (text, evidence) in enumerate(observations):
                found, _ = parse.parse_evidence(evidence, Notes(), "<record>", record["conversation_id"])
                yield {
                    **ids,
                    "session_id": session["session_id"],
                    "speaker": speaker,
                    "position": position,
                    "observation": text,
                    "evidence_turn_ids": [turn_id for turn_id in found if turn_id in turn_ids],
                    "evidence": schema.to_json(evidence),
                }


def event_rows(record: dict) -> Iterator[dict]:
    """One row per event of ``event_summary``, with the date LoCoMo gives for that session's events."""
    ids = {name: record[name] for name in schema.CONVERSATION_IDS}
    for session in record["sessions"]:
        events = json.loads(session["extra"] or "{}").get("event_summary") or {}
        for speaker, items in events.items():
            if speaker == "date":
                continue
            for position, event in enumerate(items):
                yield {
                    **ids,
                    "session_id": session["session_id"],
                    "speaker": speaker,
                    "position": position,
                    "event": event,
                    "date": events.get("date"),
                }


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


class LocomoBuilder(ConversationBuilder):
    SOURCE = "locomo"
    HUB_NAME = "locomo-unified"
    PRETTY_NAME = "LoCoMo (convhub unified)"
    LICENSE = "cc-by-nc-4.0"
    LANGUAGES = ("en",)
    HOMEPAGE = "https://snap-research.github.io/locomo/"
    DESCRIPTION = "Very long-term conversations between two people, with memory questions."
    ROLE_MAPPING = {"speaker_a": "user", "speaker_b": "assistant"}
    CITATION = """@inproceedings{maharana2024locomo,
  title     = {Evaluating Very Long-Term Conversational Memory of {LLM} Agents},
  author    = {Maharana, Adyasha and Lee, Dong-Ho and Tulyakov, Sergey and Bansal, Mohit and
               Barbieri, Francesco and Fang, Yuwei},
  booktitle = {Proceedings of the 62nd Annual Meeting of the Association for Computational Linguistics},
  year      = {2024}
}"""
    EXTRA_VIEWS = (OBSERVATIONS, EVENTS)

    def shards(self, dl_manager):
        data_dir = self.config.data_dir
        if data_dir is None:
            return {"test": [dl_manager.download(URL)]}
        if os.path.isfile(data_dir):
            return {"test": [data_dir]}
        files = sorted(glob.glob(os.path.join(data_dir, "*.json")))
        if not files:
            raise FileNotFoundError(f"no LoCoMo *.json file in {data_dir}")
        return {"test": files}

    def parse_shard(self, shard, notes):
        return parse.parse_file(shard, notes)
