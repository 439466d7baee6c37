"""aril.Memory: the engine in process, through the built wheel and the real embedding model."""

import datetime as dt
import sys
import threading

import pytest

import aril

UTC = dt.timezone.utc
FACTS = [
    {"role": "user", "content": "I started a new job at Fintech Co as a data engineer in May."},
    {"role": "assistant", "content": "Congratulations on the new role!"},
    {"role": "user", "content": "My sister Ana lives in Porto and teaches piano."},
]


def test_added_messages_are_recalled_with_typed_hits(memory):
    added = memory.add(FACTS, user_id="sam", session="s1", at="2024-05-03T10:00:00Z")
    assert len(added.ids) == 3 and added.already_stored == [False] * 3
    again = memory.add(FACTS, user_id="sam", session="s1", at="2024-05-03T10:00:00Z")
    assert again.ids == added.ids and again.already_stored == [True] * 3

    result = memory.search("Where does my sister live?", user_id="sam", k=2)
    assert isinstance(result, aril.SearchResult) and 1 <= len(result) <= 2
    best = result[0]
    assert isinstance(best, aril.Hit) and "Porto" in best.text
    assert best.kind in ("turn", "segment", "window", "card") and best.score > 0
    assert best.time == dt.datetime(2024, 5, 3, 10, tzinfo=UTC)
    assert best.source.session == "s1" and best.source_turns
    assert "Porto" in result.context and result.context_tokens >= best.tokens


def test_a_string_is_a_user_turn_and_metadata_is_kept(memory):
    added = memory.add("I am allergic to peanuts.", user_id="kim", metadata={"source": "chat", "n": [1, 2]})
    item = memory.get(added.ids[0])
    assert isinstance(item, aril.MemoryItem)
    assert item.text == "I am allergic to peanuts." and item.role == "user" and item.user_id == "kim"
    assert item.metadata == {"source": "chat", "n": [1, 2]}
    hit = memory.search("food allergies", user_id="kim", k=1)[0]
    assert hit.metadata == {"source": "chat", "n": [1, 2]}


def test_scopes_do_not_leak(memory):
    memory.add("My password hint is the name of my first cat, Miso.", user_id="sam")
    memory.add("I like hiking.", user_id="kim")
    assert all("Miso" not in h.text for h in memory.search("first cat name", user_id="kim"))
    assert sorted(memory.users()) == ["kim", "sam"]


def test_bad_input_is_refused_and_stores_nothing(memory):
    for bad, what in [
        (["fine", {"role": "user", "content": "  "}], "empty text"),
        ([{"role": "robot", "content": "hi"}], "role"),
        ([{"role": "user", "content": "hi", "tool_calls": []}], "unknown key"),
        ("hi", "naive datetime"),
    ]:
        at = dt.datetime(2024, 1, 1) if what == "naive datetime" else None
        with pytest.raises(aril.InvalidInputError):
            memory.add(bad, user_id="sam", at=at)
    with pytest.raises(aril.InvalidInputError):
        memory.add("hi", user_id="")
    assert memory.get_all(user_id="sam").total == 0
    with pytest.raises(aril.InvalidInputError):
        memory.search("   ", user_id="sam")
    with pytest.raises(aril.InvalidInputError):
        memory.search("anything", user_id="sam", k=0)


def test_update_history_and_delete(memory):
    first = memory.add("I live in Berlin.", user_id="sam", at="2024-01-01T00:00:00Z").ids[0]
    updated = memory.update(first, "I live in Lisbon now.", metadata={"moved": True})
    assert updated.id == first and updated.text == "I live in Lisbon now."
    assert memory.get(first).metadata == {"moved": True}
    history = memory.history(first)
    assert [(h.version, h.event, h.old_text, h.text) for h in history] == [
        (1, "ADD", None, "I live in Berlin."),
        (2, "UPDATE", "I live in Berlin.", "I live in Lisbon now."),
    ]
    page = memory.get_all(user_id="sam")
    assert page.total == 1 and [m.text for m in page] == ["I live in Lisbon now."]
    assert all("Berlin" not in h.text for h in memory.search("Where do I live?", user_id="sam"))

    memory.delete(first)
    with pytest.raises(aril.NotFoundError):
        memory.get(first)
    with pytest.raises(aril.NotFoundError):
        memory.delete(first)
    assert memory.get_all(user_id="sam").total == 0


def test_immutable_memories_refuse_updates(memory):
    mid = memory.add("My blood type is O negative.", user_id="sam", immutable=True).ids[0]
    with pytest.raises(aril.ImmutableError):
        memory.update(mid, "My blood type is A.")
    assert memory.get(mid).text == "My blood type is O negative."


