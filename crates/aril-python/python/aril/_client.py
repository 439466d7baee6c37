"""``aril.Client``: ``aril.Memory``'s methods against a running ``aril serve`` (its native routes
and its Mem0-compatible ones), with the standard library's HTTP client. The same typed results
and the same exceptions as in process."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, List, Mapping, Optional, Tuple

from . import _native
from ._api import Api, Raw, Scope

#: The exception for each of aril serve's error codes (others: ``ArilError``).
_ERRORS = {
    "invalid_input": _native.InvalidInputError,
    "not_found": _native.NotFoundError,
    "immutable_memory": _native.ImmutableError,
}


class Client(Api):
    """An aril server at ``base_url`` (e.g. ``http://127.0.0.1:8420``), with an API key from
    ``aril keys create`` (``None`` for a server started with ``--no-auth``)."""

    def __init__(self, base_url: str, api_key: Optional[str] = None, *, timeout: float = 60.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout

    def _call(self, method: str, path: str, body: Any = None, query: Optional[Mapping[str, Any]] = None) -> Any:
        url = self.base_url + path
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
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
    def _memory(memory_id: str, tail: str = "") -> str:
        return f"/v1/memories/{urllib.parse.quote(memory_id, safe='')}/{tail}"

    # -- the transport: aril serve's routes ------------------------------------------------------

    def _add(self, turns: List[Raw], flush: bool) -> Raw:
        return self._call("POST", "/v1/turns", {"turns": turns, "flush": flush})

    def _search(self, request: Raw) -> Raw:
        return self._call("POST", "/v1/search", {k: v for k, v in request.items() if v is not None})

    def _get(self, memory_id: str) -> Raw:
        return self._call("GET", self._memory(memory_id))

    def _get_all(self, scope: Scope, offset: int, limit: int,
                 filters: Optional[Raw]) -> Tuple[List[Raw], int]:
        paging = {"page": offset // limit + 1, "page_size": limit}
        if filters is None:
            raw = self._call("GET", "/v1/memories/", query={**scope, **paging})
        else:
            body = {**{k: v for k, v in scope.items() if v is not None}, "filters": filters}
            raw = self._call("POST", "/v2/memories/", body, query=paging)
        return raw["results"], raw["count"]

    def _update(self, memory_id: str, edit: Raw) -> Raw:
        body: Raw = {"text": edit["text"], "timestamp": edit["at"]}
        if "metadata" in edit:
            body["metadata"] = edit["metadata"]
        if "expires_at" in edit:
            body["expiration_date"] = edit["expires_at"]
        body = {k: v for k, v in body.items() if v is not None or k == "expiration_date"}
        return self._call("PUT", self._memory(memory_id), body)

    def _delete(self, memory_id: str) -> Raw:
        return self._call("DELETE", self._memory(memory_id))

    def _forget(self, memory_id: str, at: Optional[str], restore: bool) -> Raw:
        if restore:
            return self._call("POST", self._memory(memory_id, "restore"))
        return self._call("POST", self._memory(memory_id, "forget"), {} if at is None else {"at": at})

    def _delete_all(self, scope: Scope) -> Raw:
        return self._call("DELETE", "/v1/scopes", query=scope)

    def _history(self, memory_id: str) -> List[Raw]:
        return self._call("GET", self._memory(memory_id, "history/"))

    def _segments(self, scope: Scope, offset: int, limit: int) -> Tuple[List[Raw], int]:
        raw = self._call("GET", "/v1/segments", query={**scope, "offset": offset, "limit": limit})
        return raw["segments"], raw["total"]

    def _profile(self, scope: Scope) -> Raw:
        return self._call("GET", "/v1/profile", query=scope)

    def _stats(self) -> Raw:
        return self._call("GET", "/v1/stats")

    def _users(self) -> List[str]:
        return [e["name"] for e in self._call("GET", "/v1/entities/")["results"] if e["type"] == "user"]
