"""What the Python package's tests share: a fresh memory per test, an `aril serve` with keys for
the client tests (the binary from $ARIL_BIN, default the workspace's target/debug/aril), and a
real local chat model (llama-server + SmolLM2 from the cache, as scripts/fetch-llm leaves them)."""

import contextlib
import json
import os
import threading
import socket
import subprocess
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import aril

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def memory(tmp_path):
    with aril.Memory(tmp_path / "memory") as m:
        yield m


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def aril_bin():
    path = Path(os.environ.get("ARIL_BIN", REPO / "target" / "debug" / "aril"))
    if not path.is_file():
        pytest.fail(f"no aril binary at {path}: build it (cargo build) or set ARIL_BIN")
    return str(path)


@contextlib.contextmanager
def running_aril(aril_bin, data, command, users):
    """Makes a key for each of `users` and an admin key, then runs `aril COMMAND` (serve, proxy)
    on a free loopback port until the block ends; yields (base URL, keys by name)."""

    def key(*args):
        out = subprocess.run([aril_bin, "--data-dir", data, "keys", "create", *args],
                             check=True, capture_output=True, text=True)
        return out.stdout.strip()

    keys = {user: key("--user", user) for user in users}
    keys["admin"] = key("--admin")
    port = _free_port()
    process = subprocess.Popen([aril_bin, "--data-dir", data, *command, "--bind", f"127.0.0.1:{port}"],
                               stdout=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        assert "serving on" in line, line
        yield f"http://127.0.0.1:{port}", keys
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="session")
def server(aril_bin, tmp_path_factory):
    """`aril serve` on a free loopback port; yields (base URL, keys by name)."""
    with running_aril(aril_bin, str(tmp_path_factory.mktemp("served")), ["serve"], ["sam", "kim"]) as served:
        yield served


CACHE = Path(os.environ.get("ARIL_CACHE", Path.home() / ".cache" / "aril"))


@pytest.fixture(scope="session")
def llm(tmp_path_factory):
    server = Path(os.environ.get("ARIL_LLAMA_SERVER", CACHE / "llama-server" / "llama-server"))
    model = Path(os.environ.get("ARIL_LLAMA_MODEL", CACHE / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    if not server.is_file() or not model.is_file():
        pytest.fail(f"{server} or {model} missing: run scripts/fetch-llm")
    port = _free_port()
    log = open(tmp_path_factory.mktemp("llm") / "server.log", "w")
    process = subprocess.Popen(
        [str(server), "--host", "127.0.0.1", "--port", str(port), "--threads", "2",
         "--ctx-size", "4096", "--parallel", "1", "-m", str(model)],
        stdout=subprocess.DEVNULL, stderr=log)
    try:
        for _ in range(600):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.2)
        else:
            pytest.fail("llama-server did not become healthy in 2 minutes")
        yield {"base_url": f"http://127.0.0.1:{port}/v1", "model": model.stem}
    finally:
        process.terminate()
        process.wait(timeout=30)


class Recorder:
    """An OpenAI-compatible server in front of `target` (a `.../v1` URL): keeps every request it
    receives and forwards it, streaming the reply back as it comes. `hook(body)` sees each POST
    body first; it may wait (holding the request back), or return `(status, json)` to answer
    instead of the model."""

    def __init__(self, target, hook=None):
        self.target = target
        self.received = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                recorder.received.append({"path": self.path, "body": None})
                self.forward(None)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                recorder.received.append({"path": self.path, "body": body})
                answer = hook(body) if hook else None
                if answer is not None:
                    status, reply = answer
                    data = json.dumps(reply).encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                self.forward(json.dumps(body).encode())

            def forward(self, data):
                path = self.path.removeprefix("/v1")
                request = urllib.request.Request(recorder.target + path, data=data,
                                                 headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(request, timeout=120) as reply:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", reply.headers["Content-Type"])
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    while chunk := reply.read1(65536):
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def last_chat(self):
        return next(r["body"] for r in reversed(self.received) if r["path"].endswith("/chat/completions"))
