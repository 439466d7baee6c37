"""aril in process: remember a conversation, recall what a question needs, edit a memory.

    scripts/fetch-model && scripts/python-package    # once: the model and the package
    ~/.cache/aril/venv-python/bin/python examples/python/quickstart.py [DATA_DIR]
"""

import sys
import tempfile

import aril

path = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="aril-quickstart-")
with aril.Memory(path) as memory:
    memory.add([{"role": "user", "content": "I work at Acme Logistics as a dispatcher."}],
               user_id="sam", session="jan", at="2024-01-08T09:00:00Z")
    memory.add([{"role": "user", "content": "Big news: I left Acme and started at Fintech Co as a data engineer."},
                {"role": "assistant", "content": "Congratulations on the new job!"}],
               user_id="sam", session="may", at="2024-05-03T18:30:00Z", flush=True)

    result = memory.search("Where does Sam work now?", user_id="sam", k=3)
    print(f"{len(result)} hits, {result.context_tokens} tokens:")
    for hit in result:
        print(f"  {hit.rank}. [{hit.kind} {hit.time:%Y-%m-%d} score {hit.score:.4f}] {hit.text}")

    first = memory.get_all(user_id="sam").items[0]
    memory.update(first.id, "I used to work at Acme Logistics as a dispatcher.")
    for version in memory.history(first.id):
        print(f"  v{version.version} {version.event}: {version.text}")
    print(f"memory at {path}: {memory.stats()['turns']} turns")
