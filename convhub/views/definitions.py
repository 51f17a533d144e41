"""Views: the shapes one canonical conversation record is published in.

A view is a name, its ``Features`` and a pure function from one canonical record to the rows it
contributes. The shared views below are the same for every source; a source may add its own views
(LoCoMo's ``observations``) or *table views* whose rows come from other files than the conversations
(ConvLab's ``ontology``): those set ``rows_from_record`` to ``None`` and the builder supplies the rows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from datasets import Features

from convhub import schema
from convhub.engine.writers.arrow_rows import rows_table
from convhub.views.derive import messages_table, qa_table, turns_table

Record = dict[str, Any]
Row = dict[str, Any]


@dataclass(frozen=True)
class View:
    name: str
    features: Features
    description: str
    rows_from_record: Callable[[Record], Iterator[Row]] | None = None
    #: The same rows of several records at once, in order (the shared views: one Arrow derivation per batch)
    rows_from_records: Callable[[list[Record]], Iterator[Row]] | None = None

    @property
    def is_table(self) -> bool:
        """True when the rows do not derive from conversation records (ontology, database...)."""
        return self.rows_from_record is None

    def rows_of(self, records: Iterable[Record]) -> Iterator[Row]:
        """The rows of ``records``, in order: record by record, or, for a view that derives them on Arrow, a
        batch of records at a time (``record_batches``). Deriving one record at a time, a stream of ``turns`` or
        ``messages`` gave a tenth of the conversations per second that ``sessions`` gave."""
        one_by_one = self.rows_from_record
        if one_by_one is None:
            raise TypeError(f"{self.name} is a table view: its rows do not come from records")
        if self.rows_from_records is None:
            return (row for record in records for row in one_by_one(record))
        return (row for batch in record_batches(records) for row in self.rows_from_records(batch))


#: ``record_batches``' limits: the records of a batch, and the turns past which a batch is given at once.
BATCH_RECORDS, BATCH_TURNS = 256, 16_384


def record_batches(records: Iterable[Record]) -> Iterator[list[Record]]:
    """``records`` in lists of 1, 2, 4... up to ``BATCH_RECORDS`` records, a list given as soon as it holds
    ``BATCH_TURNS`` turns: the first row comes after the first record (a stream's first row is not delayed),
    and a long conversation is not held beside many others."""
    batch: list[Record] = []
    size, turns = 1, 0
    for record in records:
        batch.append(record)
        turns += sum(len(session["turns"]) for session in record["sessions"])
        if len(batch) >= size or turns >= BATCH_TURNS:
            yield batch
            batch, size, turns = [], min(2 * size, BATCH_RECORDS), 0
    if batch:
        yield batch


def session_rows(record: Record) -> Iterator[Row]:
    yield record


def _derived(deriver: Callable[..., pa.Table], counts: bool = False) -> Callable[..., Iterator[Row]]:
    """A shared view's rows of some records, by the view's one definition (``convhub.views.derive``): the records
    as a ``sessions`` batch, flattened by the same Arrow code that derives a build's views from its Parquet."""

    def rows_from_records(records: list[Record], notes: Counter | None = None) -> Iterator[Row]:
        # as a build writes its sessions rows (a long conversation's turns already Arrow, a chunk of their own:
        # derived chunk by chunk, as a build derives its Parquet batch by batch, not copied into one)
        table = rows_table(records, schema.SESSIONS_FEATURES.arrow_schema)
        counting = {"notes": Counter() if notes is None else notes} if counts else {}
        for batch in table.to_batches():
            yield from deriver(batch, **counting).to_pylist()

    return rows_from_records


def _one_record(rows_from_records: Callable[..., Iterator[Row]]) -> Callable[..., Iterator[Row]]:
    """The rows of one record, by a function of several."""

    def rows_from_record(record: Record, notes: Counter | None = None) -> Iterator[Row]:
        return rows_from_records([record], notes)

    return rows_from_record


turns_of_records = _derived(turns_table)
qa_of_records = _derived(qa_table)
messages_of_records = _derived(messages_table, counts=True)
turn_rows, qa_rows, message_rows = map(_one_record, (turns_of_records, qa_of_records, messages_of_records))


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
    turns_of_records,
)
QA = View("qa", schema.QA_FEATURES, "One row per question, with its conversation id.", qa_rows, qa_of_records)
MESSAGES = View(
    "messages",
    schema.MESSAGES_FEATURES,
    "One row per session as chat `messages` of {role, content} that strict chat templates accept.",
    message_rows,
    messages_of_records,
)

SHARED_VIEWS: tuple[View, ...] = (SESSIONS, TURNS, QA, MESSAGES)
DEFAULT_VIEW = SESSIONS.name
