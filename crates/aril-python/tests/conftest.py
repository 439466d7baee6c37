"""What the Python package's tests share: a fresh memory per test, an `aril serve` with keys for
the client tests (the binary from $ARIL_BIN, default the workspace's target/debug/aril), and a
real local chat model (llama-server + SmolLM2 from the cache, as scripts/fetch-llm leaves them)."""

import contextlib
import os
import socket
import subprocess
import time
import urllib.request
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
