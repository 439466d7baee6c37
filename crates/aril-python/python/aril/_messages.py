"""What ``add`` accepts (a string, one ``{role, content}`` message, or a list of them) turned
into aril's turn objects, checked here so a wrong shape fails before anything is stored."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from ._native import InvalidInputError

Message = Union[str, Mapping[str, Any]]
Messages = Union[str, Mapping[str, Any], Sequence[Message]]

#: The keys a message may carry (OpenAI's chat message, plus aril's own).
MESSAGE_KEYS = ("role", "content", "text", "name", "at", "session", "metadata", "source_id")
ROLES = ("user", "assistant", "system", "tool")


def rfc3339(value: Union[str, datetime, None], what: str) -> Optional[str]:
    """A time as aril takes it: an RFC 3339 string, or a timezone-aware datetime."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise InvalidInputError(
                f"{what}: a datetime without a timezone is ambiguous; give one with tzinfo "
                "(e.g. datetime.now(timezone.utc)) or an RFC 3339 string"
            )
        return value.isoformat()
    raise InvalidInputError(f"{what}: give an RFC 3339 string or a datetime, not {type(value).__name__}")


def day_or_time(value: Union[str, date, datetime, None], what: str) -> Optional[str]:
    """A time or a whole day as aril takes it: an RFC 3339 string, a timezone-aware datetime, or a
    date (its ISO day; which end of the day it means is the field's, read on the Rust side)."""
    if isinstance(value, date) and not isinstance(value, datetime):
        return value.isoformat()
    if value is None or isinstance(value, (str, datetime)):
        return rfc3339(value, what)
    raise InvalidInputError(
        f"{what}: give an RFC 3339 string, a datetime or a date, not {type(value).__name__}"
    )


def asked_at(value: Union[str, date, datetime, None]) -> Optional[str]:
    """When a question is asked: a time, or a date (its end, UTC, as ``aril ask --at`` reads it)."""
    return day_or_time(value, "at")


def expiry(value: Union[str, date, datetime, None]) -> Optional[str]:
    """An expiry: a time, or a date (the memory lasts through that day, UTC)."""
    return day_or_time(value, "expires_at")


def _content(message: Mapping[str, Any], i: int) -> str:
    content = message.get("content", message.get("text"))
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, Mapping) and part.get("type") in ("text", "input_text", "output_text"):
                texts.append(str(part.get("text", "")))
            else:
                raise InvalidInputError(
                    f"message {i}: only text parts can be remembered, got {part!r:.80}"
                )
        return "\n".join(texts)
    raise InvalidInputError(f"message {i}: give its text as 'content' (a string), got {content!r:.80}")


def to_turns(
    messages: Messages,
    *,
    user_id: str,
    agent_id: Optional[str],
    run_id: Optional[str],
    conversation: Optional[str],
    session: Optional[str],
    at: Union[str, datetime, None],
    metadata: Optional[Mapping[str, Any]],
    expires_at: Union[str, date, datetime, None],
    immutable: bool,
) -> List[Dict[str, Any]]:
    """aril's turn objects (the fields of ``POST /v1/turns``) for ``messages``."""
    if not isinstance(user_id, str) or not user_id.strip():
        raise InvalidInputError("user_id is required: every memory belongs to a user")
    if isinstance(messages, (str, Mapping)):
        messages = [messages]
    if not messages:
        raise InvalidInputError("no messages given")
    default_at = rfc3339(at, "at")
    expires = expiry(expires_at)
    turns = []
    for i, m in enumerate(messages):
        if isinstance(m, str):
            m = {"role": "user", "content": m}
        if not isinstance(m, Mapping):
            raise InvalidInputError(
                f"message {i}: give a string or a {{'role', 'content'}} dict, not {type(m).__name__}"
            )
        unknown = [k for k in m if k not in MESSAGE_KEYS]
        if unknown:
            raise InvalidInputError(
                f"message {i}: unknown key {unknown[0]!r}; a message takes {', '.join(MESSAGE_KEYS)}"
            )
        role = m.get("role", "user")
        if role not in ROLES:
            raise InvalidInputError(f"message {i}: role {role!r} is not one of {', '.join(ROLES)}")
        turn: Dict[str, Any] = {
            "user_id": user_id,
            "role": role,
            "text": _content(m, i),
        }
        for key, value in (
            ("agent_id", agent_id),
            ("run_id", run_id),
            ("conversation", conversation),
            ("session", m.get("session", session)),
            ("speaker", m.get("name")),
            ("source_id", m.get("source_id")),
            ("at", rfc3339(m["at"], f"message {i}: at") if "at" in m else default_at),
            ("metadata", m.get("metadata", metadata)),
            ("expires_at", expires),
        ):
            if value is not None:
                turn[key] = dict(value) if key == "metadata" else value
        if immutable:
            turn["immutable"] = True
        turns.append(turn)
    return turns
