from datetime import date, datetime
from typing import Any, Dict, List, Mapping, Optional, Union

from ._messages import Messages
from ._types import Added, Answer, HistoryEntry, MemoryItem, Page, SearchResult, Segment

class AsyncMemory:
    """``aril.Memory`` with every method a coroutine: ``await memory.search(...)``."""

    def __init__(self, path: Any, config: Optional[Mapping[str, Any]] = None, *, store: Optional[str] = None) -> None: ...
    async def __aenter__(self) -> "AsyncMemory": ...
    async def __aexit__(self, *exc: object) -> None: ...
    async def close(self) -> None: ...
    async def add(
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
    ) -> Added: ...
    async def search(
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
    ) -> SearchResult: ...
    async def get(self, memory_id: str) -> MemoryItem: ...
    async def get_all(
        self, *, user_id: str, agent_id: Optional[str] = None, run_id: Optional[str] = None, page: int = 1, page_size: int = 100
    ) -> Page[MemoryItem]: ...
    async def update(
        self,
        memory_id: str,
        text: Optional[str] = None,
        *,
        metadata: Optional[Mapping[str, Any]] = None,
        expires_at: Any = ...,
        at: Union[str, datetime, None] = None,
    ) -> MemoryItem: ...
    async def delete(self, memory_id: str) -> Dict[str, Any]: ...
    async def delete_all(self, *, user_id: str, agent_id: Optional[str] = None, run_id: Optional[str] = None) -> Dict[str, Any]: ...
    async def history(self, memory_id: str) -> List[HistoryEntry]: ...
    async def segments(
        self, *, user_id: str, agent_id: Optional[str] = None, run_id: Optional[str] = None, offset: int = 0, limit: int = 100
    ) -> Page[Segment]: ...
    async def profile(self, *, user_id: str, agent_id: Optional[str] = None, run_id: Optional[str] = None) -> Dict[str, Any]: ...
    async def ask(
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
    ) -> Answer: ...
    async def consolidate(
        self,
        *,
        limit: Optional[int] = None,
        retry_failed: bool = False,
        max_cards: Optional[int] = None,
        max_tokens: Optional[int] = None,
    ) -> Dict[str, Any]: ...
    async def stats(self) -> Dict[str, Any]: ...
    async def users(self) -> List[str]: ...
