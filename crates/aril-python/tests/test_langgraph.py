"""aril.langgraph.ArilStore through LangGraph's own code path: a compiled graph whose nodes get
the store from the runtime, as agents and LangMem do."""

import operator
from typing import Annotated, List, TypedDict

import pytest
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import InvalidNamespaceError

import aril
from aril.langgraph import ArilStore


class State(TypedDict):
    user: str
    said: str
    recalled: Annotated[List[str], operator.add]


def remember(state: State):
    store = get_store()
    namespace = ("memories", state["user"])
    key = f"fact-{len(store.search(namespace, limit=100))}"
    store.put(namespace, key, {"content": state["said"], "kind": "fact"})
    return {}


def recall(state: State):
    hits = get_store().search(("memories", state["user"]), query="What is the name of my cat?", limit=2)
    return {"recalled": [h.value["content"] for h in hits]}


def graph(store):
    g = StateGraph(State)
    g.add_node("remember", remember)
    g.add_node("recall", recall)
    g.add_edge(START, "remember")
    g.add_edge("remember", "recall")
    g.add_edge("recall", END)
    return g.compile(store=store)


def test_a_graph_keeps_and_recalls_items_in_aril(memory):
    app = graph(ArilStore(memory))
    app.invoke({"user": "sam", "said": "I work night shifts at the hospital.", "recalled": []})
    out = app.invoke({"user": "sam", "said": "I have a grey cat called Miso.", "recalled": []})
    assert out["recalled"] and "Miso" in out["recalled"][0]
    app.invoke({"user": "kim", "said": "My dog Rex loves the beach.", "recalled": []})

    # The items are aril memories of the namespace's user, keyed by their key.
    records = memory.get_all(user_id="memories.sam")
    assert records.total == 2
    assert {r.text for r in records} == {"I work night shifts at the hospital.", "I have a grey cat called Miso."}
    assert memory.get(aril.memory_id("memories.sam", "fact-1", "langgraph")).text.endswith("Miso.")


def test_the_store_api_round_trips(memory):
    store = ArilStore(memory)
    ns = ("prefs", "sam")
    store.put(ns, "food", {"content": "Loves spicy ramen", "score": 3})
    store.put(ns, "drink", {"text": "Green tea, no sugar", "score": 5})
    item = store.get(ns, "food")
    assert item.value == {"content": "Loves spicy ramen", "score": 3} and item.key == "food"
    assert store.get(ns, "nothing") is None

    store.put(ns, "food", {"content": "Now prefers mild curry", "score": 4})
    assert store.get(ns, "food").value["content"] == "Now prefers mild curry"
    mid = aril.memory_id("prefs.sam", "food", "langgraph")
    assert [h.text for h in memory.history(mid)] == ["Loves spicy ramen", "Now prefers mild curry"]

    assert {i.key for i in store.search(ns, filter={"score": {"$gte": 4}})} == {"food", "drink"}
    assert [i.key for i in store.search(ns, filter={"score": 5})] == ["drink"]
    hits = store.search(("prefs",), query="what does sam drink?", limit=1)
    assert [h.key for h in hits] == ["drink"] and hits[0].score > 0
    # A filter with a query is recall's: the item that meets it, however it ranks.
    hits = store.search(ns, query="what does sam drink?", filter={"score": {"$lt": 5}})
    assert [h.key for h in hits] == ["food"]
    with pytest.raises(aril.InvalidInputError, match="unknown operator"):
        store.search(ns, filter={"score": {"$near": 4}})

    store.put(("prefs", "kim"), "food", {"content": "Vegan"})
    assert store.list_namespaces(prefix=("prefs",)) == [("prefs", "kim"), ("prefs", "sam")]
    assert store.list_namespaces(prefix=("prefs",), max_depth=1) == [("prefs",)]
    assert store.list_namespaces(suffix=("kim",)) == [("prefs", "kim")]

    store.delete(ns, "food")
    assert store.get(ns, "food") is None
    with pytest.raises(aril.NotFoundError):
        memory.get(mid)
    with pytest.raises(aril.InvalidInputError):
        store.put(ns, "hidden", {"content": "x"}, index=False)
    with pytest.raises(InvalidNamespaceError):
        store.put(("bad.label",), "k", {"content": "x"})


def test_the_async_api_and_ttl(memory):
    import asyncio

    store = ArilStore(memory)

    async def main():
        await store.aput(("notes", "sam"), "door", {"content": "Door code 4411"}, ttl=60)
        item = await store.aget(("notes", "sam"), "door")
        assert item.value["content"] == "Door code 4411"
        return memory.get(aril.memory_id("notes.sam", "door", "langgraph"))

    record = asyncio.run(main())
    assert record.text == "Door code 4411"
