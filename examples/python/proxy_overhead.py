"""What `aril proxy` costs per chat completion: the same requests straight to an upstream that
answers at once, and through the proxy (recall for the question, memory added to the system
prompt, the exchange stored before the reply goes back).

    aril --data-dir MEM import locomo FILE --conversation conv-26
    python examples/python/proxy_overhead.py ARIL_BINARY MEM conv-26 FILE

The memory gains two turns per proxied request: run it on a copy.
"""

import json
import socket
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from openai import OpenAI

aril_bin, data, user, questions_file = sys.argv[1:5]
REPLY = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [
    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Noted."}}]}).encode()


class Instant(BaseHTTPRequestHandler):
    """An upstream that answers every chat completion at once (one write: no Nagle delay)."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                         % (len(REPLY), REPLY))


upstream = ThreadingHTTPServer(("127.0.0.1", 0), Instant)
threading.Thread(target=upstream.serve_forever, daemon=True).start()
upstream_url = f"http://127.0.0.1:{upstream.server_address[1]}/v1"
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
proxy = subprocess.Popen([aril_bin, "--data-dir", data, "proxy", "--upstream", upstream_url, "--no-auth",
                          "--user", user, "--bind", f"127.0.0.1:{port}", "--no-consolidate"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
try:
    assert "serving on" in proxy.stdout.readline()
    # Questions only: the file's answers and evidence are never read.
    questions = [qa["question"] for qa in json.load(open(questions_file))[0]["qa"]][:100]
    fronts = {"direct": OpenAI(base_url=upstream_url, api_key="x"),
              "proxy": OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x")}
    took = {name: [] for name in fronts}
    injected = []
    for question in questions:
        for name, client in fronts.items():
            start = time.perf_counter()
            reply = client.chat.completions.with_raw_response.create(
                model="m", messages=[{"role": "user", "content": question}])
            took[name].append(time.perf_counter() - start)
            if name == "proxy":
                injected.append(len([i for i in reply.headers["x-aril-memory-ids"].split(",") if i]))
    for name, times in took.items():
        times.sort()
        print(f"{name}: p50 {1000 * statistics.median(times):.1f} ms, "
              f"p90 {1000 * times[int(0.9 * len(times))]:.1f} ms (n {len(times)})")
    print(f"items added per request: mean {statistics.mean(injected):.1f}")
finally:
    proxy.terminate()
    upstream.shutdown()
