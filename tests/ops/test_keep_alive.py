"""`calcgraph serve` keeps idle connections open longer than its clients do.

uvicorn's default keep-alive (5 s) equals httpx's own idle limit: pollers sent requests on
connections the server was closing at that moment and got httpx.ReadError or "Server
disconnected without sending a response" (the polled-runs bench, 500 runs ticked every 2 s).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from calcgraph.serving.server import http_options
from calcgraph.settings import Settings
from tests.auth.idp import LocalIdentityProvider
from tests.execution.conftest import quick_sandbox
from tests.ops.test_worker_process import _free_port

HOST = "127.0.0.1"


def test_the_server_outlasts_httpx_idle_connections() -> None:
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert settings.http_keep_alive_seconds > httpx.Limits().keepalive_expiry
    assert http_options(settings)["timeout_keep_alive"] == settings.http_keep_alive_seconds


@contextlib.contextmanager
def _serve(tmp_path: Path, keep_alive_s: int) -> Iterator[int]:
    idp = LocalIdentityProvider().start()
    port = _free_port()
    env = {
        **os.environ,
        "CALCGRAPH_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'serve.db'}",
        "CALCGRAPH_OIDC_ISSUER": idp.issuer,
        "CALCGRAPH_SANDBOX": quick_sandbox(),
        "CALCGRAPH_LOG_LEVEL": "warning",
        "CALCGRAPH_HTTP_KEEP_ALIVE_SECONDS": str(keep_alive_s),
    }
    env.pop("CALCGRAPH_REDIS_URL", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "calcgraph", "serve", "--host", HOST, "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, "calcgraph serve exited"
            assert time.monotonic() < deadline, "calcgraph serve did not answer /health"
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"http://{HOST}:{port}/health", timeout=2).status_code == 200:
                    break
            time.sleep(0.1)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=30)
        idp.stop()


def _health(sock: socket.socket) -> bytes:
    """One /health over `sock`, read to the end of its body."""
    sock.sendall(f"GET /health HTTP/1.1\r\nhost: {HOST}\r\n\r\n".encode())
    data = b""
    while True:
        head, _, body = data.partition(b"\r\n\r\n")
        length = [
            int(line.split(b":")[1])
            for line in head.lower().split(b"\r\n")
            if line.startswith(b"content-length:")
        ]
        if length and len(body) >= length[0]:
            return data
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


def test_serve_keeps_an_idle_connection_for_the_setting(tmp_path: Path) -> None:
    with _serve(tmp_path, keep_alive_s=2) as port:
        with socket.create_connection((HOST, port), timeout=10) as sock:
            assert _health(sock).startswith(b"HTTP/1.1 200")
            time.sleep(1.0)  # within the keep-alive
            assert _health(sock).startswith(b"HTTP/1.1 200")
            time.sleep(3.5)  # past it: the server closed the connection
            assert sock.recv(1) == b""
