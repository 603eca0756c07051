"""The in-process platform's uvicorn server, which stops when told instead of on its next tick.

uvicorn's `Server` checks `should_exit` every 0.1 s and its shutdown then sleeps 0.1 s for
connections to notice theirs: a fifth of a second of a short-lived platform's life (the demo's
stop, each end-to-end test's). Here a stop wakes the loop at once, and the shutdown waits for
the connections themselves, not for a fixed time. Signals are the caller's (the platform runs
in a thread, where uvicorn installs no handlers).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket

import uvicorn

# How often the shutdown looks whether the last connections have closed.
_CLOSE_POLL_SECONDS = 0.005


class StoppableServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None

    def stop(self) -> None:
        """From any thread: end `serve` now (connections finish their answers first)."""
        self.should_exit = True
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop has already closed
                loop.call_soon_threadsafe(wake.set)

    async def main_loop(self) -> None:
        # uvicorn's own, whose tick also refreshes the Date header, but woken by `stop`.
        self._wake = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 0.1)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # uvicorn's steps without its fixed sleep: stop accepting, ask every connection to
        # close once its answer is written (an idle keep-alive one closes at once), wait for
        # them and for the tasks they started, then the application's lifespan shutdown.
        for listener in self.servers:
            listener.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        # uvicorn's connections signal nothing when they close: it polls them too.
        while self.server_state.connections or self.server_state.tasks:  # noqa: ASYNC110
            await asyncio.sleep(_CLOSE_POLL_SECONDS)
        if not self.force_exit:
            await self.lifespan.shutdown()
