"""aril: long-term memory for LLM agents.

``Memory`` runs aril's engine in this process over one data directory (or a PostgreSQL store);
``AsyncMemory`` is the same with coroutines; ``Client`` is the same against ``aril serve``. Every
error is an ``ArilError`` whose message says what to fix.
"""

from ._async import AsyncMemory
from ._client import Client
from ._api import KEEP
from ._memory import Memory
from ._native import (
    ArilError,
    BusyError,
    ImmutableError,
    InvalidInputError,
    NotFoundError,
    __version__,
    memory_id,
)
from ._types import (
    Added,
    Answer,
    HistoryEntry,
    Hit,
    MemoryItem,
    Page,
    Recalled,
    SearchResult,
    Segment,
    Source,
)

__all__ = [
    "Added",
    "Answer",
    "ArilError",
    "AsyncMemory",
    "BusyError",
    "Client",
    "HistoryEntry",
    "Hit",
    "ImmutableError",
    "InvalidInputError",
    "KEEP",
    "Memory",
    "MemoryItem",
    "NotFoundError",
    "Page",
    "Recalled",
    "SearchResult",
    "Segment",
    "Source",
    "__version__",
    "memory_id",
]
