"""ask and consolidate through the package with a real local model: llama.cpp's llama-server and
SmolLM2 from the cache (scripts/fetch-llm). The 135M model's answers are not judged, only what
aril does with them: calls made and recorded, cards stored, the context handed over."""

import threading

import pytest

import aril
from conftest import Recorder


def test_without_a_model_ask_says_what_to_set(memory, monkeypatch):
    for var in ("ARIL_LLM_BASE_URL", "ARIL_LLM_ANSWERER_BASE_URL", "ARIL_LLM_PLANNER_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    memory.add("I adopted a beagle called Pimenta.", user_id="u")
    with pytest.raises(aril.ArilError, match="ARIL_LLM_BASE_URL"):
        memory.ask("What is my dog called?", user_id="u")
    recalled = memory.ask("What is my dog called?", user_id="u", context_only=True)
    assert recalled.text == "" and "Pimenta" in recalled.recalled.context
    assert recalled.recalled.plan_note and recalled.cost["llm_calls"] == 0


def test_consolidate_and_ask_with_the_local_model(tmp_path, llm):
    config = {"llm": {"base_url": llm["base_url"], "model": llm["model"]}}
    with aril.Memory(tmp_path / "memory", config) as memory:
        memory.add([{"role": "user", "content": "I adopted a beagle called Pimenta from the shelter.", "at": "2024-03-01T10:00:00Z"},
                    {"role": "user", "content": "She howls when I leave the flat.", "at": "2024-03-01T10:01:00Z"}],
                   user_id="u", flush=True)
        report = memory.consolidate(max_cards=1, max_tokens=400)
        assert report["segments_done"] + report["segments_failed"] == 1
        assert report["cost"]["llm_calls"] >= 1
        answer = memory.ask("What is my dog called?", user_id="u", at="2024-03-10T00:00:00Z")
        assert isinstance(answer, aril.Answer) and answer.text.strip()
        assert answer.recalled.items and answer.recalled.reranker.startswith("none")
        assert 2 <= answer.cost["llm_calls"] <= 3
        purposes = sorted(u["purpose"] for u in memory.stats()["llm"])
        assert purposes == ["answer", "encode", "plan"]


@pytest.mark.parametrize("operation", ["consolidate", "ask"])
def test_reads_and_writes_go_on_while_a_model_runs(tmp_path, llm, operation):
    """consolidate and ask hold the memory only for their store steps: while their model call is
    held back at the model, a search and an add from another thread finish."""
    in_flight, release = threading.Event(), threading.Event()

    def hold(body):
        in_flight.set()
        assert release.wait(120), "the test never released the encoder call"

    model = Recorder(llm["base_url"], hold)
    config = {"llm": {"base_url": model.url, "model": llm["model"]}}
    with aril.Memory(tmp_path / "memory", config) as memory:
        memory.add("I adopted a beagle called Pimenta from the shelter.", user_id="u", flush=True)
        reports = []
        run = {"consolidate": lambda: memory.consolidate(max_cards=1, max_tokens=400),
               "ask": lambda: memory.ask("Which dog did I adopt?", user_id="u")}[operation]
        worker = threading.Thread(target=lambda: reports.append(run()))
        worker.start()
        try:
            assert in_flight.wait(60), f"{operation} never called the model"
            done = []
            beside = threading.Thread(target=lambda: done.append(
                (memory.search("Which dog did I adopt?", user_id="u", k=1)[0].text,
                 memory.add("I also have a cat.", user_id="v").ids)))
            beside.start()
            beside.join(30)
            assert done and "Pimenta" in done[0][0], f"a search and an add waited for {operation}"
            assert worker.is_alive()
        finally:
            release.set()
            worker.join(180)
        model.server.shutdown()
        assert reports, f"{operation} failed"
        if operation == "consolidate":
            assert reports[0]["segments_done"] + reports[0]["segments_failed"] == 1
        else:
            assert reports[0].text.strip() and reports[0].cost["llm_calls"] >= 1
