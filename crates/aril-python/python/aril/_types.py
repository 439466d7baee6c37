"""The typed results every aril front (in process, async, HTTP client) returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Dict, Generic, Iterator, List, Optional, TypeVar

T = TypeVar("T")


def _time(value: Optional[str]) -> Optional[datetime]:
    """An RFC 3339 time from aril (UTC, `Z` or an offset) as an aware datetime."""
    if value is None:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


@dataclass(frozen=True)
class Source:
    """Where a recalled unit comes from, in the source's own ids."""

    conversation: str
    session: Optional[str]
    #: Source ids of the turns shown (e.g. LoCoMo's ``D1:3``), or aril turn ids.
    turns: List[str]


@dataclass(frozen=True)
class Hit:
    """One recalled unit: a turn, a segment, a turn's window or a card."""

    rank: int
    #: ``turn``, ``segment``, ``window`` or ``card``.
    kind: str
    id: str
    #: The unit's turns not shown by a better-ranked hit, ``Speaker: text``, one per line.
    text: str
    #: Fused reciprocal-rank score (higher is better; comparable within one search only).
    score: float
    #: When it was said (a segment: when it started).
    time: Optional[datetime]
    #: o200k tokens of ``text``.
    tokens: int
    source: Source
    metadata: Optional[Dict[str, Any]] = None

    @property
    def source_turns(self) -> List[str]:
        return self.source.turns

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "Hit":
        s = d["source"]
        return cls(
            rank=d["rank"],
            kind=d["kind"],
            id=d["id"],
            text=d["text"],
            score=d["score"],
            time=_time(d.get("time")),
            tokens=d["tokens"],
            source=Source(s["conversation"], s.get("session"), list(s["turns"])),
            metadata=d.get("metadata"),
        )


@dataclass(frozen=True)
class SearchResult:
    """The recalled context: hits best first, within the search's ``k`` and token budget."""

    query: str
    hits: List[Hit]
    #: o200k tokens of all hits' texts together.
    context_tokens: int

    def __iter__(self) -> Iterator[Hit]:
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)

    def __getitem__(self, i: int) -> Hit:
        return self.hits[i]

    @property
    def context(self) -> str:
        """The hits' texts as one block, best first, as an LLM would receive them."""
        return "\n\n".join(h.text for h in self.hits)

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "SearchResult":
        return cls(d["query"], [Hit._from(h) for h in d["results"]], d["context_tokens"])


@dataclass(frozen=True)
class MemoryItem:
    """A memory as it stands now: a turn and its later versions, or a card chain (``c_…``)."""

    #: Its first version's id; it never changes.
    id: str
    #: The current text.
    text: str
    user_id: str
    agent_id: Optional[str]
    run_id: Optional[str]
    #: Who said it (``user``, ``assistant``…); ``None`` for a card.
    role: Optional[str]
    metadata: Optional[Dict[str, Any]]
    categories: List[str]
    created_at: datetime
    updated_at: datetime
    #: From when it no longer holds (``forget``); ``None`` while it holds.
    valid_to: Optional[datetime] = None

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "MemoryItem":
        return cls(
            id=d["id"],
            text=d["memory"],
            user_id=d["user_id"],
            agent_id=d.get("agent_id"),
            run_id=d.get("run_id"),
            role=d.get("role"),
            metadata=d.get("metadata"),
            categories=list(d.get("categories") or []),
            created_at=_time(d["created_at"]),  # type: ignore[arg-type]
            updated_at=_time(d["updated_at"]),  # type: ignore[arg-type]
            valid_to=_time(d.get("valid_to")),
        )


