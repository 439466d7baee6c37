#!/usr/bin/env python3
"""MemPalace on aril's benchmarks, scored the way aril scores itself; run by scripts/bench-mempalace
inside its virtualenv (mempalace, chromadb, tiktoken), offline.

    mempalace-bench.py longmemeval DATA OUT.json
        MemPalace's raw session mode (its LongMemEval benchmark's baseline): per question a fresh
        chromadb collection holding one document per haystack session, the session's user turns
        joined by "\\n", embedded by chromadb's default function (all-MiniLM-L6-v2, which MemPalace
        uses too); query(n_results=50); recall_any@5/@10 over answer_session_ids.
    mempalace-bench.py locomo DATA WORK OUT.json
        `mempalace mine DIR --mode convos` on each conversation written as MemPalace transcripts
        (one file per session, a date header, `> Name:` before the first speaker's turns), one
        wing per conversation, then its search API (search_memories, n_results=50) per question.
        A drawer covers the turns whose line it holds; evidence recall at 5 / 10 drawers and at
        1k / 2k / 4k o200k tokens of drawer text in rank order (cut before the first drawer that
        overflows), over the questions of categories 1-4 with evidence, as aril's scorer counts.
    mempalace-bench.py table ARIL_LME ARIL_LOCOMO MP_LME MP_LOCOMO
        The side-by-side table (markdown) from the four JSON reports.

Gold labels (answer_session_ids, evidence) are read by the scoring code only, after retrieval.
"""

import json
import os
import subprocess
import sys
import time
from itertools import takewhile
from pathlib import Path


def percentile(values, p):
    """The value at rank round((n - 1) * p) of the sorted values, as aril's bench reports them."""
    ordered = sorted(values)
    return ordered[round((len(ordered) - 1) * p)]


def write_report(out_path, benchmark, data_path, scored, recall, turns, index_s, query_ms):
    """One run's JSON report: recall over the scored questions, indexing and query times."""
    report = {
        "system": "mempalace",
        "benchmark": benchmark,
        "data": Path(data_path).name,
        "n_questions": scored,
        **recall,
        "turns": turns,
        "index_s": index_s,
        "turns_per_s": turns / index_s,
        "query_ms_p50": percentile(query_ms, 0.5),
        "query_ms_p99": percentile(query_ms, 0.99),
    }
    Path(out_path).write_text(json.dumps(report, indent=2) + "\n")


