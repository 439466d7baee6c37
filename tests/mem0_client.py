"""Drives `aril serve` with the official mem0ai client (and plain HTTP for the routes of Mem0's
open-source server), to prove Mem0 code moves over by changing its base URL.

    python tests/mem0_client.py PATH_TO_ARIL_BINARY

Starts its own server on a free loopback port with a fresh data directory, stops it at the end.
Exits non-zero on the first failed check and ends with the line 'N passed, 0 failed'.
"""

import json
import tempfile

import httpx
from mem0 import MemoryClient

from checks import aril, check, done, start_server


def raises(fn):
    try:
        fn()
    except Exception as e:  # the client turns HTTP errors into its own exception classes
        return e
    return None


def not_found(fn):
    """True when `fn` fails with the client's 404 exception."""
    return type(raises(fn)).__name__ == "MemoryNotFoundError"


def main():
    data = tempfile.mkdtemp(prefix="aril-mem0-")
    alice_key = aril(data, "keys", "create", "--user", "alice")
    admin_key = aril(data, "keys", "create", "--admin")
    bob_key = aril(data, "keys", "create", "--user", "bob")
    server, base = start_server(data)
    try:
        client = MemoryClient(api_key=alice_key, host=base)
        check("client init pings /v1/ping/", client.user_email is None)

        added = client.add(
            [
                {"role": "user", "content": "I'm vegetarian and allergic to peanuts."},
                {"role": "assistant", "content": "Noted, no peanuts and no meat."},
            ],
            user_id="alice",
        )
        ids = [r["id"] for r in added["results"]]
        check("add returns the kept turns", len(ids) == 2 and added["results"][0]["event"] == "ADD", added)
        tags = {"source": "email", "tags": ["travel", 1], "nested": {"ok": True}}
        porto = client.add("I moved to Porto last spring.", user_id="alice", metadata=tags)
        porto_id = porto["results"][0]["id"]
        check("add keeps the metadata", client.get(porto_id)["metadata"] == tags, client.get(porto_id))
        moved = client.search("where did she move?", filters={"user_id": "alice"}, top_k=5)["results"]
        check("search returns the metadata", [r["metadata"] for r in moved if r["id"] == porto_id] == [tags], moved)
        by_source = {"AND": [{"user_id": "alice"}, {"source": "email"}]}
        tagged = client.search("where did she move?", filters=by_source, top_k=5)["results"]
        check("search filters on metadata", [r["id"] for r in tagged] == [porto_id], tagged)
        listed = client.get_all(filters={"AND": [{"user_id": "alice"}, {"tags": {"contains": "travel"}}]})
        check("get_all filters on metadata", [m["id"] for m in listed["results"]] == [porto_id], listed)
        far = client.search("where did she move?", filters={"user_id": "alice"}, threshold=0.99)["results"]
        check("a threshold near 1 keeps nothing", far == [], far)
        err = raises(lambda: client.search("x", filters={"AND": [{"user_id": "alice"}, {"source": {"like": "e%"}}]}))
        check("an unknown filter operator is refused", err is not None and "unknown filter operator" in str(err), err)
        err = raises(lambda: client.add("Not kept.", user_id="alice", metadata={"aril": 1}))
        check("the reserved metadata key is refused", err is not None and "reserved" in str(err), err)
        err = raises(lambda: client.add("Not kept either.", user_id="alice", custom_instructions="Be terse."))
        check("encoder guidance without an encoder is refused", err is not None and "no encoder" in str(err), err)
        again = client.add("I moved to Porto last spring.", user_id="alice", timestamp=1700000000)
        check("add with a timestamp", again["results"][0]["event"] == "ADD", again)

        found = client.search("what food can't she eat?", filters={"user_id": "alice"}, top_k=3)
        texts = [r["memory"] for r in found["results"]]
        check("search finds the allergy", any("peanuts" in t for t in texts), texts)
        check("search scores results", all("score" in r for r in found["results"]), found)

        page = client.get_all(filters={"user_id": "alice"})
        check("get_all pages the memories", page["count"] == 4 and len(page["results"]) == 4, page)
        small = client.get_all(filters={"user_id": "alice"}, page=1, page_size=2)
        check("get_all honours page_size", len(small["results"]) == 2 and small["next"], small)

        one = client.get(ids[0])
        check("get returns one memory", one["memory"].startswith("I'm vegetarian"), one)

        err = raises(lambda: client.search("x", filters={"user_id": "bob"}))
        check("another user's scope is refused", err is not None and ("403" in str(err) or "another user" in str(err)), err)

        # One memory: update (a new version, same id), history, delete.
        updated = client.update(ids[0], text="I'm vegan now, and still allergic to peanuts.")
        check("update keeps the memory id", updated["id"] == ids[0] and updated["memory"].startswith("I'm vegan"), updated)
        check("get returns the newest version", client.get(ids[0])["memory"].startswith("I'm vegan"))
        hist = client.history(ids[0])
        check("history shows both versions", [h["event"] for h in hist] == ["ADD", "UPDATE"]
              and hist[1]["old_memory"].startswith("I'm vegetarian") and hist[1]["new_memory"].startswith("I'm vegan"), hist)
        check("an update closes the old version's validity where the new one begins",
              hist[0].get("valid_to") == hist[1]["valid_from"] and "valid_to" not in hist[1], hist)
        found = client.search("is she vegan or vegetarian?", filters={"user_id": "alice"}, top_k=5)
        check("search shows the newest version under the memory id",
              any(r["id"] == ids[0] and r["memory"].startswith("I'm vegan") for r in found["results"])
              and not any(r["memory"].startswith("I'm vegetarian") for r in found["results"]), found)
        check("get_all counts the memory once", client.get_all(filters={"user_id": "alice"})["count"] == 4)
        meta = client.update(ids[0], metadata={"diet": "vegan"})
        check("update replaces the metadata alone", meta["metadata"] == {"diet": "vegan"}
              and meta["memory"].startswith("I'm vegan"), meta)
        check("history keeps each version's metadata", [h["metadata"] for h in client.history(ids[0])]
              == [None, None, {"diet": "vegan"}], client.history(ids[0]))
        check("an unknown memory is missing", not_found(lambda: client.update("t_nope", text="x")))
        client.delete(ids[1])
        check("delete removes one memory", client.get_all(filters={"user_id": "alice"})["count"] == 3)
        check("a deleted memory is gone", not_found(lambda: client.get(ids[1])))
        check("its history is gone too", not_found(lambda: client.history(ids[1])))

        # Expiry and immutability (bob's memory, so alice's counts stay as they are).
        bob = MemoryClient(api_key=bob_key, host=base)
        bob.add("My gate code was 1234.", user_id="bob", expiration_date="2020-01-01")
        fixed = bob.add("My blood type is O negative.", user_id="bob", immutable=True)["results"][0]["id"]
        check("an expired memory is not listed", [m["memory"] for m in bob.get_all(filters={"user_id": "bob"})["results"]]
              == ["My blood type is O negative."], bob.get_all(filters={"user_id": "bob"}))
        check("an expired memory is not recalled",
              "1234" not in str(bob.search("what is the gate code?", filters={"user_id": "bob"})))
        err = raises(lambda: bob.update(fixed, text="My blood type is A."))
        check("an immutable memory refuses an update", err is not None and "immutable" in str(err), err)

        # Every filter operator, on metadata and on created_at, in search and get_all alike.
        for text, metadata, day in [
            ("I love Thai green curry.", {"topic": "food", "stars": 5, "tags": ["spicy", "thai"]}, 1_704_067_200),
            ("Sushi on Fridays is our ritual.", {"topic": "food", "stars": 3, "tags": ["fish"]}, 1_714_521_600),
            ("We hiked the Lousa mountains.", {"topic": "Travel", "stars": 4}, 1_714_521_600),
            ("My curry recipe uses lemongrass.", {"topic": "cooking"}, 1_717_200_000),
        ]:
            bob.add(text, user_id="bob", metadata=metadata, timestamp=day)
        label = {"I love Thai green curry.": "curry, Thai", "Sushi on Fridays is our ritual.": "sushi",
                 "We hiked the Lousa mountains.": "hike", "My curry recipe uses lemongrass.": "recipe",
                 "My blood type is O negative.": "blood"}
        def named(memories):
            return sorted(label.get(m["memory"], m["memory"]) for m in memories)
        for condition, expected in [
            ({"topic": "food"}, ["curry, Thai", "sushi"]),
            ({"topic": {"eq": "food"}}, ["curry, Thai", "sushi"]),
            ({"topic": {"ne": "food"}}, ["blood", "hike", "recipe"]),
            ({"stars": {"in": [3, 4]}}, ["hike", "sushi"]),
            ({"topic": {"nin": ["food", "cooking"]}}, ["blood", "hike"]),
            ({"stars": {"gt": 3}}, ["curry, Thai", "hike"]),
            ({"stars": {"gte": 3}}, ["curry, Thai", "hike", "sushi"]),
            ({"stars": {"lt": 4}}, ["sushi"]),
            ({"stars": {"lte": 4}}, ["hike", "sushi"]),
            ({"tags": {"contains": "thai"}}, ["curry, Thai"]),
            ({"topic": {"icontains": "TRAV"}}, ["hike"]),
            ({"created_at": {"gte": "2024-05-01"}}, ["blood", "hike", "recipe", "sushi"]),
            ({"created_at": {"lt": "2024-05-01T00:00:00Z"}}, ["curry, Thai"]),
            ({"OR": [{"topic": "cooking"}, {"stars": {"gte": 5}}]}, ["curry, Thai", "recipe"]),
            ({"NOT": {"topic": "food"}}, ["blood", "hike", "recipe"]),
        ]:
            scoped = {"AND": [{"user_id": "bob"}, condition]}
            listed = bob.get_all(filters=scoped)
            found = bob.search("what do I like?", filters=scoped, top_k=10)["results"]
            check(f"filter {json.dumps(condition)}", named(listed["results"]) == expected
                  and listed["count"] == len(expected) and named(found) == expected,
                  (named(listed["results"]), named(found)))
        bob.delete_all(user_id="bob")

        users = client.users()
        check("users lists alice only", [e["name"] for e in users["results"]] == ["alice"], users)

        admin = MemoryClient(api_key=admin_key, host=base)
        check("scope-less delete_all is refused", raises(lambda: admin.delete_all()) is not None)
        check("nothing was deleted by it", client.get_all(filters={"user_id": "alice"})["count"] == 3)
        client.delete_all(user_id="alice")
        check("delete_all(user_id) empties the scope", client.get_all(filters={"user_id": "alice"})["count"] == 0)

        # Mem0's open-source REST server routes, with a plain HTTP client.
        h = {"Authorization": f"Token {alice_key}"}
        r = httpx.post(f"{base}/memories", headers=h, json={"messages": [{"role": "user", "content": "My sister lives in Lyon."}], "user_id": "alice"})
        check("OSS POST /memories", r.status_code == 200 and r.json()["results"][0]["event"] == "ADD", r.text)
        r = httpx.get(f"{base}/memories", headers=h, params={"user_id": "alice"})
        check("OSS GET /memories", r.status_code == 200 and r.json()["count"] == 1, r.text)
        r = httpx.post(f"{base}/search", headers=h, json={"query": "where does her sister live", "user_id": "alice"})
        check("OSS POST /search", r.status_code == 200 and "Lyon" in r.json()["results"][0]["memory"], r.text)
        mid = r.json()["results"][0]["id"]
        r = httpx.get(f"{base}/memories/{mid}", headers=h)
        check("OSS GET /memories/{id}", r.status_code == 200 and r.json()["id"] == mid, r.text)
        r = httpx.put(f"{base}/memories/{mid}", headers=h, json={"text": "My sister lives in Lille now."})
        check("OSS PUT /memories/{id}", r.status_code == 200 and r.json()["memory"].endswith("Lille now."), r.text)
        r = httpx.get(f"{base}/memories/{mid}/history", headers=h)
        check("OSS GET /memories/{id}/history", r.status_code == 200 and len(r.json()) == 2, r.text)
        r = httpx.put(f"{base}/memories/{mid}", headers=h, json={"text": "x", "colour": "red"})
        check("an unknown update field is a 400", r.status_code == 400 and "colour" in r.json()["error"]["message"], r.text)
        r = httpx.delete(f"{base}/memories/{mid}", headers={"Authorization": f"Token {bob_key}"})
        check("another user's memory cannot be deleted (404, no leak)", r.status_code == 404, r.text)
        r = httpx.delete(f"{base}/memories/{mid}", headers=h)
        check("OSS DELETE /memories/{id}", r.status_code == 200, r.text)
        r = httpx.post(f"{base}/memories", headers=h, json={"messages": [{"role": "user", "content": "My sister lives in Lyon."}], "user_id": "alice"})
        r = httpx.delete(f"{base}/memories", headers=h, params={"user_id": "alice"})
        check("OSS DELETE /memories?user_id", r.status_code == 200, r.text)
        r = httpx.post(f"{base}/reset", headers={"Authorization": f"Token {admin_key}"}, json={"confirm": "delete all memories"})
        check("OSS POST /reset with admin key and confirmation", r.status_code == 200, r.text)

        client.add("Temporary note.", user_id="alice")
        client.reset()
        check("client.reset deletes the caller's users", client.get_all(filters={"user_id": "alice"})["count"] == 0)
    finally:
        server.terminate()
        server.wait(timeout=30)
    check("server stops cleanly on SIGTERM", server.returncode == 0, server.returncode)
    done()


if __name__ == "__main__":
    main()
