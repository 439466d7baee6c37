"""What the client tests share: the binary under test, named checks that stop at the first
failure, a free loopback port, and a fresh data directory with keys."""

import os
import socket
import subprocess
import sys

ARIL = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/debug/aril")
passed = []


def check(name, condition, detail=""):
    """Records a passed check, or prints the failure and the closing line and exits."""
    if not condition:
        print(f"FAIL {name}: {detail}", file=sys.stderr)
        print(f"{len(passed)} passed, 1 failed")
        sys.exit(1)
    passed.append(name)
    print(f"ok   {name}")


def done():
    print(f"{len(passed)} passed, 0 failed")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def aril(data, *args):
    """Runs `aril --data-dir DATA ARGS…` and returns its stdout."""
    return subprocess.run([ARIL, "--data-dir", data, *args], check=True, capture_output=True, text=True).stdout.strip()


def start_server(data):
    """Starts `aril serve` on a free loopback port; returns (process, base URL)."""
    port = free_port()
    server = subprocess.Popen([ARIL, "--data-dir", data, "serve", "--bind", f"127.0.0.1:{port}"], stdout=subprocess.PIPE, text=True)
    check("server starts", "serving on" in server.stdout.readline())
    return server, f"http://127.0.0.1:{port}"
