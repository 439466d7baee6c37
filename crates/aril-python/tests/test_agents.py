"""aril.agents through the OpenAI Agents SDK's own Runner, against a real OpenAI-compatible server
(llama-server + SmolLM2): the session the Runner reads and writes lives in aril. The tiny model's
replies are not judged; what the Runner stored and sent is."""

import asyncio
import json

import httpx
from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from openai import AsyncOpenAI

import aril
from aril.agents import ArilSession, instructions_with_memory

set_tracing_disabled(True)


def agent_on(llm, sent):
    """An agent on the local model; every request body it sends is appended to `sent`."""

    async def record(request):
        sent.append(json.loads(request.content))

    http = httpx.AsyncClient(event_hooks={"request": [record]})
    client = AsyncOpenAI(base_url=llm["base_url"], api_key="unused", http_client=http)
    model = OpenAIChatCompletionsModel(model=llm["model"], openai_client=client)
    return Agent(name="assistant", instructions="Answer in one short sentence.", model=model)


def test_the_runner_keeps_the_conversation_in_aril(memory, llm):
    sent = []
    agent = agent_on(llm, sent)
    session = ArilSession("chat-1", memory, user_id="sam")

    async def main():
        await Runner.run(agent, "My cat is called Miso and she is grey.", session=session)
        second = await Runner.run(agent, "What colour is my cat?", session=session)
        return second, await session.get_items()

    _, items = asyncio.run(main())
    # Two user inputs and two assistant replies, in order, exactly as the Runner gave them.
    roles = [item.get("role") for item in items]
    assert roles == ["user", "assistant", "user", "assistant"], items
    assert items[0]["content"] == "My cat is called Miso and she is grey."
    # The second request carried the first exchange, which the Runner read back from aril.
    assert len(sent) == 2
    history = [(m["role"], m["content"]) for m in sent[1]["messages"] if m["role"] != "system"]
    assert history[0] == ("user", "My cat is called Miso and she is grey.")
    assert history[-1] == ("user", "What colour is my cat?") and len(history) == 3
    # The session is the run `chat-1` of user sam: recall over the user finds it.
    assert memory.get_all(user_id="sam", run_id="chat-1").total == 4
    assert "Miso" in memory.search("What is my cat called?", user_id="sam", k=1)[0].text


def test_session_items_round_trip(memory):
    session = ArilSession("s", memory, user_id="kim", agent_id="helper")
    call = {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": '{"city": "Porto"}'}
    output = {"type": "function_call_output", "call_id": "c1", "output": "sunny, 24C"}
    parts = {"role": "assistant", "content": [{"type": "output_text", "text": "It is sunny.", "annotations": []}],
             "type": "message", "status": "completed", "id": "m1"}

    async def main():
        await session.add_items([{"role": "user", "content": "Weather in Porto?"}, call, output, parts])
        everything = await session.get_items()
        last_two = await session.get_items(limit=2)
        popped = await session.pop_item()
        after_pop = await session.get_items()
        await session.clear_session()
        return everything, last_two, popped, after_pop, await session.get_items()

    everything, last_two, popped, after_pop, cleared = asyncio.run(main())
    assert everything == [{"role": "user", "content": "Weather in Porto?"}, call, output, parts]
    assert last_two == [output, parts] and popped == parts and after_pop == everything[:3]
    assert cleared == []


def test_instructions_with_memory_adds_dated_recall(memory):
    memory.add("I am allergic to peanuts.", user_id="sam", at="2024-02-01T09:00:00Z")
    text = instructions_with_memory("Be brief.", memory, "Suggest a snack", user_id="sam")
    assert text.startswith("Be brief.") and "[2024-02-01]" in text and "peanuts" in text
    assert instructions_with_memory("Be brief.", memory, "Suggest a snack", user_id="nobody") == "Be brief."
