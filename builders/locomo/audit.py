"""An audit of LoCoMo's labels in the build (``convhub build locomo --errata PATH``).

The audit (dial481/locomo-audit, CC BY-NC 4.0, as LoCoMo) judged 156 of locomo10.json's questions: 99 whose gold
answer is wrong and 57 whose answer is right but whose cited evidence is not. Each entry names its question
``locomo_<i>_qa<j>``: ``i`` is the sample's position in the file (0 is conv-26), ``j`` the question's position in
that sample's ``qa`` list, which are exactly the positions convhub's own ``question_id`` (``conv-26:qa<j>``) uses.

PATH is the consolidated ``errors.json`` (one JSON list of entries) or a folder of the audit's per-conversation
files, ``errors_conv_<i>.json`` (the same entries, those of sample ``i``). An audit is for one input only: each
entry's question, category, gold answer and cited evidence must be those of the question it names, else the build
stops on a :class:`SourceError` naming the audit file, the entry and the field; so it does for an entry naming a
sample or a question the input does not hold. Each audited question gets the verdict in its ``audit`` struct
(``convhub.schema.AUDIT``), the whole entry kept as JSON text in it.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any

from convhub import schema
from convhub.builders.locomo.evidence import parse_evidence
from convhub.errors import FieldError, Notes, SourceError, require_field
from convhub.storage.folders import open_file

#: The audit's id of a question: the sample's and the question's positions.
AUDIT_ID = re.compile(r"^locomo_(0|[1-9]\d*)_qa(0|[1-9]\d*)$")
#: A per-conversation file of the audit's folder (``audit/errors_conv_3.json``); ``conv_3.json`` and the
#: ``summary_conv_3.txt`` beside it are the audit's working material, not entries.
CONVERSATION_FILE = re.compile(r"^errors_conv_(0|[1-9]\d*)\.json$")
#: The one error type whose gold answer stands: only the citation was wrong.
CITATION_ONLY = "WRONG_CITATION"
STRING_FIELDS = ("question_id", "question", "golden_answer", "error_type", "reasoning", "correct_answer")
EVIDENCE_FIELDS = ("cited_evidence", "correct_evidence")
NOTE = "question with the verdict of the LoCoMo audit (--errata)"
NOTE_CHANGED = "audited question whose gold answer the audit corrects"


@dataclass(frozen=True)
class Entry:
    """One audit entry, checked: where it came from, the positions it names and its raw object."""

    file: str
    audit_id: str
    sample: int
    question: int
    raw: dict[str, Any]


@dataclass(frozen=True)
class Audit:
    """Every entry of one audit, by the sample position it names."""

    location: str
    by_sample: dict[int, list[Entry]]

    def apply(self, record: dict, position: int, path: str, notes: Notes) -> None:
        """Give the questions of the record read at ``position`` of ``path`` their verdicts, in place, once each
        entry is checked against the question it names."""
        turn_ids = {turn["turn_id"] for session in record["sessions"] for turn in session["turns"]}
        for entry in self.by_sample.get(position, []):
            questions = record["questions"]
            if entry.question >= len(questions):
                problem = (
                    f"names question {entry.question} of sample {record['conversation_id']!r} (position "
                    f"{position} in {path}), which has {len(questions)} questions: the audit is of another input"
                )
                raise SourceError(entry.file, entry.audit_id, "question_id", problem)
            question = questions[entry.question]
            check_question(entry, question, path)
            question["audit"] = verdict(entry, turn_ids, notes)
            notes.add(NOTE)
            if question["audit"]["answer_changed"]:
                notes.add(NOTE_CHANGED)

    def check_all_found(self, positions: list[int], applied: set[int], path: str, notes: Notes) -> None:
        """After the whole file: an entry naming a sample the file does not hold stops the build; one whose sample
        was left out as bad (``--on-bad-record skip``) is counted, its verdict having no question to go to."""
        read = set(positions)
        for position, entries in sorted(self.by_sample.items()):
            if position not in read:
                entry = entries[0]
                problem = f"names sample {position}, but {path} holds {len(read)} samples: the audit is of another input"
                raise SourceError(entry.file, entry.audit_id, "question_id", problem)
            if position not in applied:
                notes.add("audit entry of a sample left out as bad (not applied)", len(entries))


def check_question(entry: Entry, question: dict, path: str) -> None:
    """The entry's view of its question must be the input's: question text, category, gold answer, cited
    evidence (the raw list, as the file writes it)."""
    raw = entry.raw
    extra = json.loads(question["extra"]) if question["extra"] else {}
    ours = {
        "question": question["question"],
        "category": question["category_id"],
        "golden_answer": question["answer"],
        "cited_evidence": extra.get("evidence"),
    }
    for field, value in ours.items():
        if raw[field] != value:
            problem = (
                f"the audit has {raw[field]!r} where question {question['question_id']!r} of {path} has {value!r}:"
                " the audit is of another input"
            )
            raise SourceError(entry.file, entry.audit_id, field, problem)


def verdict(entry: Entry, turn_ids: set[str], notes: Notes) -> schema.Audit:
    """The ``audit`` struct of one entry: corrected evidence normalized as LoCoMo's own (the raw list stays in
    ``entry``)."""
    raw = entry.raw
    ids, unreadable = parse_evidence(raw["correct_evidence"], notes, "correct_evidence", "audit evidence")
    found = [turn_id for turn_id in ids if turn_id in turn_ids]
    if missing := [turn_id for turn_id in ids if turn_id not in turn_ids]:
        notes.add("audit evidence id that names no turn (moved to audit.unresolved_evidence)", len(missing))
    return {
        "audit_id": entry.audit_id,
        "error_type": raw["error_type"],
        "answer_changed": raw["error_type"] != CITATION_ONLY,
        "answer": raw["correct_answer"],
        "evidence_turn_ids": found,
        "unresolved_evidence": missing + unreadable,
        "reasoning": raw["reasoning"],
        "entry": schema.to_json(raw),
    }


def audit_files(location: str) -> list[tuple[str, int | None]]:
    """(path, the sample its file is of, or None) of each file of the audit: the file itself, or a folder's
    ``errors_conv_<i>.json`` files in the order of ``i``."""
    if not os.path.isdir(location):
        return [(location, None)]
    numbered = sorted(
        (int(match.group(1)), name)
        for name in os.listdir(location)
        if (match := CONVERSATION_FILE.match(name))
    )
    if not numbered:
        raise SourceError(
            location, None, None, "a folder of the audit holds errors_conv_<i>.json files: none here"
        )
    return [(os.path.join(location, name), number) for number, name in numbered]


def parse_entry(raw: Any, file: str, position: int, sample: int | None) -> Entry:
    """One entry, its fields typed as the audit writes them, or a SourceError naming it (by id, else position)."""
    name = raw.get("question_id") if isinstance(raw, dict) else None
    where = name if isinstance(name, str) else position
    try:
        if not isinstance(raw, dict):
            raise FieldError(None, f"expected an object, got {type(raw).__name__}")
        for field in STRING_FIELDS:
            require_field(raw, field, str)
        require_field(raw, "category", int)
        for field in EVIDENCE_FIELDS:
            value = require_field(raw, field, list)
            if not all(isinstance(item, str) for item in value):
                raise FieldError(field, f"expected a list of strings, got {value!r}")
        match = AUDIT_ID.match(raw["question_id"])
        if match is None:
            raise FieldError("question_id", f"{raw['question_id']!r} is not locomo_<sample>_qa<question>")
        if sample is not None and int(match.group(1)) != sample:
            raise FieldError("question_id", f"names sample {match.group(1)}, in the file of sample {sample}")
    except FieldError as error:
        raise SourceError(file, where, error.field, error.problem) from None
    return Entry(file, raw["question_id"], int(match.group(1)), int(match.group(2)), raw)


def load(location: str) -> Audit:
    """The audit at ``location`` (a file or a folder, see the module), every entry checked for its shape; an id
    given twice is refused. Read where it is used (once before the build, once per file read): it is small, and
    a process that builds again reads the audit as it is then."""
    by_sample: dict[int, list[Entry]] = {}
    seen: dict[str, str] = {}
    for path, sample in audit_files(location):
        try:
            with open_file(path) as handle:
                entries = json.load(handle)
        except (OSError, UnicodeDecodeError, ValueError) as error:
            raise SourceError(path, None, None, f"cannot read the audit: {error}") from None
        if not isinstance(entries, list):
            raise SourceError(path, None, None, f"expected a list of entries, got {type(entries).__name__}")
        for position, raw in enumerate(entries):
            entry = parse_entry(raw, path, position, sample)
            if entry.audit_id in seen:
                problem = f"the same question as an earlier entry, in {seen[entry.audit_id]}"
                raise SourceError(path, entry.audit_id, "question_id", problem)
            seen[entry.audit_id] = path
            by_sample.setdefault(entry.sample, []).append(entry)
    return Audit(location, by_sample)
