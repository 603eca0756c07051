"""The in-process platform's server stops when told: answers in flight are finished, idle
connections closed, the application's lifespan shut down."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any

import httpx
import uvicorn

from calcgraph.demo.server import StoppableServer


class App:
    """Answers `/slow` once `release` is set; records its lifespan shutdown."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.shut_down = False

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                else:
                    self.shut_down = True
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["path"] == "/slow":
            self.entered.set()
            await asyncio.to_thread(self.release.wait, 30)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"done"})


def _serve(app: App) -> tuple[StoppableServer, threading.Thread, str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = StoppableServer(uvicorn.Config(app, log_level="warning", loop="asyncio"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])))
    thread.start()
    for _ in range(3000):
        if server.started or not thread.is_alive():
            break
        time.sleep(0.01)
    assert server.started
    return server, thread, url


def test_a_stop_finishes_the_answer_in_flight_then_shuts_the_application_down() -> None:
    app = App()
    server, thread, url = _serve(app)
    answers: list[httpx.Response] = []
    with httpx.Client(timeout=30) as idle:
        assert idle.get(f"{url}/").status_code == 200  # a keep-alive connection left open
        asking = threading.Thread(target=lambda: answers.append(httpx.get(f"{url}/slow")))
        asking.start()
        assert app.entered.wait(30)
        server.stop()
        assert not app.shut_down  # the answer in flight holds the shutdown
        app.release.set()
        asking.join(30)
        thread.join(30)
    assert not thread.is_alive()
    assert [a.text for a in answers] == ["done"]
    assert app.shut_down


def test_stopping_twice_is_harmless() -> None:
    app = App()
    server, thread, _ = _serve(app)
    server.stop()
    server.stop()  # twice is harmless
    thread.join(30)
    assert not thread.is_alive()
    assert app.shut_down
