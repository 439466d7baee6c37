"""Drives aril's MCP server with the official `mcp` Python SDK, over both transports: stdio
(`aril mcp`) and streamable HTTP (`/mcp` under `aril serve`, with an API key). Lists the tools and
calls each one.

    python tests/mcp_client.py PATH_TO_ARIL_BINARY

Ends with the line 'N passed, 0 failed'; exits non-zero on the first failed check.
"""

import asyncio
import json
import tempfile

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from checks import ARIL, aril, check, done, start_server

TOOLS = {
    "add_memory", "search_memories", "get_memories", "get_memory", "update_memory",
    "delete_memory", "delete_all_memories", "append_turns", "recall_context", "memory_history",
    "forget_memory",
}
def payload(result):
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


async def exercise(session, transport, user_arg):
    """Calls every tool once; `user_arg` is {} when the key is bound to the user."""
    await session.initialize()
    listed = await session.list_tools()
    names = {t.name for t in listed.tools}
    check(f"{transport}: lists the eleven tools", TOOLS <= names, names)
    described = all(t.description and t.input_schema.get("properties") for t in listed.tools)
    check(f"{transport}: every tool has a description and an input schema", described)

    r = await session.call_tool("add_memory", {"messages": [
        {"role": "user", "content": "I'm training for the Berlin marathon in September."},
        {"role": "assistant", "content": "Good luck with the training!"}], **user_arg})
    added = payload(r)
    check(f"{transport}: add_memory", not r.is_error and len(added["results"]) == 2, added)
    mid = added["results"][0]["id"]
    r = await session.call_tool("add_memory", {"text": "My running shoes are Asics Novablast.",
                                               "metadata": {"category": "gear"}, **user_arg})
    check(f"{transport}: add_memory with text", not r.is_error, payload(r))
    shoes = payload(r)["results"][0]["id"]
    r = await session.call_tool("get_memory", {"memory_id": shoes})
    check(f"{transport}: add_memory keeps metadata", payload(r)["metadata"] == {"category": "gear"}, payload(r))
    r = await session.call_tool("update_memory", {"memory_id": shoes, "metadata": {"category": "shoes"}})
    check(f"{transport}: update_memory replaces metadata alone", not r.is_error and payload(r)["metadata"] == {"category": "shoes"}
          and "Asics" in payload(r)["memory"], payload(r))
    r = await session.call_tool("add_memory", {"text": "My passport number is X123.", "immutable": True,
                                               "expiration_date": "2999-01-01", **user_arg})
    fixed = payload(r)["results"][0]["id"]
    r = await session.call_tool("update_memory", {"memory_id": fixed, "text": "x"})
    check(f"{transport}: an immutable memory refuses update_memory", r.is_error and "immutable" in payload(r)["message"], payload(r))
    r = await session.call_tool("delete_memory", {"memory_id": fixed})
    check(f"{transport}: an immutable memory can be deleted", not r.is_error, payload(r))
    r = await session.call_tool("add_memory", {"text": "x", "metadata": {"aril": 1}, **user_arg})
    check(f"{transport}: reserved metadata is a clear tool error", r.is_error and "reserved" in payload(r)["message"], payload(r))
    r = await session.call_tool("append_turns", {"turns": [
        {"role": "user", "text": "I hurt my left knee on the long run.", "at": "2024-08-04T07:30:00Z"}],
        "conversation": "training-log", "flush": True, **user_arg})
    check(f"{transport}: append_turns", not r.is_error and len(payload(r)["ids"]) == 1, payload(r))

    r = await session.call_tool("search_memories", {"query": "which race is she preparing for?", "top_k": 3, **user_arg})
    found = payload(r)
    check(f"{transport}: search_memories", not r.is_error and any("Berlin" in m["memory"] for m in found["results"]), found)
    r = await session.call_tool("get_memories", {"page_size": 10, **user_arg})
    check(f"{transport}: get_memories", not r.is_error and payload(r)["count"] == 4, payload(r))
    r = await session.call_tool("search_memories", {"query": "what do I run in?", "filters": {"category": "shoes"}, **user_arg})
    check(f"{transport}: search_memories filters on metadata",
          not r.is_error and [m["id"] for m in payload(r)["results"]] == [shoes], payload(r))
    r = await session.call_tool("get_memories", {"filters": {"category": {"in": ["shoes", "socks"]}}, **user_arg})
    check(f"{transport}: get_memories filters on metadata", not r.is_error and payload(r)["count"] == 1, payload(r))
    r = await session.call_tool("get_memories", {"filters": {"category": {"near": "shoes"}}, **user_arg})
    check(f"{transport}: an unknown filter operator is a tool error",
          r.is_error and "unknown filter operator" in payload(r)["message"], payload(r))
    r = await session.call_tool("get_memory", {"memory_id": mid})
    check(f"{transport}: get_memory", not r.is_error and "Berlin" in payload(r)["memory"], payload(r))
    r = await session.call_tool("recall_context", {"query": "what injury did she have?", "budget": 200, **user_arg})
    ctx = payload(r)
    check(f"{transport}: recall_context", not r.is_error and "[2024-08-04 07:30]" in ctx["context"] and ctx["context_tokens"] <= 200, ctx)
    r = await session.call_tool("recall_context", {"query": "what injury did she have last week?", "asked_at": "2024-08-10T12:00:00Z", **user_arg})
    check(f"{transport}: recall_context asked at a given time", not r.is_error and "[2024-08-04 07:30]" in payload(r)["context"], payload(r))
    r = await session.call_tool("recall_context", {"query": "what injury?", "asked_at": "last tuesday", **user_arg})
    check(f"{transport}: a bad asked_at is a clear tool error", r.is_error and "RFC 3339" in payload(r)["message"], payload(r))

    r = await session.call_tool("update_memory", {"memory_id": mid, "text": "I'm training for the Chicago marathon in October."})
    check(f"{transport}: update_memory keeps the id", not r.is_error and payload(r)["id"] == mid and "Chicago" in payload(r)["memory"], payload(r))
    r = await session.call_tool("memory_history", {"memory_id": mid})
    hist = payload(r)["results"]
    check(f"{transport}: memory_history", not r.is_error and [h["event"] for h in hist] == ["ADD", "UPDATE"], hist)
    r = await session.call_tool("update_memory", {"memory_id": mid, "text": "x", "at": "last tuesday"})
    check(f"{transport}: a bad time is a clear tool error", r.is_error and "RFC 3339" in payload(r)["message"], payload(r))
    r = await session.call_tool("forget_memory", {"memory_id": shoes, "at": "2024-06-01"})
    check(f"{transport}: forget_memory", not r.is_error and payload(r)["valid_to"] == "2024-06-01T00:00:00Z", payload(r))
    r = await session.call_tool("search_memories", {"query": "what do I run in?", **user_arg})
    check(f"{transport}: a forgotten memory is not found", not r.is_error
          and all(m["id"] != shoes for m in payload(r)["results"]), payload(r))
    r = await session.call_tool("memory_history", {"memory_id": shoes})
    check(f"{transport}: history keeps the forgotten version's end",
          [(h["event"], h.get("valid_to")) for h in payload(r)["results"]][-1] == ("FORGET", "2024-06-01T00:00:00Z"), payload(r))
    r = await session.call_tool("forget_memory", {"memory_id": shoes, "at": "2024-06-01", "restore": True})
    check(f"{transport}: forget_memory with at and restore is a clear tool error",
          r.is_error and "restore" in payload(r)["message"], payload(r))
    r = await session.call_tool("forget_memory", {"memory_id": shoes, "restore": True})
    check(f"{transport}: forget_memory restores", not r.is_error and "valid_to" not in payload(r), payload(r))
    r = await session.call_tool("delete_memory", {"memory_id": mid})
    check(f"{transport}: delete_memory", not r.is_error and payload(r)["deleted"]["turns"] == 2, payload(r))
    r = await session.call_tool("get_memory", {"memory_id": mid})
    check(f"{transport}: a deleted memory is gone", r.is_error and payload(r)["code"] == "not_found", payload(r))
    r = await session.call_tool("search_memories", {"query": "", **user_arg})
    check(f"{transport}: a bad argument is a clear tool error", r.is_error and "query" in payload(r)["message"], payload(r))
    r = await session.call_tool("delete_all_memories", {})
    check(f"{transport}: delete_all_memories needs a scope", r.is_error, payload(r))
    r = await session.call_tool("delete_all_memories", {"user_id": "runner"})
    check(f"{transport}: delete_all_memories", not r.is_error, payload(r))
    r = await session.call_tool("get_memories", {**user_arg})
    check(f"{transport}: the scope is empty after deletion", payload(r)["count"] == 0, payload(r))


async def over_stdio(data):
    params = StdioServerParameters(command=ARIL, args=["--data-dir", data, "mcp"])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await exercise(session, "stdio", {"user_id": "runner"})


async def over_http(data):
    key = aril(data, "keys", "create", "--user", "runner")
    server, base = start_server(data)
    try:
        url = f"{base}/mcp"
        client = create_mcp_http_client(headers={"Authorization": f"Token {key}"})
        async with streamable_http_client(url, http_client=client) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await exercise(session, "http", {})
        anonymous = create_mcp_http_client()
        r = await anonymous.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                 headers={"Accept": "application/json, text/event-stream"})
        check("http: a request without a key is refused", r.status_code == 401, r.status_code)
    finally:
        server.terminate()
        server.wait(timeout=30)


async def main():
    await over_stdio(tempfile.mkdtemp(prefix="aril-mcp-stdio-"))
    await over_http(tempfile.mkdtemp(prefix="aril-mcp-http-"))
    done()


asyncio.run(main())
