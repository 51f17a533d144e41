"""What ``convhub score`` reads: a build's questions and a system's predictions, checked against each other.

Both inputs are a user's files, so every problem is a :class:`ScoreError` whose message is one line naming
the file, the line and the field (the command prints it as ``convhub score: error: ...``). A prediction for
a question the build does not hold is an error, never ignored; a question with no prediction is *missing*:
the benchmark modules score it as an empty answer with an empty ranking (0 on every figure) and count it.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from convhub.export.exporter import Build, ExportError, HubBuild, LocalBuild, open_build

Row = dict[str, Any]
QA = "qa"


class ScoreError(Exception):
    """Input ``convhub score`` cannot score: the message is one line naming file, line and field."""


@dataclass(frozen=True)
class Prediction:
    """One line of the predictions file: the system's answer and, optionally, what it retrieved, best first."""

    question_id: str
    prediction: str
    retrieved: tuple[str, ...] | None
    line: int


@dataclass(frozen=True)
class Scored:
    """A question of the build with its prediction (``None``: missing, scored as an empty answer)."""

    question: Row
    prediction: Prediction | None

    @property
    def answer_text(self) -> str:
        return self.prediction.prediction if self.prediction else ""

    @property
    def retrieved(self) -> tuple[str, ...] | None:
        """The ranking; a missing question's is empty (it retrieved nothing), a prediction without one None."""
        return self.prediction.retrieved if self.prediction else ()


#: The longest line of a predictions file (a ranking of every turn of LongMemEval's largest haystack is under
#: 1 MiB): a longer one is refused, as a file with no line breaks (``/dev/zero``) would fill the memory.
MAX_LINE_BYTES = 16 * 1024 * 1024
_BOM = b"\xef\xbb\xbf"


def read_predictions(
    path: str | os.PathLike,
    known: Iterable[str] | None = None,
    elsewhere: dict[str, str | None] | None = None,
) -> dict[str, Prediction]:
    """The predictions file (JSON Lines: ``question_id``, ``prediction``, optional ``retrieved``) by id.

    Read a line at a time, each at most ``MAX_LINE_BYTES``; with ``known`` (the build's question ids) a line
    naming another id is refused where it is read, so what is kept never exceeds one prediction per question;
    ``elsewhere`` (id → subset: the build's other subsets, with ``--subset``) lets that line say where it is.
    A UTF-8 byte order mark starting a line (the file's, or one of a file joined after it) and CRLF line ends
    are read as the text they stand for.
    """
    name = os.fspath(path)
    known = None if known is None else set(known)
    found: dict[str, Prediction] = {}
    with _open_regular(path, name) as file:
        for number, text in enumerate(_lines(file, name), 1):
            if text.startswith(_BOM):  # the file's, or that of a file joined after it (cat a.jsonl b.jsonl)
                text = text[len(_BOM) :]
            if not text.strip():
                continue
            where = f"{name} line {number}"
            prediction = _prediction(_record(text, where), where, number)
            if known is not None and prediction.question_id not in known:
                subset = (elsewhere or {}).get(prediction.question_id)
                raise ScoreError(
                    f"{where}, field 'question_id': {prediction.question_id!r} is not a question of the data"
                    + (
                        f" (it is one of subset {subset!r}: give the predictions of one subset)"
                        if subset
                        else ""
                    )
                )
            if prediction.question_id in found:
                first = found[prediction.question_id].line
                raise ScoreError(
                    f"{where}, field 'question_id': {prediction.question_id!r} is predicted twice "
                    f"(first on line {first})"
                )
            found[prediction.question_id] = prediction
    return found


def _open_regular(path: str | os.PathLike, name: str):
    """``path`` opened for reading if it is a regular file (a FIFO would block, a device never end)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise ScoreError(
                f"predictions {name}: not a regular file (a folder, a FIFO or a device): give a JSON Lines file"
            )
        return open(path, "rb")
    except OSError as error:
        raise ScoreError(f"predictions {name}: cannot read it: {error.strerror or error}") from None


def _lines(file, name: str) -> Iterator[bytes]:
    """The file's lines, each refused past ``MAX_LINE_BYTES`` before more of it is read."""
    number = 0
    while True:
        try:
            line = file.readline(MAX_LINE_BYTES + 1)
        except OSError as error:
            raise ScoreError(f"predictions {name}: cannot read it: {error.strerror or error}") from None
        if not line:
            return
        number += 1
        if len(line) > MAX_LINE_BYTES:
            raise ScoreError(
                f"{name} line {number}: longer than {MAX_LINE_BYTES // (1024 * 1024)} MiB "
                "(one prediction per line, each a JSON object)"
            )
        yield line


def _record(text: bytes, where: str) -> dict[str, Any]:
    """One line's JSON object; not UTF-8, not JSON (NaN, truncated, nested past the reader) or not an object:
    the error naming the line."""
    try:
        text.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ScoreError(f"{where}: not UTF-8 text (byte {error.start + 1} of the line)") from None
    try:
        record = orjson.loads(text)
    except orjson.JSONDecodeError as error:
        raise ScoreError(f"{where}: not JSON Lines (each line one JSON object): {error}") from None
    if not isinstance(record, dict):
        raise ScoreError(f"{where}: expected a JSON object, got {type(record).__name__}")
    return record


