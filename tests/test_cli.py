"""The `calcgraph` command from outside: migrate, then serve and answer over real HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CALCGRAPH_")}
    env["CALCGRAPH_DATABASE_URL"] = f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_migrate_creates_the_schema(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "calcgraph", "migrate"],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "latest schema" in result.stdout
    assert (tmp_path / "cli.db").exists()


def test_bad_database_url_is_a_clear_error(tmp_path: Path) -> None:
    env = _env(tmp_path) | {"CALCGRAPH_DATABASE_URL": "mysql://x/y"}
    result = subprocess.run(
        [sys.executable, "-m", "calcgraph", "migrate"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "CALCGRAPH_DATABASE_URL must start with" in result.stderr


def test_serve_answers_over_http(tmp_path: Path) -> None:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "calcgraph", "serve", "--port", str(port)],
        env=_env(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline, "serve did not answer within 30 s"
                time.sleep(0.2)
        assert health.json()["status"] == "ok"
        check = httpx.post(
            f"http://127.0.0.1:{port}/types/check-connection",
            json={"source": "Integer", "target": "Float"},
        )
        assert check.json()["compatibility"] == "ALLOWED"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stderr:
            proc.stderr.close()
