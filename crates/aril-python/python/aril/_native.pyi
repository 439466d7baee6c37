"""Types of aril's native module (the engine in process). Use ``aril.Memory``, not this."""

from os import PathLike
from typing import Optional, Union

__version__: str

class ArilError(Exception):
    """An aril call failed; the message says what to fix."""

class InvalidInputError(ArilError):
    """A request aril refuses (empty text, an unknown field, a bad time…); nothing was changed."""

class NotFoundError(ArilError):
    """No memory (or nothing stored) with that id or scope."""

class ImmutableError(ArilError):
    """The memory was added with immutable=True: delete it and add the new text instead."""

class BusyError(ArilError):
    """The data directory is open in another process: one process owns a data directory."""

def memory_id(
    user_id: str,
    source_id: str,
    conversation: Optional[str] = None,
    session: Optional[str] = None,
    agent_id: Optional[str] = None,
    run_id: Optional[str] = None,
) -> str: ...

class Engine:
    def __init__(
        self,
        path: Union[str, PathLike[str]],
        config_json: Optional[str] = None,
        store: Optional[str] = None,
    ) -> None: ...
    def add(self, turns_json: str, flush: bool = False) -> str: ...
    def search(
        self,
        query: str,
        user_id: str,
        agent_id: Optional[str] = None,
        run_id: Optional[str] = None,
        k: Optional[int] = None,
        budget: Optional[int] = None,
        asked_at: Optional[str] = None,
        sessions: bool = False,
        filters_json: Optional[str] = None,
        threshold: Optional[float] = None,
    ) -> str: ...
    def get(self, id: str) -> str: ...
    def get_all(
        self,
        user_id: str,
        agent_id: Optional[str] = None,
        run_id: Optional[str] = None,
        offset: int = 0,
        limit: int = 100,
        filters_json: Optional[str] = None,
    ) -> str: ...
    def update(
        self,
        id: str,
        text: Optional[str] = None,
        metadata_json: Optional[str] = None,
        expires_at: Optional[str] = None,
        clear_expiry: bool = False,
        at: Optional[str] = None,
    ) -> str: ...
    def forget(self, id: str, at: Optional[str] = None, restore: bool = False) -> str: ...
    def delete(self, id: str) -> str: ...
    def delete_all(self, user_id: str, agent_id: Optional[str] = None, run_id: Optional[str] = None) -> str: ...
    def history(self, id: str) -> str: ...
    def segments(
        self,
        user_id: str,
        agent_id: Optional[str] = None,
        run_id: Optional[str] = None,
        offset: int = 0,
        limit: int = 100,
    ) -> str: ...
    def profile(self, user_id: str, agent_id: Optional[str] = None, run_id: Optional[str] = None) -> str: ...
    def ask(
        self,
        question: str,
        user_id: str,
        agent_id: Optional[str] = None,
        run_id: Optional[str] = None,
        k: Optional[int] = None,
        budget: Optional[int] = None,
        asked_at: Optional[str] = None,
        context_only: bool = False,
    ) -> str: ...
    def consolidate(
        self,
        limit: Optional[int] = None,
        retry_failed: bool = False,
        max_cards: Optional[int] = None,
        max_tokens: Optional[int] = None,
    ) -> str: ...
    def stats(self) -> str: ...
    def users(self) -> str: ...
    def close(self) -> None: ...
