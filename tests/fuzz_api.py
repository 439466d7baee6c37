"""Fuzzes `aril serve` from its own OpenAPI document with schemathesis (bounded): no request may get
a 5xx, every response must have the content type the document states (errors are JSON), and the
server must stay healthy. (The fuzzer holds valid keys, so it may legitimately delete data.)

    python tests/fuzz_api.py PATH_TO_ARIL_BINARY [MAX_EXAMPLES]

Runs once with a user key and once with an admin key (which reaches the admin-only routes). The
seed is fixed, so a run is repeatable; set ARIL_FUZZ_SEED to explore others.
"""

import os
import subprocess
import sys
import tempfile

import httpx

from checks import aril, check, done, start_server

MAX_EXAMPLES = sys.argv[2] if len(sys.argv) > 2 else "60"
SEED = os.environ.get("ARIL_FUZZ_SEED", "20261130")
SCHEMATHESIS = os.path.join(os.path.dirname(sys.executable), "schemathesis")


def fuzz(base, key, who):
    run = subprocess.run(
        [SCHEMATHESIS, "run", f"{base}/openapi.json",
         "-H", f"Authorization: Token {key}",
         "--checks", "not_a_server_error,content_type_conformance",
         "--max-examples", MAX_EXAMPLES, "--seed", SEED, "-n", "1", "--no-color"],
        capture_output=True, text=True, timeout=1200,
    )
    summary = [line for line in run.stdout.splitlines() if "generated" in line]
    check(f"schemathesis ({who} key): no server error, JSON errors", run.returncode == 0,
          run.stdout[-6000:] + run.stderr[-2000:])
    print(f"     {who}: {summary[-1].strip() if summary else '?'}")


def main():
    data = tempfile.mkdtemp(prefix="aril-fuzz-")
    user_key = aril(data, "keys", "create", "--user", "alice")
    admin_key = aril(data, "keys", "create", "--admin")
    server, base = start_server(data)
    try:
        doc = httpx.get(f"{base}/openapi.json").json()
        check("/openapi.json documents the API", len(doc["paths"]) >= 15 and "/v1/turns" in doc["paths"], list(doc["paths"]))
        h = {"Authorization": f"Token {user_key}"}
        r = httpx.post(f"{base}/v1/turns", headers=h, json={"turns": [{"text": "The spare key is under the blue pot."}], "run_id": "keep"})
        check("a turn is stored before fuzzing", r.status_code == 200, r.text)
        fuzz(base, user_key, "user")
        r = httpx.get(f"{base}/ready")
        check("the server is still ready after the user run", r.status_code == 200, r.text)
        fuzz(base, admin_key, "admin")
        r = httpx.get(f"{base}/ready")
        check("the server is still ready", r.status_code == 200, r.text)
    finally:
        server.terminate()
        server.wait(timeout=30)
    check("server stops cleanly on SIGTERM", server.returncode == 0, server.returncode)
    done()


if __name__ == "__main__":
    main()
