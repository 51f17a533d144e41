"""Views: the shapes one canonical conversation record is published in.

A view is a name, its ``Features`` and a pure function from one canonical record to the rows it
contributes. The shared views below are the same for every source; a source may add its own views
(LoCoMo's ``observations``) or *table views* whose rows come from other files than the conversations
(ConvLab's ``ontology``): those set ``rows_from_record`` to ``None`` and the builder supplies the rows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from datasets import Features

from convhub import schema
from convhub.views.derive import messages_table, qa_table, turns_table

Record = dict[str, Any]
Row = dict[str, Any]


@dataclass(frozen=True)
class View:
    name: str
    features: Features
    description: str
    rows_from_record: Callable[[Record], Iterator[Row]] | None = None

    @property
    def is_table(self) -> bool:
        """True when the rows do not derive from conversation records (ontology, database...)."""
        return self.rows_from_record is None


def session_rows(record: Record) -> Iterator[Row]:
    yield record


def _derived(deriver: Callable[..., pa.Table], counts: bool = False) -> Callable[[Record], Iterator[Row]]:
    """A shared view's rows of one record, by the view's one definition (``convhub.views.derive``): the record as a
    one-row ``sessions`` batch, flattened by the same Arrow code that derives a build's views from its Parquet."""

    def rows_from_record(record: Record, notes: Counter | None = None) -> Iterator[Row]:
        batch = pa.RecordBatch.from_pylist(
            [schema.SESSIONS_FEATURES.encode_example(record)], schema=schema.SESSIONS_FEATURES.arrow_schema
        )
        counting = {"notes": Counter() if notes is None else notes} if counts else {}
        yield from deriver(batch, **counting).to_pylist()

    return rows_from_record


turn_rows = _derived(turns_table)
qa_rows = _derived(qa_table)
message_rows = _derived(messages_table, counts=True)


SESSIONS = View(
    "sessions",
    schema.SESSIONS_FEATURES,
    "One row per conversation, nested sessions, turns and questions (the canonical record).",
    session_rows,
)
TURNS = View(
    "turns",
    schema.TURNS_FEATURES,
    "One row per turn, with its conversation and session ids and position.",
    turn_rows,
)
QA = View("qa", schema.QA_FEATURES, "One row per question, with its conversation id.", qa_rows)
MESSAGES = View(
    "messages",
    schema.MESSAGES_FEATURES,
    "One row per session as chat `messages` of {role, content} that strict chat templates accept.",
    message_rows,
)

SHARED_VIEWS: tuple[View, ...] = (SESSIONS, TURNS, QA, MESSAGES)
DEFAULT_VIEW = SESSIONS.name