@dataclass(frozen=True)
class HistoryEntry:
    """One version of a memory."""

    #: The version's own id.
    id: str
    memory_id: str
    #: From 1.
    version: int
    #: ``ADD`` for the first version; then ``UPDATE``, ``FORGET`` or ``RESTORE``.
    event: str
    old_text: Optional[str]
    text: str
    user_id: str
    role: Optional[str]
    metadata: Optional[Dict[str, Any]]
    #: When the version was said (its time), and when aril stored it.
    created_at: datetime
    updated_at: datetime
    #: Since when what it says held, and until when (as this version knew it; ``None``: holds).
    valid_from: Optional[datetime] = None
    valid_to: Optional[datetime] = None

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "HistoryEntry":
        return cls(
            id=d["id"],
            memory_id=d["memory_id"],
            version=d["version"],
            event=d["event"],
            old_text=d.get("old_memory"),
            text=d["new_memory"],
            user_id=d["user_id"],
            role=d.get("role"),
            metadata=d.get("metadata"),
            created_at=_time(d["created_at"]),  # type: ignore[arg-type]
            updated_at=_time(d["updated_at"]),  # type: ignore[arg-type]
            valid_from=_time(d.get("valid_from")),
            valid_to=_time(d.get("valid_to")),
        )


@dataclass(frozen=True)
class Segment:
    """A closed topic segment: consecutive turns of one conversation."""

    id: str
    user_id: str
    agent_id: Optional[str]
    run_id: Optional[str]
    conversation: str
    #: Its turns' ids, in conversation order.
    turns: List[str]
    #: The boundary probability that closed it (1.0 for forced cuts).
    boundary_score: float
    #: Why it closed (``topic_shift``, ``session_end``, ``max_tokens``…).
    reason: str
    tokens: int
    start_time: Optional[datetime]
    end_time: Optional[datetime]

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "Segment":
        scope = d["scope"]
        return cls(
            id=d["id"],
            user_id=scope["user_id"],
            agent_id=scope.get("agent_id"),
            run_id=scope.get("run_id"),
            conversation=d["conversation"],
            turns=list(d["turns"]),
            boundary_score=d["boundary_score"],
            reason=d["reason"],
            tokens=d["tokens"],
            start_time=_time(d.get("start_time")),
            end_time=_time(d.get("end_time")),
        )


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a list, and how many items the list has in all."""

    items: List[T]
    total: int
    offset: int

    def __iter__(self) -> Iterator[T]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


@dataclass(frozen=True)
class Added:
    """What ``add`` stored."""

    #: The stable id of every message sent, in order (also of those stored before).
    ids: List[str]
    #: For each message, whether it was stored before (same stable id): re-sending is safe.
    already_stored: List[bool]
    #: The ingest's counts (turns stored, segments closed, texts embedded…).
    report: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "Added":
        return cls(list(d["ids"]), list(d["already_stored"]), dict(d.get("report") or {}))


@dataclass(frozen=True)
class Recalled:
    """What planned recall found (``ask``): the plan, the chosen units and the context."""

    #: The plan's paths (each a goal and a query), or the question itself without a planner.
    plan: Dict[str, Any]
    #: Set when the plan is the question itself: no planner configured, or its reply unusable.
    plan_note: Optional[str]
    #: Which cross-encoder reranked the paths, or why none did.
    reranker: str
    #: The chosen units, best first (kind, id, text, time, turns, source_turns, paths, score…).
    items: List[Dict[str, Any]]
    #: The context exactly as the answerer receives it (newest first).
    context: str
    context_tokens: int

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "Recalled":
        return cls(d["plan"], d.get("plan_note"), d["reranker"], list(d["items"]), d["context"],
                   d["context_tokens"])


@dataclass(frozen=True)
class Answer:
    """An answer (``ask``) with the context it was given and what its LLM calls cost."""

    question: str
    #: The answer's text; empty when ``ask`` was called with ``context_only=True``.
    text: str
    recalled: Recalled
    #: ``llm_calls``, ``prompt_tokens``, ``completion_tokens`` of this question's calls.
    cost: Dict[str, Any]

    @classmethod
    def _from(cls, d: Dict[str, Any], question: str) -> "Answer":
        if "recalled" not in d:  # context only: no answer call was made
            return cls(question, "", Recalled._from(d), dict(d["cost"]))
        return cls(d["question"], d["answer"], Recalled._from(d["recalled"]), dict(d["cost"]))