def _prediction(record: dict[str, Any], where: str, number: int) -> Prediction:
    question_id = record.get("question_id")
    if not isinstance(question_id, str):
        raise ScoreError(
            f"{where}, field 'question_id': expected a string, got {_kind(record, 'question_id')}"
        )
    answer = record.get("prediction")
    if not isinstance(answer, str):
        raise ScoreError(f"{where}, field 'prediction': expected a string, got {_kind(record, 'prediction')}")
    retrieved = record.get("retrieved")
    if retrieved is not None:
        if not isinstance(retrieved, list) or not all(isinstance(item, str) for item in retrieved):
            raise ScoreError(f"{where}, field 'retrieved': expected a list of turn or session ids (strings)")
        retrieved = tuple(retrieved)
    return Prediction(question_id, answer, retrieved, number)


def _kind(record: dict[str, Any], key: str) -> str:
    return "nothing (the field is missing)" if key not in record else type(record[key]).__name__


def open_data(location: str | os.PathLike, revision: str | None = None, token: str | None = None) -> Build:
    """The build at ``location`` (a folder ``convhub build`` wrote, or a Hub repo id), as ``export`` reads it."""
    try:
        return open_build(location, revision, token)
    except ExportError as error:
        raise ScoreError(str(error)) from None


def config_rows(build: Build, config: str) -> list[Row]:
    """Every row of one config of the build (JSON text decoded), all splits."""
    try:
        build.require(config)
        return [row for _, row in build.all_rows(config, batch_rows=1024)]
    except ExportError as error:
        raise ScoreError(str(error)) from None


def read_questions(
    build: Build, benchmark: str, subset: str | None = None, elsewhere: dict[str, str | None] | None = None
) -> list[Row]:
    """The ``qa`` rows of a build (of one ``subset`` when given), all of ``benchmark``'s source, each question
    id once: a build of several subsets that share ids (LongMemEval's files) is scored one subset at a time.
    ``elsewhere``, when given, receives the other subsets' question ids (id → subset)."""
    try:
        configs = build.configs()
    except ExportError as error:
        raise ScoreError(str(error)) from None
    if QA not in configs:
        raise ScoreError(
            f"{build.location} has no {QA!r} config (it has {', '.join(sorted(configs))}): it holds no questions "
            f"to score; convhub score scores builds of locomo, longmemeval, gigamemory or beam"
        )
    rows = config_rows(build, QA)
    subsets = sorted({row.get("subset") or "" for row in rows})
    if subset is not None:
        if subset not in subsets:
            raise ScoreError(
                f"{build.location} has no subset {subset!r}: its subsets are {', '.join(subsets)}"
            )
        if elsewhere is not None:
            elsewhere.update(
                (row["question_id"], row.get("subset")) for row in rows if row.get("subset") != subset
            )
        rows = [row for row in rows if row.get("subset") == subset]
    if not rows:
        raise ScoreError(f"{build.location}: its {QA!r} config holds no questions")
    seen: dict[str, str] = {}
    for row in rows:
        if row.get("source") != benchmark:
            raise ScoreError(
                f"{build.location} holds {row.get('source')!r} questions, not {benchmark!r} ones "
                f"(question {row.get('question_id')!r}): score it as {row.get('source')}"
            )
        question_id, conversation = row["question_id"], row["conversation_id"]
        if question_id in seen and subset is None and len(subsets) > 1:
            raise ScoreError(
                f"{build.location} holds the subsets {', '.join(subsets)}, whose questions share ids "
                f"({question_id!r} is in {seen[question_id]!r} and {conversation!r}): "
                f"score one subset at a time with --subset, e.g. --subset {subsets[0]}"
            )
        if question_id in seen:
            raise ScoreError(
                f"{build.location}: question id {question_id!r} is in conversations {seen[question_id]!r} and "
                f"{conversation!r}: a prediction's question_id could not say which"
            )
        seen[question_id] = conversation
    return rows


def source_files(build: Build) -> Any:
    """The input files the build was made from (``source_files`` of its card's YAML: name, bytes, sha256 of
    each), read from the build folder's README.md or the Hub repo's; None when the card has no such key."""
    from huggingface_hub import DatasetCard, hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError

    from convhub.publish.hub_errors import redact

    try:
        if isinstance(build, LocalBuild):
            card = build.card  # the card the build's files were listed from
        elif isinstance(build, HubBuild):
            readme = hf_hub_download(
                build.repo_id, "README.md", repo_type="dataset", revision=build.revision, token=build.token
            )
            card = DatasetCard.load(readme)
        else:
            raise TypeError(f"{build!r} is neither a local build nor one on the Hub")
    except (OSError, ValueError, HfHubHTTPError) as error:
        raise ScoreError(
            f"{build.location}: cannot read its card (README.md): {redact(str(error))}"
        ) from None
    return card.data.to_dict().get("source_files")


def pair(questions: list[Row], predictions: dict[str, Prediction]) -> list[Scored]:
    """Each question with its prediction (``read_predictions`` refused any that names no question)."""
    return [Scored(row, predictions.get(row["question_id"])) for row in questions]


def data_hash(questions: Iterable[Row]) -> str:
    """sha256 of the questions scored against (every field, keys sorted, rows in id order): the report's
    proof of which data its figures are about, whatever the order of the build's files."""
    digest = hashlib.sha256()
    for row in sorted(questions, key=lambda row: (row["conversation_id"], row["question_id"])):
        # json, not orjson: a decoded ``extra`` may hold integers past 64 bits, which orjson refuses
        digest.update(json.dumps(row, sort_keys=True, ensure_ascii=False, default=str).encode())
        digest.update(b"\n")
    return "sha256:" + digest.hexdigest()


def mean(values: list[float]) -> float | None:
    """The mean, or None for no values (a figure over no question is not 0)."""
    return sum(values) / len(values) if values else None
