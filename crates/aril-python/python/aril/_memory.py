"""``aril.Memory``: the engine in this process, over one data directory or a PostgreSQL store."""

from __future__ import annotations

import json
import os
from datetime import date, datetime
from typing import Any, Dict, List, Mapping, Optional, Union

from . import _native
from ._messages import Messages, expiry, rfc3339, to_turns
from ._types import Added, Answer, HistoryEntry, MemoryItem, Page, SearchResult, Segment

#: Leaves a memory's expiry as it is (``update``'s default); ``None`` removes it.
KEEP = object()


def page_offset(page: int, page_size: int) -> int:
    """The offset of a 1-based page, refusing pages that name nothing."""
    if page < 1 or not 1 <= page_size <= 1000:
        raise _native.InvalidInputError(
            f"page starts at 1 and page_size is 1-1000, got page={page}, page_size={page_size}"
        )
    return (page - 1) * page_size


class Memory:
    """An aril memory opened in this process: turns kept verbatim, segmented by topic, recalled
    within a token budget. Thread-safe: searches run in parallel (the GIL is released during
    engine work); writes run one at a time.

    ``path`` is the data directory (created if needed; one process owns it at a time).
    ``config`` takes the keys of aril's configuration file (e.g. ``{"recall": {"default_k": 8}}``).
    ``store`` puts the memory in PostgreSQL instead (a ``postgres://`` URL of a database that
    ``aril migrate`` prepared); ``path`` then holds nothing but the lock.
    """

    def __init__(
        self,
        path: Union[str, "os.PathLike[str]"],
        config: Optional[Mapping[str, Any]] = None,
        *,
        store: Optional[str] = None,
    ) -> None:
        self._engine = _native.Engine(
            os.fspath(path), json.dumps(dict(config)) if config is not None else None, store
        )

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Releases the data directory now; later calls raise ``ArilError``."""
        self._engine.close()

    def add(
        self,
        messages: Messages,
        *,
        user_id: str,
        agent_id: Optional[str] = None,
        run_id: Optional[str] = None,
        session: Optional[str] = None,
        conversation: Optional[str] = None,
        at: Union[str, datetime, None] = None,
        metadata: Optional[Mapping[str, Any]] = None,
        expires_at: Union[str, date, datetime, None] = None,
        immutable: bool = False,
        flush: bool = False,
    ) -> Added:
        """Stores messages: a string (a user turn), one ``{"role", "content"}`` dict, or a list of
        them (``name``, ``at``, ``session``, ``metadata`` per message override the arguments).
        Nothing is stored when one message is bad. Re-sending the same messages is safe.
        ``flush`` closes the conversation's open segment (the end of a thread)."""
        turns = to_turns(
            messages,
            user_id=user_id,
            agent_id=agent_id,
            run_id=run_id,
            conversation=conversation,
            session=session,
            at=at,
            metadata=metadata,
            expires_at=expires_at,
            immutable=immutable,
        )
        return Added._from(json.loads(self._engine.add(json.dumps(turns), flush)))

    def search(
        self,
        query: str,
        *,
        user_id: str,
        agent_id: Optional[str] = None,
        run_id: Optional[str] = None,
        k: int = 10,
        budget: Optional[int] = None,
        at: Union[str, datetime, None] = None,
        sessions: bool = False,
    ) -> SearchResult:
        """Recalls what is relevant to ``query``: at most ``k`` hits and ``budget`` o200k tokens.
        ``at`` is when the question is asked (default now): "last week" counts from it.
        ``sessions=True`` ranks sessions instead, one hit each."""
        raw = self._engine.search(
            query, user_id, agent_id, run_id, k, budget, rfc3339(at, "at"), sessions
        )
        return SearchResult._from(json.loads(raw))

    def get(self, memory_id: str) -> MemoryItem:
        """One memory as it stands now; ``NotFoundError`` when there is none."""
        return MemoryItem._from(json.loads(self._engine.get(memory_id)))

    def get_all(
        self,
        *,
        user_id: str,
        agent_id: Optional[str] = None,
        run_id: Optional[str] = None,
        page: int = 1,
        page_size: int = 100,
    ) -> Page[MemoryItem]:
        """A page of the scope's memories as they stand now, oldest first (1-based pages)."""
        offset = page_offset(page, page_size)
        raw = json.loads(self._engine.get_all(user_id, agent_id, run_id, offset, page_size))
        return Page([MemoryItem._from(m) for m in raw["items"]], raw["total"], offset)

    def update(
        self,
        memory_id: str,
        text: Optional[str] = None,
        *,
        metadata: Optional[Mapping[str, Any]] = None,
        expires_at: Any = KEEP,
        at: Union[str, datetime, None] = None,
    ) -> MemoryItem:
        """Writes a memory's next version (the old one stays in its history): new text, new
        metadata (replacing the whole), a new expiry (``None`` removes it). ``ImmutableError``
        for a memory added with ``immutable=True``."""
        clear = expires_at is None
        expires = None if expires_at is KEEP or clear else expiry(expires_at)
        raw = self._engine.update(
            memory_id,
            text,
            json.dumps(dict(metadata)) if metadata is not None else None,
            expires,
            clear,
            rfc3339(at, "at"),
        )
        return MemoryItem._from(json.loads(raw))

    def delete(self, memory_id: str) -> Dict[str, Any]:
        """Deletes a memory with every version, from every file; returns what went."""
        return json.loads(self._engine.delete(memory_id))

    def delete_all(
        self, *, user_id: str, agent_id: Optional[str] = None, run_id: Optional[str] = None
    ) -> Dict[str, Any]:
        """Deletes everything the scope holds, from every file; returns the counts."""
        return json.loads(self._engine.delete_all(user_id, agent_id, run_id))

    def history(self, memory_id: str) -> List[HistoryEntry]:
        """Every version of a memory, first to newest."""
        return [HistoryEntry._from(e) for e in json.loads(self._engine.history(memory_id))]

    def segments(
        self,
        *,
        user_id: str,
        agent_id: Optional[str] = None,
        run_id: Optional[str] = None,
        offset: int = 0,
        limit: int = 100,
    ) -> Page[Segment]:
        """A page of the scope's closed topic segments, in the order they were stored."""
        if offset < 0 or not 1 <= limit <= 1000:
            raise _native.InvalidInputError(f"offset >= 0 and limit 1-1000, got {offset}, {limit}")
        raw = json.loads(self._engine.segments(user_id, agent_id, run_id, offset, limit))
        return Page([Segment._from(s) for s in raw["items"]], raw["total"], offset)

    def profile(
        self, *, user_id: str, agent_id: Optional[str] = None, run_id: Optional[str] = None
    ) -> Dict[str, Any]:
        """The user's stable ``preferences`` and ``traits`` (cards; empty until cards are written)."""
        return json.loads(self._engine.profile(user_id, agent_id, run_id))

    def ask(
        self,
        question: str,
        *,
        user_id: str,
        agent_id: Optional[str] = None,
        run_id: Optional[str] = None,
        k: Optional[int] = None,
        budget: Optional[int] = None,
        at: Union[str, datetime, None] = None,
        context_only: bool = False,
    ) -> Answer:
        """Answers from the memory with the language models configured by the ``ARIL_LLM_*``
        environment (or ``config["llm"]``): one planner call when a planner is configured, recall
        over cards and turns, one answer call (none with ``context_only=True``). Other calls on
        this memory wait while it runs."""
        raw = self._engine.ask(
            question, user_id, agent_id, run_id, k, budget, rfc3339(at, "at"), context_only
        )
        return Answer._from(json.loads(raw), question)

    def consolidate(
        self,
        *,
        limit: Optional[int] = None,
        retry_failed: bool = False,
        max_cards: Optional[int] = None,
        max_tokens: Optional[int] = None,
    ) -> Dict[str, Any]:
        """Writes closed segments into typed cards with the configured encoder model (one call
        per segment, at most ``limit``); returns ``segments_done``, ``segments_failed``,
        ``cards_added``, ``failures`` and the calls' ``cost``. Other calls wait while it runs."""
        return json.loads(self._engine.consolidate(limit, retry_failed, max_cards, max_tokens))

    def stats(self) -> Dict[str, Any]:
        """Counts of the memory (turns, segments, cards, bytes…) and every LLM call's tokens."""
        return json.loads(self._engine.stats())

    def users(self) -> List[str]:
        """Every user with stored turns."""
        return json.loads(self._engine.users())
