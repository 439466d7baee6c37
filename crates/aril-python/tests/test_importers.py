"""Chat exports imported with `aril import` (the fixtures are small files written for the project
in the real formats) and read back through the Python package: what people already have becomes
memory the package recalls, once however often it is imported."""

import subprocess
from pathlib import Path

import pytest

import aril

FIXTURES = Path(__file__).resolve().parents[2] / "aril-datasets" / "tests" / "fixtures"

CASES = [
    ("chatgpt", "chatgpt-conversations.json", "Where is Sam flying in June?", "Lisbon"),
    ("claude", "claude-conversations.json", "Which marathon?", "Porto marathon"),
    ("claude-code", "claude-code", "How do we round?", "round half up"),
    ("jsonl", "turns.jsonl", "Which seats do I like?", "aisle seats"),
]


def imported(aril_bin, data, fmt, name):
    return subprocess.run([aril_bin, "--data-dir", str(data), "import", fmt, str(FIXTURES / name), "--user", "sam"],
                          capture_output=True, text=True)


@pytest.mark.parametrize("fmt,name,question,answer", CASES)
def test_an_export_imports_once_and_is_recalled_from_python(aril_bin, tmp_path, fmt, name, question, answer):
    data = tmp_path / "memory"
    first = imported(aril_bin, data, fmt, name)
    assert first.returncode == 0, first.stderr
    with aril.Memory(data) as memory:
        total = memory.get_all(user_id="sam").total
        hits = memory.search(question, user_id="sam", k=3)
        assert any(answer in hit.text for hit in hits), [h.text for h in hits]
    again = imported(aril_bin, data, fmt, name)
    assert again.returncode == 0, again.stderr
    with aril.Memory(data) as memory:
        assert memory.get_all(user_id="sam").total == total, "a second import adds nothing"


def test_a_file_of_another_format_is_refused_and_stores_nothing(aril_bin, tmp_path):
    data = tmp_path / "memory"
    wrong = imported(aril_bin, data, "claude", "chatgpt-conversations.json")
    assert wrong.returncode != 0 and "claude" in wrong.stderr.lower(), wrong.stderr
    with aril.Memory(data) as memory:
        assert memory.users() == []
