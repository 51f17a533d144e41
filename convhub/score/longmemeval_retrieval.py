"""LongMemEval's retrieval figures: recall_any, recall_all and NDCG at k of a system's ranking, per protocol.

The metric functions are those of the authors' ``src/retrieval/eval_utils.py`` (xiaowu0162/LongMemEval, read at
commit 6a92d1ab), over a *corpus* (a list of ids) and a ranking of positions in it, best first:

* ``evaluate_retrieval``: recall_any@k is 1 when some gold id is among the top k, recall_all@k when every one is
  (1 for no gold, as Python's ``all``); ndcg_any@k is binary-relevance DCG (the first rank undiscounted, rank
  r ≥ 2 divided by log2(r)) over the ideal DCG of the corpus's relevant entries.
* ``evaluate_turns_as_sessions`` (their ``evaluate_retrieval_turn2session``): a turn ranking at session level,
  each id cut to its session (``<session id>_<n>`` → ``<session id>``) and k widened until the top k holds k
  distinct sessions (or to the whole corpus). Found here in one pass over the ranking, where theirs recounted
  the prefix at each step (quadratic: 130 s for a 32k-turn ranking).

What the corpus and the gold are is the *protocol*:

* ``longmemeval`` (the default), as the authors' ``src/retrieval/run_retrieval.py`` (commit b60a5b7d) builds
  them: user turns only (a session's entry stands for its user turns); an evidence session (an id holding
  ``answer``) none of whose user turns has ``has_answer`` is renamed ``noans_...`` and is not gold, and at turn
  level so is each of its user turns without ``has_answer``. Averages leave out abstention questions and every
  question whose haystack has no user turn marked ``has_answer`` (the single-session-assistant ones). A ranking
  may name an id in either spelling (``answer_...`` or ``noans_...``); an assistant turn it names is not in the
  corpus and is passed over (counted in the report).
* ``convhub``: every turn and session of the build, gold the question's ``evidence_session_ids`` and
  ``evidence_turn_ids`` (assistant turns too); only abstention questions are left out.

A system's ranking may be shorter than the corpus: what it leaves out counts as not retrieved at every k
(the authors' retrievers always rank the whole corpus, so a figure at a k past the ranking's length is theirs
only for a whole ranking).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from convhub.score.inputs import ScoreError

KS = (1, 3, 5, 10, 30, 50)
LEVELS = ("session", "turn")
METRICS = ("recall_any", "recall_all", "ndcg_any")
PROTOCOLS = ("longmemeval", "convhub")
#: Why the ``longmemeval`` protocol leaves a question out of the retrieval averages, as run_retrieval.py prints.
ABSTENTION, NO_USER_EVIDENCE = "abstention", "no_user_evidence"


def dcg(relevances: Sequence[float], k: int) -> float:
    """Discounted cumulative gain at k: the first relevance as is, rank r ≥ 2 divided by log2(r)."""
    top = relevances[:k]
    if not top:
        return 0.0
    return top[0] + sum(value / math.log2(rank) for rank, value in enumerate(top[1:], 2))


def evaluate_retrieval(
    ranking: Sequence[int], gold: set[str], ids: Sequence[str], k: int
) -> tuple[float, ...]:
    """(recall_any, recall_all, ndcg_any) at k of a ranking of positions in the corpus ``ids``."""
    recalled = {ids[position] for position in ranking[:k]}
    recall_any = float(any(doc in recalled for doc in gold))
    recall_all = float(all(doc in recalled for doc in gold))
    relevant = sum(doc in gold for doc in ids)
    ideal = dcg([1.0] * min(relevant, k), k)
    actual = dcg([1.0 if ids[position] in gold else 0.0 for position in ranking[:k]], k)
    return recall_any, recall_all, (actual / ideal if ideal else 0.0)


def session_of(turn_id: str) -> str:
    """LongMemEval's ``strip_turn_id``: a turn id without its last ``_<n>``."""
    return "_".join(turn_id.split("_")[:-1])


def widened_k(ranking: Sequence[int], sessions: Sequence[str], k: int) -> int:
    """The least k' ≥ k whose top k' holds k distinct sessions; else past the whole corpus (as theirs ends)."""
    seen: set[str] = set()
    for rank, position in enumerate(ranking, 1):
        seen.add(sessions[position])
        if len(seen) >= k:
            return max(rank, k)
    return max(k, len(sessions) + 1)


def evaluate_turns_as_sessions(
    ranking: Sequence[int], gold: set[str], ids: Sequence[str], k: int, sessions: Sequence[str] | None = None
) -> tuple[float, ...]:
    """A turn ranking scored at session level (``sessions``: each id's session, when the caller has it)."""
    sessions = [session_of(doc) for doc in ids] if sessions is None else sessions
    return evaluate_retrieval(
        ranking, {session_of(doc) for doc in gold}, sessions, widened_k(ranking, sessions, k)
    )


@dataclass(frozen=True)
class Turn:
    turn_id: str
    role: str
    has_answer: bool


@dataclass
class Conversation:
    """One conversation's haystack, from the build's ``turns`` config: each session's turns, in order."""

    sessions: dict[str, list[Turn]] = field(default_factory=dict)


def read_conversations(rows: Iterable[dict[str, Any]]) -> dict[str, Conversation]:
    """Each conversation's sessions and turns (role, ``has_answer`` from the turn's ``extra``) from ``turns`` rows."""
    conversations: dict[str, Conversation] = {}
    for row in sorted(
        rows, key=lambda row: (row["conversation_id"], row["session_index"], row["turn_index"])
    ):
        extra = row.get("extra") or {}
        turn = Turn(row["turn_id"], row.get("role") or "", extra.get("has_answer") is True)
        conversation = conversations.setdefault(row["conversation_id"], Conversation())
        conversation.sessions.setdefault(row["session_id"], []).append(turn)
    return conversations


