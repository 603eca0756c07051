"""`calcgraph serve` answers /health while the application is still imported; every other
request waits for the application and gets its answer, never a refusal or a half-built one."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from calcgraph.serving.starting import AppFactory, StartingApp
from calcgraph.settings import Settings
from tests.execution.conftest import quick_sandbox

pytestmark = pytest.mark.db


@asynccontextmanager
async def serving(app: StartingApp) -> AsyncIterator[httpx.AsyncClient]:
    """The app's lifespan as uvicorn drives it, and a client of the app meanwhile."""
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
    lifespan = asyncio.create_task(app(scope, inbox.get, outbox.put))
    await inbox.put({"type": "lifespan.startup"})
    assert (await outbox.get())["type"] == "lifespan.startup.complete"
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://calcgraph.test") as c:
            yield c
    finally:
        await inbox.put({"type": "lifespan.shutdown"})
        assert (await outbox.get())["type"] == "lifespan.shutdown.complete"
        await lifespan


def held_import(release: threading.Event) -> Callable[[], AppFactory]:
    """The application's import, held until `release`: as slow as the test wants."""

    def load() -> AppFactory:
        assert release.wait(60)
        from calcgraph.app import create_app

        return create_app

    return load


@pytest.fixture
def quick_settings(settings: Settings) -> Settings:
    """The quickest local sandbox this machine runs."""
    return settings.model_copy(update={"sandbox": quick_sandbox()})


def _keep_running() -> None:
    """A failed start is the test's to see (`wait_started` says False, requests get 503):
    the default would SIGTERM this process, and with it the whole test run."""


async def test_health_answers_while_the_app_imports_and_the_rest_waits_for_it(
    quick_settings: Settings,
) -> None:
    release = threading.Event()
    app = StartingApp(quick_settings, import_factory=held_import(release), on_failure=_keep_running)
    async with serving(app) as client:
        early = await client.get("/health")
        assert early.status_code == 200
        assert early.json()["status"] == "ok"
        assert early.headers["x-request-id"]
        assert app.application is None
        # Sent before the application exists: they wait, then get its answers.
        types = asyncio.create_task(client.get("/types"))
        post_health = asyncio.create_task(client.post("/health"))
        unknown = asyncio.create_task(client.get("/no-such-route"))
        await asyncio.sleep(0.3)
        assert not any(task.done() for task in (types, post_health, unknown))
        release.set()
        assert (await types).status_code == 200
        assert (await post_health).status_code == 405
        assert (await unknown).status_code == 404
        assert app.application is not None
        late = await client.get("/health")
        assert late.status_code == 200
        assert late.json() == early.json()  # one readiness check, before and after


async def test_the_application_starts_its_workers_and_stops_them(
    quick_settings: Settings,
) -> None:
    app = StartingApp(quick_settings, on_failure=_keep_running)
    async with serving(app) as client:
        assert await app.wait_started()
        application = app.application
        assert application is not None
        execution = application.state.execution
        assert execution.worker is not None  # the lifespan ran: in-process workers
        assert (await client.get("/health")).status_code == 200
    assert execution.worker is None


async def test_a_stop_during_the_start_waits_for_it_then_undoes_it(
    quick_settings: Settings,
) -> None:
    release = threading.Event()
    app = StartingApp(quick_settings, import_factory=held_import(release), on_failure=_keep_running)
    asyncio.get_running_loop().call_later(0.3, release.set)
    async with serving(app):
        pass  # shutdown sent while the import is held
    application = app.application
    assert application is not None
    assert application.state.execution.worker is None


async def test_a_start_that_fails_answers_unavailable_and_stops_the_server(
    quick_settings: Settings,
) -> None:
    stops: list[bool] = []

    def broken() -> AppFactory:
        raise RuntimeError("a module failed to import")

    app = StartingApp(quick_settings, import_factory=broken, on_failure=lambda: stops.append(True))
    async with serving(app) as client:
        assert not await app.wait_started()
        assert stops == [True]
        health = await client.get("/health")
        assert health.status_code == 503
        assert health.json()["status"] == "unavailable"
        assert (await client.get("/types")).status_code == 503


@pytest.mark.parametrize("cors", [None, "https://ui.example"])
async def test_once_started_health_answers_as_the_applications_route(
    quick_settings: Settings, cors: str | None
) -> None:
    """The plain probe is answered by the starting app's lean path, every other /health by the
    application: both give what the application's own route gives, headers included."""
    app = StartingApp(
        quick_settings.model_copy(update={"cors_origins": cors}), on_failure=_keep_running
    )
    async with serving(app) as client:
        assert await app.wait_started()
        application = app.application
        assert application is not None
        direct = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=application), base_url="http://calcgraph.test"
        )
        vendor = "application/vnd.service.v1+json"
        cases: list[tuple[str, dict[str, str]]] = [
            ("GET", {}),
            ("HEAD", {}),
            ("GET", {"Accept": vendor}),
            ("GET", {"Accept": "application/vnd.other+json"}),
            ("GET", {"Origin": "https://ui.example"}),
            ("GET", {"Authorization": "Bearer not-a-token"}),
            ("POST", {}),
        ]
        async with direct:
            for method, headers in cases:
                served = await client.request(method, "/health", headers=headers)
                own = await direct.request(method, "/health", headers=headers)
                assert served.status_code == own.status_code, (method, headers)
                assert served.content == own.content, (method, headers)
                names = {k for k in own.headers if k != "x-request-id"}
                assert names == {k for k in served.headers if k != "x-request-id"}
                for name in names - {"date", "server"}:
                    assert served.headers[name] == own.headers[name], (method, headers, name)
                assert served.headers["x-request-id"]
        metrics = (await client.get("/metrics")).text
        assert 'route="/health"' in metrics
