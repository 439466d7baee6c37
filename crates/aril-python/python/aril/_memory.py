"""``aril.Memory``: the engine in this process, over one data directory or a PostgreSQL store."""

from __future__ import annotations

import json
import os
from datetime import date, datetime
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from . import _native
from ._api import Api, Raw, Scope
from ._messages import asked_at
from ._types import Answer


def _scope(scope: Scope) -> Tuple[Any, Any, Any]:
    return scope["user_id"], scope["agent_id"], scope["run_id"]


class Memory(Api):
    """An aril memory opened in this process: turns kept verbatim, segmented by topic, recalled
    within a token budget. Thread-safe: searches run in parallel (the GIL is released during
    engine work); writes run one at a time.

    ``path`` is the data directory (created if needed; one process owns it at a time).
    ``config`` takes the keys of aril's configuration file (e.g. ``{"recall": {"default_k": 8}}``,
    ``{"llm": {"base_url": …, "model": …}}``). ``store`` puts the memory in PostgreSQL instead (a
    ``postgres://`` URL of a database ``aril migrate`` prepared); ``path`` then holds the lock.
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

    def ask(
        self,
        question: str,
        *,
        user_id: str,
        agent_id: Optional[str] = None,
        run_id: Optional[str] = None,
        k: Optional[int] = None,
        budget: Optional[int] = None,
        at: Union[str, date, datetime, None] = None,
        context_only: bool = False,
    ) -> Answer:
        """Answers from the memory with the language models configured by the ``ARIL_LLM_*``
        environment (or ``config["llm"]``): one planner call when a planner is configured, recall
        over cards and turns, one answer call (none with ``context_only=True``). Other calls on
        this memory go on while a model is called."""
        raw = self._engine.ask(
            question, user_id, agent_id, run_id, k, budget, asked_at(at), context_only
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
        ``cards_added``, ``failures`` and the calls' ``cost``. Other calls go on while the
        encoder runs: only storing a segment's cards holds the memory alone."""
        return json.loads(self._engine.consolidate(limit, retry_failed, max_cards, max_tokens))

    # -- the transport: the engine, JSON in and out ---------------------------------------------

    def _add(self, turns: List[Raw], flush: bool) -> Raw:
        return json.loads(self._engine.add(json.dumps(turns), flush))

    def _search(self, r: Raw) -> Raw:
        filters = json.dumps(r["filters"]) if r["filters"] is not None else None
        return json.loads(self._engine.search(
            r["query"], r["user_id"], r["agent_id"], r["run_id"], r["k"], r["budget"],
            r["asked_at"], r["sessions"], filters, r["threshold"]))

    def _get(self, memory_id: str) -> Raw:
        return json.loads(self._engine.get(memory_id))

    def _get_all(self, scope: Scope, offset: int, limit: int,
                 filters: Optional[Raw]) -> Tuple[List[Raw], int]:
        text = json.dumps(filters) if filters is not None else None
        raw = json.loads(self._engine.get_all(*_scope(scope), offset, limit, text))
        return raw["items"], raw["total"]

    def _update(self, memory_id: str, edit: Raw) -> Raw:
        metadata = json.dumps(edit["metadata"]) if "metadata" in edit else None
        clear = "expires_at" in edit and edit["expires_at"] is None
        return json.loads(self._engine.update(
            memory_id, edit["text"], metadata, edit.get("expires_at"), clear, edit["at"]))

    def _delete(self, memory_id: str) -> Raw:
        return json.loads(self._engine.delete(memory_id))

    def _forget(self, memory_id: str, at: Optional[str], restore: bool) -> Raw:
        return json.loads(self._engine.forget(memory_id, at, restore))

    def _delete_all(self, scope: Scope) -> Raw:
        return json.loads(self._engine.delete_all(*_scope(scope)))

    def _history(self, memory_id: str) -> List[Raw]:
        return json.loads(self._engine.history(memory_id))

    def _segments(self, scope: Scope, offset: int, limit: int) -> Tuple[List[Raw], int]:
        raw = json.loads(self._engine.segments(*_scope(scope), offset, limit))
        return raw["items"], raw["total"]

    def _profile(self, scope: Scope) -> Raw:
        return json.loads(self._engine.profile(*_scope(scope)))

    def _stats(self) -> Raw:
        return json.loads(self._engine.stats())

    def _users(self) -> List[str]:
        return json.loads(self._engine.users())
