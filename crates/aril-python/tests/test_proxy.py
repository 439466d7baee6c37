"""`aril proxy` driven by the official `openai` client, in front of a real model (llama-server +
SmolLM2) behind a recording forwarder: the tests check what the upstream received and what aril
stored, never what the 135M model answers."""

import json
import urllib.request

import openai
import pytest
from openai import OpenAI

from conftest import Recorder, running_aril

FAIL_MARK = "UPSTREAM-FAIL"


def failing(body):
    """The recorder's hook: a message containing FAIL_MARK gets a 503 with an OpenAI-style error."""
    if FAIL_MARK in json.dumps(body):
        return 503, {"error": {"message": "overloaded (recorded)", "type": "server_error"}}
    return None


@pytest.fixture(scope="module")
def upstream(llm):
    recorder = Recorder(llm["base_url"], failing)
    yield recorder
    recorder.server.shutdown()


@pytest.fixture(scope="module")
def proxy(aril_bin, upstream, tmp_path_factory):
    """`aril proxy` in front of the recorder; yields (base URL, keys by name)."""
    command = ["proxy", "--upstream", upstream.url, "--no-consolidate"]
    with running_aril(aril_bin, str(tmp_path_factory.mktemp("proxied")), command, ["ana", "ben"]) as served:
        yield served


def client(proxy, who):
    base, keys = proxy
    return OpenAI(base_url=f"{base}/v1", api_key=keys[who], max_retries=0)


def turns(proxy, who):
    base, keys = proxy
    request = urllib.request.Request(f"{base}/v1/turns?limit=1000", headers={"Authorization": f"Token {keys[who]}"})
    with urllib.request.urlopen(request) as reply:
        return json.loads(reply.read())["turns"]


def system_prompt(body):
    return "\n".join(m["content"] for m in body["messages"] if m["role"] == "system")


def ask(proxy, who, text, **options):
    return client(proxy, who).chat.completions.with_raw_response.create(
        model="smollm2", messages=[{"role": "user", "content": text}], max_tokens=24, **options)


def test_a_fact_told_once_reaches_the_upstream_later_and_never_another_user(proxy, upstream):
    told = ask(proxy, "ana", "My sister Mara lives in Lisbon and keeps bees on her roof.")
    assert told.headers["x-aril-stored"] == "2"
    reply = told.parse().choices[0].message.content
    stored = turns(proxy, "ana")
    assert [(t["role"], t["text"]) for t in stored] == [
        ("user", "My sister Mara lives in Lisbon and keeps bees on her roof."), ("assistant", reply)]

    later = ask(proxy, "ana", "Which city does my sister live in?")
    assert "Lisbon" in system_prompt(upstream.last_chat())
    injected = later.headers["x-aril-memory-ids"].split(",")
    assert stored[0]["id"] in injected

    ask(proxy, "ben", "Which city does my sister live in?")
    seen_by_ben = upstream.last_chat()
    assert "Lisbon" not in json.dumps(seen_by_ben) and "Mara" not in json.dumps(seen_by_ben)
    assert [t["text"] for t in turns(proxy, "ben")][0] == "Which city does my sister live in?"


def test_a_stream_passes_through_chunk_by_chunk_and_is_stored_whole(proxy, upstream):
    before = len(turns(proxy, "ana"))
    stream = client(proxy, "ana").chat.completions.create(
        model="smollm2", max_tokens=24, stream=True,
        messages=[{"role": "system", "content": "Answer briefly."},
                  {"role": "user", "content": "I am training for the Porto marathon in October."}])
    pieces = [c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content]
    assert len(pieces) > 1
    assert upstream.last_chat()["stream"] is True
    # The caller's own system prompt is kept, memory follows it.
    assert upstream.last_chat()["messages"][0]["content"].startswith("Answer briefly.")
    stored = turns(proxy, "ana")[before:]
    assert [(t["role"], t["text"]) for t in stored] == [
        ("user", "I am training for the Porto marathon in October."), ("assistant", "".join(pieces))]


def test_an_upstream_error_passes_through_and_stores_nothing(proxy, upstream):
    before = len(turns(proxy, "ana"))
    with pytest.raises(openai.APIStatusError) as failed:
        ask(proxy, "ana", f"{FAIL_MARK}: remember that I moved to Faro.")
    assert failed.value.status_code == 503
    assert failed.value.body["message"] == "overloaded (recorded)"
    assert len(turns(proxy, "ana")) == before


def test_the_scope_comes_from_the_key_or_the_user_field(proxy, upstream):
    with pytest.raises(openai.BadRequestError, match="user"):
        ask(proxy, "admin", "Hello there")
    with pytest.raises(openai.PermissionDeniedError):
        ask(proxy, "ana", "Hello there", user="ben")
    count = len(turns(proxy, "ben"))
    done = ask(proxy, "admin", "My dog Pip is a beagle.", user="ben")
    assert done.headers["x-aril-stored"] == "2"
    assert turns(proxy, "ben")[count]["text"] == "My dog Pip is a beagle."
    # The `user` field reaches the upstream as the caller sent it.
    assert upstream.last_chat()["user"] == "ben"


def test_models_are_the_upstreams(proxy, upstream, llm):
    listed = client(proxy, "ana").models.list()
    assert any(llm["model"] in m.id for m in listed), listed
    assert upstream.received[-1]["path"] == "/v1/models"
    with pytest.raises(openai.AuthenticationError):
        OpenAI(base_url=f"{proxy[0]}/v1", api_key="not-a-key", max_retries=0).models.list()


def test_what_the_chat_already_says_is_not_added_again(proxy, upstream):
    fact = "My cello teacher Ines lives in Braga."
    ask(proxy, "ben", fact)
    chat = client(proxy, "ben").chat.completions.with_raw_response.create(
        model="smollm2", max_tokens=8,
        messages=[{"role": "user", "content": fact}, {"role": "assistant", "content": "Noted."},
                  {"role": "user", "content": "Where does my cello teacher live?"}])
    sent = upstream.last_chat()["messages"]
    # The history carries the fact; the memory added to the system prompt does not repeat it.
    assert [m["content"] for m in sent if m["role"] == "user"] == [fact, "Where does my cello teacher live?"]
    assert fact not in system_prompt(upstream.last_chat())
    assert chat.headers["x-aril-stored"] == "2"