def longmemeval(data_path, out_path):
    import chromadb
    from chromadb.utils.embedding_functions import DefaultEmbeddingFunction

    questions = json.loads(Path(data_path).read_text())
    client = chromadb.EphemeralClient()
    embed = DefaultEmbeddingFunction()
    index_s, query_ms, turns = 0.0, [], 0
    hits = {5: 0, 10: 0}
    scored = 0
    for n, q in enumerate(questions):
        # Documents are numbered: a haystack may hold the same session id twice.
        sessions, docs = [], []
        for sid, session in zip(q["haystack_session_ids"], q["haystack_sessions"]):
            turns += len(session)
            text = "\n".join(t["content"] for t in session if t["role"] == "user")
            if text.strip():
                sessions.append(sid)
                docs.append(text)
        ids = [str(i) for i in range(len(docs))]
        name = f"question-{n}"
        started = time.perf_counter()
        collection = client.create_collection(name, embedding_function=embed)
        for i in range(0, len(docs), 1000):
            collection.add(ids=ids[i:i + 1000], documents=docs[i:i + 1000])
        index_s += time.perf_counter() - started
        started = time.perf_counter()
        found = collection.query(query_texts=[q["question"]], n_results=min(50, len(docs)))
        query_ms.append((time.perf_counter() - started) * 1000)
        ranked = list(dict.fromkeys(sessions[int(i)] for i in found["ids"][0]))
        client.delete_collection(name)
        # Scoring only from here on.
        gold = set(q["answer_session_ids"])
        if gold:
            scored += 1
            for k in hits:
                hits[k] += bool(gold & set(ranked[:k]))
        print(f"\rlongmemeval {n + 1}/{len(questions)}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    recall = {f"recall_any@{k}": hits[k] / scored for k in hits}
    write_report(out_path, "longmemeval", data_path, scored, recall, turns, index_s, query_ms)


def turn_line(turn):
    """One turn as one transcript line: the text with its image caption, whitespace folded."""
    text = turn["text"]
    if turn.get("blip_caption"):
        text += f" [shared an image: {turn['blip_caption']}]"
    return f"{turn['speaker']}: {' '.join(text.split())}"


def write_transcripts(sample, root):
    """The conversation's sessions as MemPalace transcripts; returns {file name: [(line, dia_id)]}."""
    conv = sample["conversation"]
    first = conv["speaker_a"]
    out = root / sample["sample_id"]
    out.mkdir(parents=True, exist_ok=True)
    files, n = {}, 1
    while f"session_{n}" in conv:
        name = f"session_{n:03d}.md"
        lines = [f"Date: {conv.get(f'session_{n}_date_time', '')}", ""]
        turns = []
        for turn in conv[f"session_{n}"]:
            line = turn_line(turn)
            turns.append((line, turn["dia_id"]))
            lines.append(("> " if turn["speaker"] == first else "") + line)
        (out / name).write_text("\n".join(lines) + "\n")
        files[name] = turns
        n += 1
    return out, files


def covered_turns(drawer_text, turns):
    """The dia_ids of the turns a drawer holds (whole, or the part a split drawer kept)."""
    found = []
    for line, dia_id in turns:
        probe = line if len(line) <= 120 else line[:120]
        if probe in drawer_text or (len(line) > 120 and line[-120:] in drawer_text):
            found.append(dia_id)
    return found


def locomo(data_path, work, out_path):
    import tiktoken
    from mempalace.searcher import search_memories

    o200k = tiktoken.get_encoding("o200k_base")
    samples = json.loads(Path(data_path).read_text())
    work = Path(work)
    palace = work / "palace"
    budgets = {"1k": 1000, "2k": 2000, "4k": 4000}
    index_s, query_ms, turns = 0.0, [], 0
    sums = {name: 0.0 for name in ["recall@5", "recall@10"] + [f"recall@{b}_tokens" for b in budgets]}
    scored = 0
    for sample in samples:
        folder, files = write_transcripts(sample, work / "transcripts")
        turns += sum(len(t) for t in files.values())
        started = time.perf_counter()
        subprocess.run(
            ["mempalace", "--palace", str(palace), "mine", str(folder), "--mode", "convos",
             "--wing", sample["sample_id"]],
            check=True, stdout=subprocess.DEVNULL)
        index_s += time.perf_counter() - started
        for qa in sample["qa"]:
            started = time.perf_counter()
            found = search_memories(qa["question"], str(palace), wing=sample["sample_id"],
                                    n_results=50)
            query_ms.append((time.perf_counter() - started) * 1000)
            if "error" in found:
                sys.exit(f"error: mempalace search failed: {found['error']}")
            # Scoring only from here on.
            evidence = set(qa.get("evidence") or [])
            if qa.get("category") not in (1, 2, 3, 4) or not evidence:
                continue
            scored += 1
            drawers = [covered_turns(h["text"], files.get(h["source_file"], []))
                       for h in found["results"]]
            cut = {"recall@5": drawers[:5], "recall@10": drawers[:10]}
            totals, used = [], 0
            for h in found["results"]:
                used += len(o200k.encode_ordinary(h["text"]))
                totals.append(used)
            for label, budget in budgets.items():
                fit = sum(1 for _ in takewhile(lambda total: total <= budget, totals))
                cut[f"recall@{label}_tokens"] = drawers[:fit]
            for name, kept in cut.items():
                held = {d for drawer in kept for d in drawer}
                sums[name] += len(evidence & held) / len(evidence)
        print(f"locomo {sample['sample_id']} done", file=sys.stderr, flush=True)
    recall = {name: total / scored for name, total in sums.items()}
    write_report(out_path, "locomo", data_path, scored, recall, turns, index_s, query_ms)


def table(aril_lme, aril_locomo, mp_lme, mp_locomo):
    a_lme, a_loc = json.loads(Path(aril_lme).read_text()), json.loads(Path(aril_locomo).read_text())
    m_lme, m_loc = json.loads(Path(mp_lme).read_text()), json.loads(Path(mp_locomo).read_text())

    def aril_row(report, turns, recalls):
        cost = report["cost"]
        return [cost["ingest_s"], turns / cost["ingest_s"], cost["query_ms_p50"],
                cost["query_ms_p99"], *recalls]

    lme_recall = a_lme["metrics"]["mempalace"]
    loc_recall = a_loc["metrics"]["evidence"]
    rows = [
        ("LongMemEval", "aril",
         aril_row(a_lme, m_lme["turns"], [lme_recall["recall_any@5"], lme_recall["recall_any@10"]])),
        ("LongMemEval", "MemPalace raw sessions",
         [m_lme["index_s"], m_lme["turns_per_s"], m_lme["query_ms_p50"], m_lme["query_ms_p99"],
          m_lme["recall_any@5"], m_lme["recall_any@10"]]),
        ("LoCoMo", "aril",
         aril_row(a_loc, m_loc["turns"], [loc_recall["recall@5"], loc_recall["recall@10"],
                                          loc_recall["recall@1k_tokens"],
                                          loc_recall["recall@2k_tokens"],
                                          loc_recall["recall@4k_tokens"]])),
        ("LoCoMo", "MemPalace mine + search",
         [m_loc["index_s"], m_loc["turns_per_s"], m_loc["query_ms_p50"], m_loc["query_ms_p99"],
          m_loc["recall@5"], m_loc["recall@10"], m_loc["recall@1k_tokens"],
          m_loc["recall@2k_tokens"], m_loc["recall@4k_tokens"]]),
    ]
    out = [
        "# aril beside MemPalace",
        "",
        "Generated by `scripts/bench-mempalace` (do not edit by hand): both systems on the same",
        "machine in one run, aril first, each cold (aril with an empty embedding cache, MemPalace",
        "with fresh collections), offline, all-MiniLM-L6-v2 for both. Indexing is everything from the",
        "conversation text to a searchable memory; turns/s counts every turn of the conversations",
        "(MemPalace's LongMemEval mode embeds only user turns, one document per session). Query",
        "times include embedding the question. Recall: LongMemEval recall_any over",
        "answer_session_ids (sessions ranked); LoCoMo evidence recall over the questions of",
        "categories 1-4, at k units and at o200k token budgets (MemPalace's units are its drawers,",
        "one exchange of up to 800 characters; aril's are turns, windows and segments).",
        "",
        f"Data: `{m_lme['data']}` ({m_lme['n_questions']} questions), `{m_loc['data']}` "
        f"({m_loc['n_questions']} questions with evidence). Machine: {os.cpu_count()} cores.",
        "",
        "| benchmark | system | indexing s | turns/s | query p50 ms | query p99 ms "
        "| recall@5 | recall@10 | @1k tok | @2k tok | @4k tok |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for bench, system, values in rows:
        cells = [f"{values[0]:.1f}", f"{values[1]:.0f}", f"{values[2]:.1f}", f"{values[3]:.1f}"]
        cells += [f"{v:.3f}" for v in values[4:]]
        cells += ["–"] * (11 - 2 - len(cells))
        out.append(f"| {bench} | {system} | " + " | ".join(cells) + " |")
    ratios = []
    for bench, a, m in (("LongMemEval", rows[0][2], rows[1][2]), ("LoCoMo", rows[2][2], rows[3][2])):
        ratios.append(f"- {bench}: aril indexes {a[1] / m[1]:.1f}x MemPalace's turns/s, answers a "
                      f"query {m[2] / a[2]:.1f}x faster at p50; recall@5 {a[4]:.3f} against "
                      f"{m[4]:.3f}.")
    out += ["", *ratios, ""]
    print("\n".join(out))


def main():
    args = sys.argv[1:]
    commands = {"longmemeval": (longmemeval, 2), "locomo": (locomo, 3), "table": (table, 4)}
    if not args or args[0] not in commands or len(args) - 1 != commands[args[0]][1]:
        sys.exit(__doc__)
    run, _ = commands[args[0]]
    run(*args[1:])


if __name__ == "__main__":
    main()
