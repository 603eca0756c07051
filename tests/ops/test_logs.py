"""Structured logs: one JSON object per line, the request id in the line and in the response
header, one access line per request, job lines naming their job."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from calcgraph.ops.logs import resolve_format, setup_logging
from calcgraph.settings import Settings
from tests.auth.idp import LocalIdentityProvider
from tests.execution.conftest import Platform, quick_sandbox
from tests.execution.factories import deploy

pytestmark = pytest.mark.db

CHECK = {"source": "Force", "target": "Numeric"}
GENERATED = re.compile(r"[0-9a-f]{24,}")


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    """Root logging as `serve` sets it up (JSON, info), into a buffer; restored afterwards."""
    root = logging.getLogger()
    saved = list(root.handlers), root.level
    stream = io.StringIO()
    handler = setup_logging(Settings(_env_file=None, log_format="json"), stream)  # type: ignore[call-arg]
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        for old in saved[0]:
            root.addHandler(old)
        root.setLevel(saved[1])


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def access_lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [line for line in lines(stream) if line["logger"] == "calcgraph.access"]


async def test_access_line_carries_the_request_id_of_the_header(
    client: httpx.AsyncClient, bearer: Callable[..., dict[str, str]], log_stream: io.StringIO
) -> None:
    response = await client.get("/jobs/0b7e-missing", headers=bearer("alice"))
    assert response.status_code == 404
    request_id = response.headers["x-request-id"]
    assert GENERATED.fullmatch(request_id)
    (line,) = [line for line in access_lines(log_stream) if line["request_id"] == request_id]
    assert line["level"] == "INFO"
    assert line["timestamp"]
    assert line["method"] == "GET"
    assert line["route"] == "/jobs/{job_id}"
    assert line["path"] == "/jobs/0b7e-missing"
    assert line["status"] == 404
    assert line["user"] == "alice"
    assert isinstance(line["duration_ms"], float)


async def test_a_sane_incoming_request_id_is_kept(
    client: httpx.AsyncClient, log_stream: io.StringIO
) -> None:
    sent = "trace-4f1c.9:abc"
    response = await client.post(
        "/types/check-connection", json=CHECK, headers={"X-Request-ID": sent}
    )
    assert response.headers["x-request-id"] == sent
    (line,) = access_lines(log_stream)
    assert line["request_id"] == sent
    assert line["user"] is None
    assert line["status"] == 200


@pytest.mark.parametrize("sent", ["has spaces in it", "x" * 129, 'quote"d', ""])
async def test_an_insane_incoming_request_id_is_replaced(
    client: httpx.AsyncClient, log_stream: io.StringIO, sent: str
) -> None:
    response = await client.get("/health", headers={"X-Request-ID": sent})
    answered = response.headers["x-request-id"]
    assert answered != sent
    assert GENERATED.fullmatch(answered)
    assert access_lines(log_stream)[-1]["request_id"] == answered


async def test_error_answers_get_an_id_and_a_line(
    client: httpx.AsyncClient, log_stream: io.StringIO
) -> None:
    response = await client.get("/jobs")  # no token: refused before any route runs
    assert response.status_code == 401
    (line,) = access_lines(log_stream)
    assert line["request_id"] == response.headers["x-request-id"]
    assert line["status"] == 401


async def test_job_lines_name_their_job(platform: Platform, log_stream: io.StringIO) -> None:
    alice = await platform.user("alice")
    deployed = await deploy(platform.database, alice)
    response = await platform.execute(
        f"/functions/{deployed.functions['boom']}/execute", {"x": 3}, wait=20
    )
    assert response.json()["status"] == "failed", response.text
    job_id = response.json()["job_id"]
    job_lines = [line for line in lines(log_stream) if line["job_id"] == job_id]
    ran = [line for line in job_lines if line["logger"] == "calcgraph.workers.jobs"]
    assert ran, lines(log_stream)
    assert ran[0]["status"] == "failed"
    assert ran[0]["error_kind"] == "user_error"
    # The worker thread does not inherit the request's id.
    assert ran[0]["request_id"] is None


def test_format_follows_the_setting_else_the_terminal() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    def settings(**kw: Any) -> Settings:
        return Settings(_env_file=None, **kw)  # type: ignore[call-arg]

    assert resolve_format(settings(), io.StringIO()) == "json"
    assert resolve_format(settings(), Terminal()) == "text"
    assert resolve_format(settings(log_format="json"), Terminal()) == "json"
    assert resolve_format(settings(log_format="text"), io.StringIO()) == "text"


def test_text_format_is_one_plain_line(log_stream: io.StringIO) -> None:
    stream = io.StringIO()
    handler = setup_logging(Settings(_env_file=None, log_format="text"), stream)  # type: ignore[call-arg]
    try:
        logging.getLogger("calcgraph.test").warning("plain %s", "words")
    finally:
        logging.getLogger().removeHandler(handler)
    (text,) = stream.getvalue().splitlines()
    assert text.endswith("WARNING calcgraph.test [] plain words")


def _serve(env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    with log_path.open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "calcgraph", "serve", "--port", env["CALCGRAPH_PORT"]],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def test_serve_writes_json_lines_with_request_ids(
    tmp_path: Path, identity_provider: LocalIdentityProvider
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {
        **os.environ,
        "CALCGRAPH_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'serve.db'}",
        "CALCGRAPH_OIDC_ISSUER": identity_provider.issuer,
        "CALCGRAPH_SANDBOX": quick_sandbox(),
        "CALCGRAPH_PORT": str(port),
        "CALCGRAPH_LOG_LEVEL": "info",
    }
    env.pop("CALCGRAPH_LOG_FORMAT", None)
    log_path = tmp_path / "serve.log"
    server = _serve(env, log_path)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, log_path.read_text()
            try:
                if httpx.get(f"{base}/health").status_code == 200:
                    break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.2)
        response = httpx.post(
            f"{base}/types/check-connection", json=CHECK, headers={"X-Request-ID": "serve-1"}
        )
        assert response.headers["x-request-id"] == "serve-1"
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    # Every line is one JSON object: uvicorn's own lines included.
    logged = [json.loads(line) for line in log_path.read_text().splitlines() if line.strip()]
    assert {"uvicorn.error", "calcgraph.access"} <= {line["logger"] for line in logged}
    (access,) = [line for line in logged if line.get("request_id") == "serve-1"]
    assert access["route"] == "/types/check-connection"
    assert access["status"] == 200
