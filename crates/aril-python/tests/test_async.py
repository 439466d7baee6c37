"""aril.AsyncMemory: the same memory through coroutines."""

import asyncio

import pytest

import aril


def test_coroutines_add_and_search_concurrently(tmp_path):
    async def main():
        async with aril.AsyncMemory(tmp_path / "memory") as memory:
            added = await memory.add(
                [{"role": "user", "content": "I keep bees on my roof in Lyon."},
                 {"role": "user", "content": "My favourite tea is genmaicha."}],
                user_id="sam",
            )
            assert len(added.ids) == 2
            bees, tea = await asyncio.gather(
                memory.search("What animals do I keep?", user_id="sam", k=1),
                memory.search("Which tea do I like?", user_id="sam", k=1),
            )
            assert "bees" in bees[0].text and "genmaicha" in tea[0].text
            page = await memory.get_all(user_id="sam")
            assert page.total == 2
            with pytest.raises(aril.NotFoundError):
                await memory.get("t_nope")

    asyncio.run(main())
