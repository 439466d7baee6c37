"""The methods every front of aril offers (``Memory`` in process, ``Client`` over ``aril serve``),
written once: each checks and shapes its arguments, asks the front's transport (the ``_``
methods a front implements) and turns the answer into the typed results."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from ._messages import Messages, asked_at, day_or_time, expiry, rfc3339, to_turns
from ._native import InvalidInputError
from ._types import Added, HistoryEntry, MemoryItem, Page, SearchResult, Segment

#: Leaves a memory's expiry as it is (``update``'s default); ``None`` removes it.
KEEP: Any = object()

Scope = Dict[str, Optional[str]]
Raw = Dict[str, Any]


def _scope(user_id: str, agent_id: Optional[str], run_id: Optional[str]) -> Scope:
    return {"user_id": user_id, "agent_id": agent_id, "run_id": run_id}


def _filters(filters: Optional[Mapping[str, Any]]) -> Optional[Raw]:
    if filters is None:
        return None
    if not isinstance(filters, Mapping):
        raise InvalidInputError(f"filters must be a dict, got {type(filters).__name__}")
    return dict(filters)


class Api:
    """What ``Memory`` and ``Client`` share; a front implements the transport below."""

    # -- the transport a front implements (raw JSON values in aril's shapes) ------------------

    def _add(self, turns: List[Raw], flush: bool) -> Raw: raise NotImplementedError
    def _search(self, request: Raw) -> Raw: raise NotImplementedError
    def _get(self, memory_id: str) -> Raw: raise NotImplementedError
    def _get_all(self, scope: Scope, offset: int, limit: int,
                 filters: Optional[Raw]) -> Tuple[List[Raw], int]: raise NotImplementedError
    def _update(self, memory_id: str, edit: Raw) -> Raw: raise NotImplementedError
    def _delete(self, memory_id: str) -> Raw: raise NotImplementedError
    def _forget(self, memory_id: str, at: Optional[str], restore: bool) -> Raw:
        raise NotImplementedError
    def _delete_all(self, scope: Scope) -> Raw: raise NotImplementedError
    def _history(self, memory_id: str) -> List[Raw]: raise NotImplementedError
    def _segments(self, scope: Scope, offset: int, limit: int) -> Tuple[List[Raw], int]: raise NotImplementedError
    def _profile(self, scope: Scope) -> Raw: raise NotImplementedError
    def _stats(self) -> Raw: raise NotImplementedError
    def _users(self) -> List[str]: raise NotImplementedError

    # -- the methods users call ----------------------------------------------------------------

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
        them (``name``, ``at``, ``session``, ``metadata``, ``source_id`` per message override the
        arguments). Nothing is stored when one message is bad; re-sending the same messages is
        safe. ``flush`` closes the conversation's open segment (the end of a thread)."""
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
        return Added._from(self._add(turns, flush))

    def search(
        self,
        query: str,
        *,
        user_id: str,
        agent_id: Optional[str] = None,
        run_id: Optional[str] = None,
        k: int = 10,
        budget: Optional[int] = None,
        at: Union[str, date, datetime, None] = None,
        sessions: bool = False,
        filters: Optional[Mapping[str, Any]] = None,
        threshold: Optional[float] = None,
    ) -> SearchResult:
        """Recalls what is relevant to ``query``: at most ``k`` hits and ``budget`` o200k tokens.
        ``at`` is when the question is asked (default now): "last week" counts from it; a date
        (``date`` or ``"2024-05-03"``) is that day's end, UTC.
        ``sessions=True`` ranks sessions instead, one hit each. ``filters`` (Mem0's language:
        ``{"category": "food"}``, ``{"stars": {"gte": 4}}``, ``{"created_at": {"gte":
        "2024-05-01"}}``, ``AND`` / ``OR`` / ``NOT``) keeps the memories that meet it: k of them
        when the scope has k. ``threshold`` (0-1) keeps the turns whose own vector is at least
        that similar to the query (cosine)."""
        request = {**_scope(user_id, agent_id, run_id), "query": query, "k": k, "budget": budget,
                   "asked_at": asked_at(at), "sessions": sessions,
                   "filters": _filters(filters), "threshold": threshold}
        return SearchResult._from(self._search(request))

    def get(self, memory_id: str) -> MemoryItem:
        """One memory as it stands now; ``NotFoundError`` when there is none."""
        return MemoryItem._from(self._get(memory_id))

    def get_all(
        self,
        *,
        user_id: str,
        agent_id: Optional[str] = None,
        run_id: Optional[str] = None,
        page: int = 1,
        page_size: int = 100,
        filters: Optional[Mapping[str, Any]] = None,
    ) -> Page[MemoryItem]:
        """A page of the scope's memories as they stand now, oldest first (1-based pages); with
        ``filters`` (as ``search`` takes them), of those that meet them, and their count."""
        if page < 1 or not 1 <= page_size <= 1000:
            raise InvalidInputError(
                f"page starts at 1 and page_size is 1-1000, got page={page}, page_size={page_size}"
            )
        offset = (page - 1) * page_size
        items, total = self._get_all(_scope(user_id, agent_id, run_id), offset, page_size,
                                     _filters(filters))
        return Page([MemoryItem._from(m) for m in items], total, offset)

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
        edit: Raw = {"text": text, "at": rfc3339(at, "at")}
        if metadata is not None:
            edit["metadata"] = dict(metadata)
        if expires_at is not KEEP:
            edit["expires_at"] = None if expires_at is None else expiry(expires_at)
        return MemoryItem._from(self._update(memory_id, edit))

    def forget(
        self, memory_id: str, *, at: Union[str, date, datetime, None] = None
    ) -> MemoryItem:
        """Marks a memory as no longer holding from ``at`` (a time, or a date: from that day's
        start, UTC; default now) without deleting it: search asked from then on leaves it out,
        ``history`` shows until when it held, ``get``/``get_all`` show it with ``valid_to``.
        ``ImmutableError`` for an immutable memory."""
        return MemoryItem._from(self._forget(memory_id, day_or_time(at, "at"), False))

    def restore(self, memory_id: str) -> MemoryItem:
        """Undoes ``forget``: the memory holds again (a new version that says so)."""
        return MemoryItem._from(self._forget(memory_id, None, True))

    def delete(self, memory_id: str) -> Dict[str, Any]:
        """Deletes a memory with every version, from every file; says what went."""
        return self._delete(memory_id)

    def delete_all(
        self, *, user_id: str, agent_id: Optional[str] = None, run_id: Optional[str] = None
    ) -> Dict[str, Any]:
        """Deletes everything the scope holds, from every file; says what went."""
        return self._delete_all(_scope(user_id, agent_id, run_id))

    def history(self, memory_id: str) -> List[HistoryEntry]:
        """Every version of a memory, first to newest."""
        return [HistoryEntry._from(e) for e in self._history(memory_id)]

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
            raise InvalidInputError(f"offset >= 0 and limit 1-1000, got {offset}, {limit}")
        items, total = self._segments(_scope(user_id, agent_id, run_id), offset, limit)
        return Page([Segment._from(s) for s in items], total, offset)

    def profile(
        self, *, user_id: str, agent_id: Optional[str] = None, run_id: Optional[str] = None
    ) -> Dict[str, Any]:
        """The user's stable ``preferences`` and ``traits`` (cards; empty until cards are written)."""
        return self._profile(_scope(user_id, agent_id, run_id))

    def stats(self) -> Dict[str, Any]:
        """Counts of the memory (turns, segments, cards, bytes…) and every LLM call's tokens
        (over ``aril serve``: an admin key's)."""
        return self._stats()

    def users(self) -> List[str]:
        """Every user with stored turns (over ``aril serve``: those the key can see)."""
        return self._users()
