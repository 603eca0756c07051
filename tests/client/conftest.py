"""A real calcgraph for client tests: `create_app` served by uvicorn on a free loopback port
in a background thread, over the execution tests' committed database (SQLite or PostgreSQL),
with real workers and sandboxes and the tests' identity provider.

The client and the CLI reach it over TCP exactly as users do.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from calcgraph.app import create_app
from calcgraph.db.engine import Database
from calcgraph.demo import PACKAGE_DIR, workflow_document
from calcgraph.serving.server import http_options
from calcgraph.settings import Settings
from tests.auth.idp import LocalIdentityProvider
from tests.execution.conftest import TEST_TIMEOUT, default_sandbox, exec_url  # noqa: F401

HOST = "127.0.0.1"
# What `auth/login` names as the client; the tests' provider accepts any.
LOGIN_CLIENT_ID = "calcgraph-cli-tests"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Served:
    url: str
    idp: LocalIdentityProvider
    settings: Settings

    def token(self, username: str = "alice", roles: tuple[str, ...] = ("user",)) -> str:
        return self.idp.token(username, roles)


@contextlib.contextmanager
def serve(url: str, idp: LocalIdentityProvider, tmp: Path, **overrides: Any) -> Iterator[Served]:
    options: dict[str, Any] = {
        "database_url": url,
        "oidc_issuer": idp.issuer,
        "oidc_client_id": LOGIN_CLIENT_ID,
        "sandbox": default_sandbox(),
        "sandbox_timeout_seconds": TEST_TIMEOUT,
        "code_cache_dir": tmp / "code-cache",
        "sweeper_interval_seconds": 3600,
        "inprocess_worker_threads": 2,
        # Tests make many calls as one user; the limit has a test of its own.
        "rate_limit_per_minute": 0,
    }
    settings = Settings(_env_file=None, **(options | overrides))  # type: ignore[call-arg]
    database = Database(url)
    app = create_app(settings, database)
    port = free_port()
    # What `calcgraph serve` gives uvicorn: the contract's header limit, and a keep-alive longer
    # than the client's own (with uvicorn's 5 s, equal to httpx's, a request sent after a pause
    # of about 5 s met the server closing its connection: "Server disconnected without sending
    # a response", seen in test_client_webhooks_and_signatures on a slow machine).
    config = uvicorn.Config(
        app, host=HOST, port=port, lifespan="on", log_level="warning", **http_options(settings)
    )
    server = uvicorn.Server(config)

    async def run() -> None:
        try:
            await server.serve()
        finally:
            await database.dispose()

    thread = threading.Thread(target=asyncio.run, args=(run(),), daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    try:
        yield Served(f"http://{HOST}:{port}", idp, settings)
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@pytest.fixture(scope="module")
def served(
    exec_url: str,  # noqa: F811
    identity_provider: LocalIdentityProvider,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Served]:
    # Git deploys in these tests come from repositories under pytest's temporary folder.
    roots = [tmp_path_factory.getbasetemp()]
    with serve(
        exec_url, identity_provider, tmp_path_factory.mktemp("served"), git_local_roots=roots
    ) as running:
        yield running


@pytest.fixture(autouse=True)
def isolated_client_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No test reads the developer's own credentials file or CALCGRAPH_URL/TOKEN."""
    for name in ("CALCGRAPH_URL", "CALCGRAPH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "config" / "credentials.json"
    monkeypatch.setenv("CALCGRAPH_CREDENTIALS_FILE", str(path))
    return path


@dataclass(frozen=True)
class DemoCopy:
    """The bundled demo package under a fresh name (rows of a module's tests are shared)."""

    name: str
    directory: Path
    graph: dict[str, Any]


def demo_copy(tmp_path: Path) -> DemoCopy:
    name = f"beam-{uuid.uuid4().hex[:8]}"
    directory = tmp_path / name
    shutil.copytree(PACKAGE_DIR, directory, ignore=shutil.ignore_patterns("__pycache__"))
    manifest = directory / "calcgraph.yaml"
    manifest.write_text(manifest.read_text().replace("name: demo-beam", f"name: {name}", 1))
    graph = workflow_document()
    for node in graph["nodes"]:
        if node.get("function"):
            node["function"] = node["function"].replace("demo-beam/", f"{name}/", 1)
    return DemoCopy(name, directory, graph)


@pytest.fixture
def demo(tmp_path: Path) -> DemoCopy:
    return demo_copy(tmp_path)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"
