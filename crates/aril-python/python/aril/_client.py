"""``aril.Client``: ``aril.Memory``'s methods against a running ``aril serve`` (its native routes
and its Mem0-compatible ones), with the standard library's HTTP client. The same typed results
and the same exceptions as in process."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from datetime import date, datetime
from typing import Any, Dict, List, Mapping, Optional, Union

from . import _native
from ._memory import KEEP, page_offset
from ._messages import Messages, expiry, rfc3339, to_turns
from ._types import Added, HistoryEntry, MemoryItem, Page, SearchResult, Segment

#: The exception for each of aril serve's error codes (others: ``ArilError``).
_ERRORS = {
    "invalid_input": _native.InvalidInputError,
    "not_found": _native.NotFoundError,
    "immutable_memory": _native.ImmutableError,
}


class Client:
    """An aril server at ``base_url`` (e.g. ``http://127.0.0.1:8420``), with an API key from
    ``aril keys create`` (``None`` for a server started with ``--no-auth``)."""

    def __init__(self, base_url: str, api_key: Optional[str] = None, *, timeout: float = 60.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout

    def _call(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: Optional[Mapping[str, Any]] = None,
    ) -> Any:
        url = self.base_url + path
        if query:
            params = {k: v for k, v in query.items() if v is not None}
            url += "?" + urllib.parse.urlencode(params)
        request = urllib.request.Request(url, method=method)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            request.add_header("Content-Type", "application/json")
        if self.api_key:
            request.add_header("Authorization", f"Token {self.api_key}")
        try:
            with urllib.request.urlopen(request, data, timeout=self.timeout) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                error = json.loads(raw)["error"]
                code, message = error["code"], error["message"]
            except (ValueError, KeyError, TypeError):
                code, message = "", raw.decode(errors="replace")
            raise _ERRORS.get(code, _native.ArilError)(f"{method} {path}: {e.code}: {message}") from None
        except urllib.error.URLError as e:
            raise _native.ArilError(f"cannot reach aril at {self.base_url}: {e.reason}") from None

    @staticmethod
    def _id(memory_id: str) -> str:
        return urllib.parse.quote(memory_id, safe="")

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
        """As ``Memory.add``."""
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
        return Added._from(self._call("POST", "/v1/turns", {"turns": turns, "flush": flush}))

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
        """As ``Memory.search``."""
        body = {
            "query": query,
            "user_id": user_id,
            "agent_id": agent_id,
            "run_id": run_id,
            "k": k,
            "budget": budget,
            "asked_at": rfc3339(at, "at"),
            "sessions": sessions,
        }
        body = {key: v for key, v in body.items() if v is not None}
        return SearchResult._from(self._call("POST", "/v1/search", body))

    def get(self, memory_id: str) -> MemoryItem:
        """As ``Memory.get``."""
        return MemoryItem._from(self._call("GET", f"/v1/memories/{self._id(memory_id)}/"))

    def get_all(
        self,
        *,
        user_id: str,
        agent_id: Optional[str] = None,
        run_id: Optional[str] = None,
        page: int = 1,
        page_size: int = 100,
    ) -> Page[MemoryItem]:
        """As ``Memory.get_all``."""
        offset = page_offset(page, page_size)
        query = {"user_id": user_id, "agent_id": agent_id, "run_id": run_id, "page": page, "page_size": page_size}
        raw = self._call("GET", "/v1/memories/", query=query)
        return Page([MemoryItem._from(m) for m in raw["results"]], raw["count"], offset)

    def update(
        self,
        memory_id: str,
        text: Optional[str] = None,
        *,
        metadata: Optional[Mapping[str, Any]] = None,
        expires_at: Any = KEEP,
        at: Union[str, datetime, None] = None,
    ) -> MemoryItem:
        """As ``Memory.update``."""
        body: Dict[str, Any] = {}
        if text is not None:
            body["text"] = text
        if metadata is not None:
            body["metadata"] = dict(metadata)
        if expires_at is not KEEP:
            body["expiration_date"] = None if expires_at is None else expiry(expires_at)
        if at is not None:
            body["timestamp"] = rfc3339(at, "at")
        return MemoryItem._from(self._call("PUT", f"/v1/memories/{self._id(memory_id)}/", body))

    def delete(self, memory_id: str) -> Dict[str, Any]:
        """As ``Memory.delete`` (the server answers with a message)."""
        return self._call("DELETE", f"/v1/memories/{self._id(memory_id)}/")

    def delete_all(
        self, *, user_id: str, agent_id: Optional[str] = None, run_id: Optional[str] = None
    ) -> Dict[str, Any]:
        """As ``Memory.delete_all``."""
        query = {"user_id": user_id, "agent_id": agent_id, "run_id": run_id}
        return self._call("DELETE", "/v1/scopes", query=query)

    def history(self, memory_id: str) -> List[HistoryEntry]:
        """As ``Memory.history``."""
        raw = self._call("GET", f"/v1/memories/{self._id(memory_id)}/history/")
        return [HistoryEntry._from(e) for e in raw]

    def segments(
        self,
        *,
        user_id: str,
        agent_id: Optional[str] = None,
        run_id: Optional[str] = None,
        offset: int = 0,
        limit: int = 100,
    ) -> Page[Segment]:
        """As ``Memory.segments``."""
        query = {"user_id": user_id, "agent_id": agent_id, "run_id": run_id, "offset": offset, "limit": limit}
        raw = self._call("GET", "/v1/segments", query=query)
        return Page([Segment._from(s) for s in raw["segments"]], raw["total"], offset)

    def profile(
        self, *, user_id: str, agent_id: Optional[str] = None, run_id: Optional[str] = None
    ) -> Dict[str, Any]:
        """As ``Memory.profile``."""
        return self._call("GET", "/v1/profile", query={"user_id": user_id, "agent_id": agent_id, "run_id": run_id})

    def stats(self) -> Dict[str, Any]:
        """As ``Memory.stats`` (an admin key: the counts span every user)."""
        return self._call("GET", "/v1/stats")

    def users(self) -> List[str]:
        """The users this key can see (every user for an admin key)."""
        return [e["name"] for e in self._call("GET", "/v1/entities/")["results"] if e["type"] == "user"]
