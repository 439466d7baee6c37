"""aril as LangGraph's long-term memory: ``ArilStore`` is a ``langgraph.store.base.BaseStore``,
so ``graph.compile(store=ArilStore(memory))``, ``create_react_agent(..., store=...)`` and LangMem
keep their items in aril and search them with aril's recall.

How items map onto aril:

- a namespace is an aril user: its labels joined by ``.`` (LangGraph forbids ``.`` in labels),
  e.g. ``("memories", "sam")`` is the user ``memories.sam``;
- an item is a memory of that user in the conversation ``langgraph``, its key the message's source
  id, so its memory id is known from (namespace, key) alone (``aril.memory_id``). Its text is
  what ``index`` names (the value's fields, joined), else the value's ``content``, ``text`` or
  ``memory`` string, else the value as JSON; the value itself is kept whole in the memory's
  metadata (``{"langgraph": {"key", "value"}}``, at most 16 KiB) and returned as it was put;
- putting a key again writes the memory's next version (its history keeps the old ones);
  deleting removes every version from every file; ``ttl`` (minutes) is the memory's expiry;
- ``search(prefix, query=...)`` is aril's recall in each namespace under the prefix (hits that are
  whole items, best first); without a query, the items oldest first. ``filter`` matches value
  fields exactly or with ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``; it becomes an aril
  filter on the kept value, so recall reads deeper until ``limit`` items meet it.

``index=False`` (an item stored but never searched) has no aril equivalent and is refused.
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from ._native import InvalidInputError, NotFoundError, memory_id

#: The conversation items live in, inside their namespace's user.
CONVERSATION = "langgraph"
#: The metadata key an item's key and value are kept under.
METADATA_KEY = "langgraph"


def user_of(namespace: Tuple[str, ...]) -> str:
    """The aril user a namespace is."""
    return ".".join(namespace)


def namespace_of(user_id: str) -> Tuple[str, ...]:
    return tuple(user_id.split("."))


def _text(value: Dict[str, Any], index: Optional[Sequence[str]]) -> str:
    if index:
        parts = [value.get(field) for field in index]
        texts = [p if isinstance(p, str) else json.dumps(p, ensure_ascii=False) for p in parts if p is not None]
        if texts:
            return "\n".join(texts)
    for field in ("content", "text", "memory"):
        if isinstance(value.get(field), str) and value[field].strip():
            return value[field]
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


_OPERATORS = {"$eq": "eq", "$ne": "ne", "$gt": "gt", "$gte": "gte", "$lt": "lt", "$lte": "lte"}


def _aril_filters(filter: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """A LangGraph filter on value fields as an aril filter on the value kept in metadata."""
    if not filter:
        return None
    conditions = []
    for field, wanted in filter.items():
        path = f"{METADATA_KEY}.value.{field}"
        if isinstance(wanted, dict) and wanted and all(k.startswith("$") for k in wanted):
            unknown = [op for op in wanted if op not in _OPERATORS]
            if unknown:
                raise InvalidInputError(
                    f"filter on {field!r}: unknown operator {unknown[0]!r}; use one of {', '.join(_OPERATORS)}")
            conditions.append({path: {_OPERATORS[op]: operand for op, operand in wanted.items()}})
        else:
            conditions.append({path: {"eq": wanted}})
    return {"AND": conditions}


def _condition_holds(namespace: Tuple[str, ...], condition: MatchCondition) -> bool:
    path = tuple(condition.path)
    if len(path) > len(namespace):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[len(namespace) - len(path):]
    return all(p == "*" or p == n for p, n in zip(path, part))


class ArilStore(BaseStore):
    """A LangGraph store over an ``aril.Memory`` (or an ``aril.Client`` of ``aril serve``)."""

    supports_ttl = True

    def __init__(self, memory: Any) -> None:
        self.memory = memory

    # -- the operations ----------------------------------------------------------------------

    def _id(self, namespace: Tuple[str, ...], key: str) -> str:
        return memory_id(user_of(namespace), key, CONVERSATION)

    def _item(self, record: Any, namespace: Tuple[str, ...]) -> Optional[Item]:
        kept = (record.metadata or {}).get(METADATA_KEY)
        if not isinstance(kept, dict):
            return None
        return Item(value=kept["value"], key=kept["key"], namespace=namespace,
                    created_at=record.created_at, updated_at=record.updated_at)

    def _get(self, op: GetOp) -> Optional[Item]:
        namespace = tuple(op.namespace)
        try:
            return self._item(self.memory.get(self._id(namespace, op.key)), namespace)
        except NotFoundError:
            return None

    def _put(self, op: PutOp) -> None:
        namespace = tuple(op.namespace)
        mid = self._id(namespace, op.key)
        if op.value is None:
            try:
                self.memory.delete(mid)
            except NotFoundError:
                pass
            return
        if op.index is False:
            raise InvalidInputError(
                "index=False (stored but never searched) has no aril equivalent: every aril memory "
                "is searchable; leave index unset or name the fields to embed"
            )
        text = _text(op.value, op.index or None)
        metadata = {METADATA_KEY: {"key": op.key, "value": op.value}}
        expires = None
        if op.ttl is not None:
            expires = (datetime.now(timezone.utc) + timedelta(minutes=op.ttl)).isoformat()
        try:
            self.memory.get(mid)
        except NotFoundError:
            message = {"role": "user", "content": text, "source_id": op.key}
            self.memory.add(message, user_id=user_of(namespace), conversation=CONVERSATION,
                            metadata=metadata, expires_at=expires)
            return
        self.memory.update(mid, text, metadata=metadata, expires_at=expires)

    def _namespaces(self) -> List[Tuple[str, ...]]:
        return sorted(namespace_of(u) for u in self.memory.users())

    def _search(self, op: SearchOp) -> List[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        namespaces = [n for n in self._namespaces() if n[: len(prefix)] == prefix]
        found: List[SearchItem] = []
        for namespace in namespaces:
            user = user_of(namespace)
            filters = _aril_filters(op.filter)
            if op.query:
                hits = self.memory.search(op.query, user_id=user, k=min(1000, op.limit + op.offset),
                                          filters=filters)
                for hit in hits:
                    kept = (hit.metadata or {}).get(METADATA_KEY)
                    if hit.kind != "turn" or not isinstance(kept, dict):
                        continue
                    record = self.memory.get(self._id(namespace, kept["key"]))
                    found.append(SearchItem(namespace=namespace, key=kept["key"], value=kept["value"],
                                            created_at=record.created_at, updated_at=record.updated_at,
                                            score=hit.score))
            else:
                page_no = 1
                while True:
                    page = self.memory.get_all(user_id=user, page=page_no, page_size=1000, filters=filters)
                    for record in page:
                        item = self._item(record, namespace)
                        if item is not None:
                            found.append(SearchItem(namespace=namespace, key=item.key, value=item.value,
                                                    created_at=item.created_at, updated_at=item.updated_at))
                    if page_no * 1000 >= page.total:
                        break
                    page_no += 1
        if op.query:
            found.sort(key=lambda i: -(i.score or 0.0))
        return found[op.offset: op.offset + op.limit]

    def _list_namespaces(self, op: ListNamespacesOp) -> List[Tuple[str, ...]]:
        namespaces = [n for n in self._namespaces()
                      if all(_condition_holds(n, c) for c in op.match_conditions or ())]
        if op.max_depth is not None:
            namespaces = sorted({n[: op.max_depth] for n in namespaces})
        return namespaces[op.offset: op.offset + op.limit]

    # -- BaseStore ---------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> List[Result]:
        results: List[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, PutOp):
                results.append(self._put(op))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            else:
                raise InvalidInputError(f"unknown store operation {type(op).__name__}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> List[Result]:
        return await asyncio.to_thread(self.batch, list(ops))


__all__ = ["ArilStore", "CONVERSATION", "namespace_of", "user_of"]
