"""The demo's platform: the real application served by uvicorn on a free loopback port, in a
thread of this process, with its in-process workers and a development identity provider of its
own. Clients reach it over HTTP exactly as they reach `calcgraph serve`."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import TYPE_CHECKING

from calcgraph.auth.devidp import DevIdentityProvider, dev_token
from calcgraph.settings import Settings

if TYPE_CHECKING:
    from calcgraph.demo.server import StoppableServer

START_TIMEOUT_SECONDS = 60.0


class PlatformError(RuntimeError):
    """The platform did not start."""


class InProcessPlatform:
    """`start()` returns the base URL; `stop()` shuts the server (and its workers) down.

    The server runs its own event loop in a thread: uvicorn installs signal handlers only on
    the main thread, so Ctrl-C stays with the caller, whose `stop()` ends the server cleanly.
    """

    def __init__(
        self,
        settings: Settings,
        identity: DevIdentityProvider | None = None,
        users: tuple[str, ...] = (),
    ) -> None:
        """`identity`: a provider already launched (`calcgraph demo` launches it before its
        imports, so it starts meanwhile); it is then this platform's to stop. `users`: the
        development users signed in while the server starts, whose `token` is then ready."""
        self.settings = settings
        self.identity = identity
        self.users = users
        self._tokens: dict[str, str] = {}
        self.base_url = ""
        self._server: StoppableServer | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._socket: socket.socket | None = None
        self._issuer_known = threading.Event()
        self._stopping = False

    def start(self) -> str:
        try:
            # IPPROTO_TCP, not the default 0: asyncio turns Nagle off (TCP_NODELAY) only on
            # connections of a socket that says it is TCP, and uvicorn writes a response's
            # head and body apart, so with Nagle on every answer after a connection's first
            # waited for the client's delayed ACK: 40 ms a request, most of the demo's run.
            self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._socket.bind(("127.0.0.1", 0))
            port = self._socket.getsockname()[1]
            # The server thread imports the application and migrates the database while the
            # identity provider starts here: each takes about a second.
            self._thread = threading.Thread(target=self._run, name="calcgraph-demo-api")
            self._thread.start()
            # A provider of its own on a free port: nothing shared with a `serve` on this
            # machine, so neither stops the other's provider. Users are keyed by subject,
            # so `alice` is the same user whichever port issued her token.
            if self.identity is None:
                self.identity = DevIdentityProvider(
                    self.settings.oidc_audience, log_level="warning"
                ).start()
            else:
                self.identity.wait_ready()
            self.settings = self.settings.model_copy(
                update={"oidc_issuer": self.identity.issuer, "host": "127.0.0.1"}
            )
            self._issuer_known.set()
            # The provider signs them in (its own process) while the server still starts.
            for username in self.users:
                self.token(username)
            self._wait_started()
        except BaseException:
            self.stop()
            raise
        self.base_url = f"http://127.0.0.1:{port}"
        return self.base_url

    def token(self, username: str) -> str:
        """An access token of a development user (signed in once, then kept)."""
        assert self.identity is not None, "start() first"
        if username not in self._tokens:
            self._tokens[username] = dev_token(self.identity.issuer, username)
        return self._tokens[username]

    def _wait_started(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        assert self._thread is not None
        while not (self._server is not None and self._server.started):
            if not self._thread.is_alive():
                reason = f": {self._error!r}" if self._error is not None else " (see the log)"
                raise PlatformError(f"the platform did not start{reason}")
            if time.monotonic() > deadline:
                raise PlatformError(f"the platform did not start in {START_TIMEOUT_SECONDS:.0f}s")
            time.sleep(0.02)

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # reported by start(); a thread has nowhere to raise to
            self._error = exc

    async def _serve(self) -> None:
        import uvicorn

        from calcgraph.app import create_app
        from calcgraph.db.engine import Database
        from calcgraph.demo.server import StoppableServer
        from calcgraph.migrations.runner import upgrade
        from calcgraph.serving.server import http_options

        database = Database.from_settings(self.settings)
        try:
            await upgrade(database)
            await asyncio.to_thread(self._issuer_known.wait)
            if self._stopping:
                return
            app = create_app(self.settings, database)
            config = uvicorn.Config(
                app,
                log_level="warning",
                access_log=False,
                lifespan="on",
                loop="asyncio",
                **http_options(self.settings),
            )
            self._server = StoppableServer(config)
            if self._stopping:
                return
            assert self._socket is not None
            await self._server.serve(sockets=[self._socket])
        finally:
            await database.dispose()

    def stop(self) -> None:
        self._stopping = True
        self._issuer_known.set()
        if self._server is not None:
            self._server.stop()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        if self.identity is not None:
            self.identity.stop()
            self.identity = None
        self._tokens.clear()

    def __enter__(self) -> InProcessPlatform:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