@dataclass
class Corpus:
    """One question's corpus at one level: its ids in the protocol's spelling, every accepted spelling's
    position, the gold ids, and ids a ranking may name that are not in the corpus (passed over)."""

    ids: list[str] = field(default_factory=list)
    position: dict[str, int] = field(default_factory=dict)
    gold: set[str] = field(default_factory=set)
    passed_over: set[str] = field(default_factory=set)

    def add(self, doc: str, *spellings: str) -> None:
        for spelling in (doc, *spellings):
            self.position.setdefault(spelling, len(self.ids))
        self.ids.append(doc)


def corpus(protocol: str, level: str, conversation: Conversation, question: dict[str, Any]) -> Corpus:
    """The corpus and gold of one question at ``level`` under ``protocol`` (see the module's docstring)."""
    result = Corpus()
    if protocol == "convhub":
        evidence = set(question["evidence_turn_ids"] or [])
        for session_id, turns in conversation.sessions.items():
            if level == "session":
                result.add(session_id)
            for turn in turns if level == "turn" else ():
                # a turn that is not evidence stands for a "no answer" copy of its session, never a gold one
                result.add(
                    turn.turn_id if turn.turn_id in evidence else "noans:" + turn.turn_id, turn.turn_id
                )
        gold = question["evidence_session_ids"] if level == "session" else question["evidence_turn_ids"]
        result.gold = set(gold or [])
        return result
    for session_id, turns in conversation.sessions.items():
        user = [turn for turn in turns if turn.role == "user"]
        if level == "session":
            renamed = "answer" in session_id and not any(turn.has_answer for turn in user)
            result.add(session_id.replace("answer", "noans") if renamed else session_id, session_id)
            continue
        for turn in user:
            plain = "answer" not in session_id or turn.has_answer
            result.add(turn.turn_id if plain else turn.turn_id.replace("answer", "noans"), turn.turn_id)
        result.passed_over.update(turn.turn_id for turn in turns if turn.role != "user")
    result.gold = {doc for doc in result.ids if "answer" in doc}
    return result


def is_abstention(question: dict[str, Any]) -> bool:
    """LongMemEval's test (``'_abs' in question_id``), or an ``abstention`` flag a builder put in ``extra``."""
    return "_abs" in question["question_id"] or bool((question.get("extra") or {}).get("abstention"))


def left_out(protocol: str, question: dict[str, Any], conversation: Conversation) -> str | None:
    """Why the protocol leaves the question out of the retrieval averages (None: it counts)."""
    if is_abstention(question):
        return ABSTENTION
    if protocol == "longmemeval" and not any(
        turn.has_answer and turn.role == "user" for turns in conversation.sessions.values() for turn in turns
    ):
        return NO_USER_EVIDENCE
    return None


def ranking_level(retrieved: Sequence[str], conversation: Conversation, where: str) -> str:
    """Whether a ranking holds session or turn ids of its conversation (either spelling); a stranger or a mix
    is an error naming the line and the field. An id that is both a session's and a turn's (a session named
    ``answer_x_1`` beside session ``answer_x``'s first turn) takes the level of the ranking's other ids; a
    ranking of such ids only is an error, never read as one level silently."""
    turns = {turn.turn_id for session in conversation.sessions.values() for turn in session}
    levels = {"session", "turn"}
    for item in retrieved:
        plain = item.replace("noans", "answer") if item.startswith("noans") else item
        kinds = set()
        if plain in conversation.sessions or item in conversation.sessions:
            kinds.add("session")
        if plain in turns or item in turns:
            kinds.add("turn")
        if not kinds:
            raise ScoreError(
                f"{where}, field 'retrieved': {item!r} is neither a session nor a turn of its conversation"
            )
        if not levels & kinds:
            raise ScoreError(f"{where}, field 'retrieved': mixes session and turn ids (rank one kind)")
        levels &= kinds
    if retrieved and len(levels) > 1:
        raise ScoreError(
            f"{where}, field 'retrieved': every id is both a session and a turn of its conversation "
            f"({retrieved[0]!r}): add one that is only a session or only a turn, so the level is known"
        )
    return levels.pop() if retrieved else ""


def positions(retrieved: Sequence[str], corpus: Corpus) -> tuple[list[int], int]:
    """The ranking as corpus positions, each once (a repeat, in either spelling, dropped), and how many of its
    ids the corpus passes over (assistant turns, under the ``longmemeval`` protocol)."""
    ranked: dict[int, None] = {}
    passed = 0
    for item in retrieved:
        position = corpus.position.get(item)
        if position is None:
            plain = item.replace("noans", "answer") if item.startswith("noans") else item
            position = corpus.position.get(plain)
            if position is None:
                passed += plain in corpus.passed_over
                continue
        ranked.setdefault(position, None)
    return list(ranked), passed


def retrieval_metrics(ranking: Sequence[int], level: str, corpus: Corpus) -> dict[str, dict[str, float]]:
    """Every metric at every k for one question's ranking of positions in its ``corpus`` at ``level``:
    {level: {"recall_any@5": ...}}, and a turn ranking at session level too."""
    results: dict[str, dict[str, float]] = {level: {}}
    sessions = [session_of(doc) for doc in corpus.ids] if level == "turn" else []
    for k in KS:
        values = evaluate_retrieval(ranking, corpus.gold, corpus.ids, k)
        results[level].update(zip((f"{m}@{k}" for m in METRICS), values, strict=True))
        if level == "turn":
            values = evaluate_turns_as_sessions(ranking, corpus.gold, corpus.ids, k, sessions)
            results.setdefault("session", {}).update(zip((f"{m}@{k}" for m in METRICS), values, strict=True))
    return results
