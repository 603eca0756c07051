"""An ASGI endpoint built on first use, so a server answers /health before it pays for it.

Strawberry and GraphQL-core take most of a second to import and the schema as long again to
build. The server starts without them and builds the endpoint in a thread right after start
(`warm`), so the first GraphQL request usually finds it ready; one that comes sooner waits for
the same build, never starts a second one.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from starlette.types import ASGIApp, Receive, Scope, Send


class LazyEndpoint:
    def __init__(self, build: Callable[[], ASGIApp]) -> None:
        self._build = build
        self._app: ASGIApp | None = None
        self._lock = threading.Lock()  # the warm-up thread and a request's thread, one build

    def _get(self) -> ASGIApp:
        with self._lock:
            if self._app is None:
                self._app = self._build()
            return self._app

    async def ready(self) -> ASGIApp:
        app = self._app
        if app is None:
            app = await asyncio.to_thread(self._get)
        return app

    def warm(self) -> asyncio.Task[ASGIApp]:
        """Build now, in a thread, without making the caller wait."""
        return asyncio.get_running_loop().create_task(self.ready())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = await self.ready()
        await app(scope, receive, send)