def test_expired_memories_are_never_listed_or_recalled(memory):
    memory.add("The door code is 4411 this week.", user_id="sam", expires_at=dt.date(2020, 1, 1))
    memory.add("I enjoy sailing.", user_id="sam")
    assert [m.text for m in memory.get_all(user_id="sam")] == ["I enjoy sailing."]
    assert all("4411" not in h.text for h in memory.search("door code", user_id="sam"))


def test_pages_segments_and_stats(memory):
    for day in range(1, 6):
        memory.add(f"Day {day}: I trained for the marathon, {day * 5} km.", user_id="sam",
                   session=f"d{day}", at=f"2024-03-0{day}T08:00:00Z")
    memory.add("Done for today.", user_id="sam", session="d6", at="2024-03-06T08:00:00Z", flush=True)
    first, second = memory.get_all(user_id="sam", page_size=4), memory.get_all(user_id="sam", page=2, page_size=4)
    assert (first.total, len(first), len(second)) == (6, 4, 2)
    assert {m.id for m in first}.isdisjoint(m.id for m in second)
    segments = memory.segments(user_id="sam", limit=2)
    assert segments.total >= 5 and len(segments) == 2
    assert all(isinstance(s, aril.Segment) and s.turns and s.reason for s in segments)
    stats = memory.stats()
    assert stats["turns"] == 6 and stats["segments"] == segments.total
    with pytest.raises(aril.InvalidInputError):
        memory.get_all(user_id="sam", page=0)
    assert memory.profile(user_id="sam") == {"preferences": [], "traits": []}


def test_delete_all_empties_the_scope(memory):
    memory.add("I have two cats.", user_id="sam")
    report = memory.delete_all(user_id="sam")
    assert report["turns"] == 1
    assert memory.get_all(user_id="sam").total == 0
    with pytest.raises(aril.NotFoundError):
        memory.delete_all(user_id="sam")


def test_one_process_owns_a_directory_and_a_closed_memory_says_so(tmp_path):
    path = tmp_path / "owned"
    first = aril.Memory(path)
    first.add("I collect stamps.", user_id="sam")
    with pytest.raises(aril.BusyError):
        aril.Memory(path)
    first.close()
    with pytest.raises(aril.ArilError, match="closed"):
        first.stats()
    with aril.Memory(path) as again:
        assert [m.text for m in again.get_all(user_id="sam")] == ["I collect stamps."]


def test_a_search_releases_the_interpreter(memory):
    """While one thread is inside a search, another Python thread runs: with switching between
    threads effectively off, the main thread can only get the interpreter back before the search
    ends if the engine released it."""
    memory.add("The boiler was serviced in March.", user_id="sam")
    memory.search("warm-up", user_id="sam")
    started, done = threading.Event(), threading.Event()

    def search():
        started.set()
        memory.search("When was the boiler serviced?", user_id="sam")
        done.set()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1000)
    try:
        worker = threading.Thread(target=search)
        worker.start()
        started.wait()
        ran_during_search = not done.is_set()
        worker.join()
    finally:
        sys.setswitchinterval(interval)
    assert ran_during_search


def test_filters_keep_what_meets_them_in_search_and_get_all(memory):
    said = [("I love Thai green curry.", {"topic": "food", "stars": 5}),
            ("Sushi on Fridays is our ritual.", {"topic": "food", "stars": 3}),
            ("We hiked the Lousa mountains.", {"topic": "travel", "stars": 4})]
    for text, metadata in said:
        memory.add(text, user_id="sam", metadata=metadata)
    food = memory.search("What do I like to eat?", user_id="sam", k=5, filters={"topic": "food"})
    assert sorted(h.text for h in food) == ["User: I love Thai green curry.", "User: Sushi on Fridays is our ritual."]
    starred = memory.get_all(user_id="sam", filters={"OR": [{"topic": "travel"}, {"stars": {"gte": 5}}]})
    assert starred.total == 2
    assert sorted(m.text for m in starred) == ["I love Thai green curry.", "We hiked the Lousa mountains."]
    with pytest.raises(aril.InvalidInputError, match="unknown filter operator"):
        memory.search("food", user_id="sam", filters={"stars": {"between": [1, 5]}})
    with pytest.raises(aril.InvalidInputError, match="apart from the filters"):
        memory.get_all(user_id="sam", filters={"user_id": "kim"})
    assert len(memory.search("What do I like to eat?", user_id="sam", threshold=0.99)) == 0
    with pytest.raises(aril.InvalidInputError, match="threshold"):
        memory.search("food", user_id="sam", threshold=1.5)
