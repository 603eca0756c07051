"""Issue 15: the Python client retries 429 and 503 after the server's `Retry-After`, a bounded
number of times within a bounded total time, then raises as before. The server here is a real
HTTP server on loopback that answers from a script."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from calcgraph.client import AsyncClient, Client, RateLimited
from calcgraph.client.errors import Unavailable

HEALTH = {"status": "ok", "database": "ok", "version": "0.1.0"}  # as the server writes it


class Script:
    """Answers in order (status, Retry-After or None); then 200 for ever. Counts requests."""

    def __init__(self) -> None:
        self.answers: list[tuple[int, str | None]] = []
        self.seen: list[float] = []


@pytest.fixture
def script() -> Iterator[tuple[Script, str]]:
    state = Script()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.seen.append(time.monotonic())
            status, retry_after = state.answers.pop(0) if state.answers else (200, None)
            kinds = {429: "RateLimited", 503: "Unavailable"}
            body = HEALTH if status == 200 else {"detail": f"{kinds[status]}: try later"}
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if retry_after is not None:
                self.send_header("Retry-After", retry_after)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_429_then_503_then_success_honours_retry_after(script: tuple[Script, str]) -> None:
    state, url = script
    state.answers = [(429, "0.3"), (503, "0.2")]
    with Client(url, "t") as client:
        assert client.health().status == "ok"
    assert len(state.seen) == 3
    assert state.seen[1] - state.seen[0] >= 0.29
    assert state.seen[2] - state.seen[1] >= 0.19


async def test_the_async_client_retries_the_same_way(script: tuple[Script, str]) -> None:
    state, url = script
    state.answers = [(503, "0.1"), (429, "0")]
    async with AsyncClient(url, "t") as client:
        assert (await client.health()).status == "ok"
    assert len(state.seen) == 3


def test_attempts_are_bounded(script: tuple[Script, str]) -> None:
    state, url = script
    state.answers = [(429, "0")] * 10
    with Client(url, "t", retries=3) as client, pytest.raises(RateLimited) as caught:
        client.health()
    assert len(state.seen) == 4  # the first try and three retries
    assert caught.value.retry_after == 0


def test_a_wait_beyond_the_budget_is_not_waited(script: tuple[Script, str]) -> None:
    state, url = script
    state.answers = [(503, "120")]
    started = time.monotonic()
    with Client(url, "t", retry_budget=5) as client, pytest.raises(Unavailable):
        client.health()
    assert time.monotonic() - started < 2
    assert len(state.seen) == 1


def test_without_retry_after_it_backs_off(script: tuple[Script, str]) -> None:
    state, url = script
    state.answers = [(503, None)]
    with Client(url, "t") as client:
        assert client.health().status == "ok"
    assert len(state.seen) == 2
    assert state.seen[1] - state.seen[0] >= 0.45
