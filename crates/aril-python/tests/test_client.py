"""aril.Client against a real `aril serve`: the same methods and typed results as in process,
with the server's keys deciding who sees what."""

import pytest

import aril


def test_the_client_round_trips_a_memory(server):
    base, keys = server
    sam = aril.Client(base, keys["sam"])
    added = sam.add([{"role": "user", "content": "I am training for the Lisbon half marathon."},
                     {"role": "assistant", "content": "Good luck with the training!"}],
                    user_id="sam", session="run", at="2024-04-02T07:00:00Z", metadata={"via": "client"})
    assert len(added.ids) == 2 and added.already_stored == [False, False]
    hits = sam.search("Which race am I training for?", user_id="sam", k=3)
    assert isinstance(hits[0], aril.Hit) and "Lisbon" in hits[0].text
    assert hits[0].metadata == {"via": "client"}

    mid = added.ids[0]
    item = sam.get(mid)
    assert isinstance(item, aril.MemoryItem) and item.text.startswith("I am training")
    updated = sam.update(mid, "I am training for the Porto marathon instead.")
    assert updated.id == mid and "Porto" in sam.get(mid).text
    assert [h.event for h in sam.history(mid)] == ["ADD", "UPDATE"]
    page = sam.get_all(user_id="sam", page_size=1)
    assert page.total == 2 and len(page) == 1
    # Filters travel to the server's search and get_all.
    mine = sam.get_all(user_id="sam", filters={"via": "client"})
    assert mine.total == 2
    assert sam.get_all(user_id="sam", filters={"via": {"ne": "client"}}).total == 0
    assert "Porto" in sam.search("race", user_id="sam", k=1, filters={"via": "client"})[0].text
    segments = sam.segments(user_id="sam")
    assert segments.total == len(segments.items)
    assert sam.profile(user_id="sam") == {"preferences": [], "traits": []}
    assert sam.users() == ["sam"]

    sam.delete(mid)
    with pytest.raises(aril.NotFoundError):
        sam.get(mid)


def test_the_client_raises_the_same_errors(server):
    base, keys = server
    sam, kim = aril.Client(base, keys["sam"]), aril.Client(base, keys["kim"])
    secret = sam.add("My locker code is 3141.", user_id="sam").ids[0]
    with pytest.raises(aril.NotFoundError):
        kim.get(secret)
    with pytest.raises(aril.ArilError, match="403"):
        kim.search("locker code", user_id="sam")
    with pytest.raises(aril.InvalidInputError):
        sam.search("  ", user_id="sam")
    with pytest.raises(aril.InvalidInputError):
        sam.add("", user_id="sam")
    locked = sam.add("My passport number ends in 77.", user_id="sam", immutable=True).ids[0]
    with pytest.raises(aril.ImmutableError):
        sam.update(locked, "changed")
    with pytest.raises(aril.ArilError, match="admin"):
        sam.stats()
    assert aril.Client(base, keys["admin"]).stats()["turns"] >= 2
    with pytest.raises(aril.ArilError, match="cannot reach"):
        aril.Client("http://127.0.0.1:9", keys["sam"]).users()
