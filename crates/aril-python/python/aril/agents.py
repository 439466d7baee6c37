"""aril in the OpenAI Agents SDK: ``ArilSession`` keeps an agent's conversation in aril (the SDK's
``Session`` protocol: ``Runner.run(agent, input, session=ArilSession(...))``), and
``instructions_with_memory`` adds what aril recalls for a question to an agent's instructions.

A session is the aril scope (``user_id``, ``agent_id``, ``run_id=session_id``): its items are that
run's turns, in order, so the user's other sessions and everything else aril holds for the user
stay searchable beside it (``memory.search(..., user_id=...)`` spans every run). Each item is one
turn: a message keeps its role and text (so recall reads it like any turn); a tool call, its
output or any other item is a ``tool`` turn whose text is the item's JSON (tool turns are kept and
BM25-indexed, not embedded). Every item comes back from ``get_items`` exactly as it was added
(kept in the turn's metadata; an item too large for metadata is read back from its text).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Dict, List, Optional

from agents.memory.session import SessionABC

from ._native import NotFoundError

#: Items are kept in the turn's metadata under this key (``"text"`` when the turn's text is the
#: item's JSON).
METADATA_KEY = "openai_agents"
#: The most an item's JSON may take in metadata (aril keeps at most 16 KiB of metadata).
METADATA_ROOM = 15 * 1024
ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}
PAGE = 1000


def _message_text(item: Dict[str, Any]) -> Optional[str]:
    """A message item's text (a string, or its text parts joined), else ``None``."""
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
        if texts and len(texts) == len(content):
            return "\n".join(texts)
    return None


def _turn(item: Dict[str, Any], position: int) -> Dict[str, Any]:
    """The message ``add`` takes for one item; its source id is its position in the session."""
    role = ROLES.get(item.get("role", ""))
    text = _message_text(item) if role else None
    kept = json.dumps(item, ensure_ascii=False, sort_keys=True)
    if role is None or not text or not text.strip():
        role, text, keep = "tool", kept, "text"
    else:
        keep = item if len(kept.encode()) <= METADATA_ROOM else {"role": item["role"], "content": text}
    return {"role": role, "content": text, "source_id": str(position), "metadata": {METADATA_KEY: keep}}


def _item(record: Any) -> Dict[str, Any]:
    kept = (record.metadata or {}).get(METADATA_KEY)
    if kept == "text":
        return json.loads(record.text)
    if isinstance(kept, dict):
        return kept
    return {"role": record.role or "user", "content": record.text}


class ArilSession(SessionABC):
    """An Agents SDK session kept in aril (an ``aril.Memory``, or an ``aril.Client``)."""

    def __init__(self, session_id: str, memory: Any, *, user_id: str, agent_id: Optional[str] = None) -> None:
        self.session_id = session_id
        self.memory = memory
        self.user_id = user_id
        self.agent_id = agent_id

    def _scope(self) -> Dict[str, Any]:
        return {"user_id": self.user_id, "agent_id": self.agent_id, "run_id": self.session_id}

    def _records(self, limit: Optional[int] = None) -> List[Any]:
        """The session's memories in order: all, or the last ``limit``."""
        total = self.memory.get_all(**self._scope(), page_size=1).total
        first = 0 if limit is None else max(0, total - limit)
        records: List[Any] = []
        page = first // PAGE + 1
        while (page - 1) * PAGE < total:
            records.extend(self.memory.get_all(**self._scope(), page=page, page_size=PAGE).items)
            page += 1
        return records[first - (first // PAGE) * PAGE:]

    def _get_items(self, limit: Optional[int]) -> List[Dict[str, Any]]:
        if limit is not None and limit <= 0:
            return []
        return [_item(r) for r in self._records(limit)]

    def _add_items(self, items: List[Any]) -> None:
        if not items:
            return
        start = self.memory.get_all(**self._scope(), page_size=1).total
        turns = [_turn(dict(item), start + i) for i, item in enumerate(items)]
        self.memory.add(turns, user_id=self.user_id, agent_id=self.agent_id, run_id=self.session_id,
                        session=self.session_id)

    def _pop_item(self) -> Optional[Dict[str, Any]]:
        last = self._records(1)
        if not last:
            return None
        self.memory.delete(last[0].id)
        return _item(last[0])

    def _clear(self) -> None:
        try:
            self.memory.delete_all(**self._scope())
        except NotFoundError:
            pass

    async def get_items(self, limit: Optional[int] = None) -> List[Any]:
        return await asyncio.to_thread(self._get_items, limit)

    async def add_items(self, items: List[Any]) -> None:
        await asyncio.to_thread(self._add_items, list(items))

    async def pop_item(self) -> Optional[Any]:
        return await asyncio.to_thread(self._pop_item)

    async def clear_session(self) -> None:
        await asyncio.to_thread(self._clear)


def instructions_with_memory(
    instructions: str,
    memory: Any,
    question: str,
    *,
    user_id: str,
    k: int = 8,
    budget: int = 1500,
) -> str:
    """``instructions`` followed by what aril recalls for ``question`` (at most ``k`` units and
    ``budget`` o200k tokens), dated, for an agent about to answer it:
    ``agent.clone(instructions=instructions_with_memory(...))``."""
    recalled = memory.search(question, user_id=user_id, k=k, budget=budget)
    if not len(recalled):
        return instructions
    lines = [f"- [{h.time:%Y-%m-%d}] {h.text}" if h.time else f"- {h.text}" for h in recalled]
    return (f"{instructions}\n\nWhat you remember about this user (dated, most relevant first; "
            "prefer the newest where they conflict):\n" + "\n".join(lines))


__all__ = ["ArilSession", "instructions_with_memory"]
