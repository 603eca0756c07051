"""A real HTTP receiver on loopback for the webhook tests: records what it is sent and
answers as told (`ok`, `fail` with 500, `redirect` to the cloud metadata address, `hang`,
`hold`: no answer until `released` is set, or the sender gives up)."""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.time)
    """When it arrived (wall clock, as the events' `time`)."""


@dataclass
class Receiver:
    url: str
    mode: str = "ok"
    received: list[Received] = field(default_factory=list)
    arrived: threading.Condition = field(default_factory=threading.Condition)
    released: threading.Event = field(default_factory=threading.Event)
    in_flight: int = 0
    """Requests being answered now; `most_in_flight`: the most at once."""
    most_in_flight: int = 0

    def wait_for(self, count: int, seconds: float = 30.0) -> list[Received]:
        with self.arrived:
            self.arrived.wait_for(lambda: len(self.received) >= count, seconds)
            return list(self.received)


def _peer_closed(connection: socket.socket) -> bool:
    readable, _, _ = select.select([connection], [], [], 0)
    if not readable:
        return False
    try:
        return connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


@contextmanager
def receiver(mode: str = "ok") -> Iterator[Receiver]:
    state: Receiver | None = None

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            assert state is not None
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            with state.arrived:
                state.received.append(
                    Received({k.lower(): v for k, v in self.headers.items()}, body)
                )
                state.in_flight += 1
                state.most_in_flight = max(state.most_in_flight, state.in_flight)
                state.arrived.notify_all()
            try:
                self._answer()
            finally:
                with state.arrived:
                    state.in_flight -= 1

        def _answer(self) -> None:
            assert state is not None
            if state.mode == "hang":
                time.sleep(5)
            if state.mode == "hold":
                # Until released, or until the sender gives up (then no answer at all).
                deadline = time.monotonic() + 60
                while not state.released.wait(0.05):
                    if _peer_closed(self.connection) or time.monotonic() > deadline:
                        return
            if state.mode == "fail":
                self.send_response(500)
            elif state.mode == "redirect":
                self.send_response(302)
                self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
            elif state.mode == "huge":
                self.send_response(200)
                self.send_header("Content-Length", str(1 << 30))
                self.end_headers()
                try:
                    self.wfile.write(b"x" * 65536)
                except OSError:
                    pass
                return
            else:
                self.send_response(204)
            try:
                self.end_headers()
            except OSError:  # the sender went away (a killed worker)
                pass

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state = Receiver(f"http://127.0.0.1:{server.server_address[1]}/hook", mode)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
