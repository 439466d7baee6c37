"""What the Python package's tests share: a fresh memory per test, and an `aril serve` with keys
for the client tests (the binary from $ARIL_BIN, default the workspace's target/debug/aril)."""

import os
import socket
import subprocess
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


@pytest.fixture(scope="session")
def server(aril_bin, tmp_path_factory):
    """`aril serve` on a free loopback port; yields (base URL, keys by name)."""
    data = str(tmp_path_factory.mktemp("served"))

    def key(*args):
        out = subprocess.run([aril_bin, "--data-dir", data, "keys", "create", *args],
                             check=True, capture_output=True, text=True)
        return out.stdout.strip()

    keys = {"sam": key("--user", "sam"), "kim": key("--user", "kim"), "admin": key("--admin")}
    port = _free_port()
    process = subprocess.Popen([aril_bin, "--data-dir", data, "serve", "--bind", f"127.0.0.1:{port}"],
                               stdout=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        assert "serving on" in line, line
        yield f"http://127.0.0.1:{port}", keys
    finally:
        process.terminate()
        process.wait(timeout=30)
