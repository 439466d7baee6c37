"""Forgetting without deleting, from Python: in process (``aril.Memory``) and over ``aril serve``
(``aril.Client``) alike. A memory forgotten from a date is not found when asked after it, is
found when asked before, stays listed with its end, and keeps its interval in history."""

import uuid
from datetime import date, datetime, timezone

import pytest

import aril


@pytest.fixture(params=["memory", "client"])
def front(request, tmp_path):
    """Each front of aril, with a user of its own."""
    user = f"u{uuid.uuid4().hex[:8]}"
    if request.param == "memory":
        with aril.Memory(tmp_path / "memory") as m:
            yield m, user
    else:
        base, keys = request.getfixturevalue("server")
        yield aril.Client(base, keys["admin"]), user


def test_a_forgotten_memory_is_found_only_when_asked_before_its_end(front):
    mem, user = front
    added = mem.add("I live in Porto, by the river.", user_id=user, at="2024-01-01T09:00:00Z")
    mid = added.ids[0]
    mem.add("My dog is called Pimenta.", user_id=user, at="2024-01-01T09:05:00Z")

    item = mem.forget(mid, at=date(2024, 6, 1))
    end = datetime(2024, 6, 1, tzinfo=timezone.utc)
    assert item.id == mid and item.valid_to == end
    assert all("Porto" not in h.text for h in mem.search("Where do I live?", user_id=user))
    before = mem.search("Where do I live?", user_id=user, at="2024-05-01T00:00:00Z")
    assert "Porto" in before[0].text
    # A date is asked at that day's end (UTC): the day before the end still finds it, the
    # day it ends does not.
    for day in ("2024-05-31", date(2024, 5, 31)):
        assert "Porto" in mem.search("Where do I live?", user_id=user, at=day)[0].text, day
    for day in ("2024-06-01", date(2024, 6, 1)):
        hits = mem.search("Where do I live?", user_id=user, at=day)
        assert all("Porto" not in h.text for h in hits), day
    listed = {m.id: m for m in mem.get_all(user_id=user)}
    assert listed[mid].valid_to == end
    history = mem.history(mid)
    assert [(h.event, h.valid_to) for h in history] == [("ADD", None), ("FORGET", end)]
    assert history[1].valid_from == datetime(2024, 1, 1, 9, tzinfo=timezone.utc)

    assert mem.restore(mid).valid_to is None
    assert "Porto" in mem.search("Where do I live?", user_id=user)[0].text
    with pytest.raises(aril.InvalidInputError, match="nothing to restore"):
        mem.restore(mid)
    with pytest.raises(aril.InvalidInputError, match="timezone"):
        mem.forget(mid, at=datetime(2024, 6, 1))
    with pytest.raises(aril.InvalidInputError, match="RFC 3339 string, a datetime or a date, not int"):
        mem.search("Where do I live?", user_id=user, at=20240601)  # type: ignore[arg-type]
    with pytest.raises(aril.NotFoundError):
        mem.forget("t_nothing")
    locked = mem.add("My passport number ends in 77.", user_id=user, immutable=True).ids[0]
    with pytest.raises(aril.ImmutableError):
        mem.forget(locked)
