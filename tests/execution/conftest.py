"""Execution fixtures: a whole platform (API, outbox, broker, workers, real sandboxes) over a
real database.

The workers read rows in their own sessions, so the per-test savepoint of `tests/conftest.py`
cannot serve here: each test module gets a real temporary database (a SQLite file, or the
PostgreSQL database `<CALCGRAPH_TEST_POSTGRES_URL>_exec`), migrated once, whose rows are
committed. Rows never collide: every package has a fresh name.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from calcgraph.app import create_app
from calcgraph.db.engine import Database
from calcgraph.domain.access.principal import Principal
from calcgraph.migrations.runner import upgrade
from calcgraph.settings import Settings
from calcgraph.workers.inprocess import Execution
from calcgraph.workers.runtime import WorkerRuntime
from tests.access.factories import create_user
from tests.auth.idp import LocalIdentityProvider
from tests.conftest import POSTGRES_URL, _reset_postgres
from tests.sandbox.conftest import SELECTED, _make_backend

# Long enough for a cold docker start on a busy 2-core machine.
TEST_TIMEOUT = 20.0
# A platform's shutdown ends within a second or two; one that has not after this hangs.
SHUTDOWN_SECONDS = 60.0


def available_sandboxes() -> list[str]:
    return [name for name in SELECTED if not isinstance(_make_backend(name), str)]


def quick_sandbox() -> str:
    """The quickest local sandbox this machine runs: the process backend, or bwrap where the
    process backend refuses (root in a container without CAP_SYS_ADMIN cannot confine it)."""
    found = [name for name in ("process", "bwrap") if name in available_sandboxes()]
    if not found:
        pytest.skip("no local sandbox (process or bwrap) is available")
    return found[0]


def default_sandbox() -> str:
    found = [name for name in ("bwrap", "process") if name in available_sandboxes()]
    if not found:
        pytest.skip("no local sandbox (bwrap or process) is available")
    return found[0]


@pytest.fixture(scope="module")
async def exec_url(backend: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    if backend == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('exec') / 'exec.db'}"
    else:
        url = f"{POSTGRES_URL}_exec"
        await _reset_postgres(url)
    migrator = Database(url)
    try:
        await upgrade(migrator)
    finally:
        await migrator.dispose()
    return url


@dataclass
class Platform:
    app: Starlette
    client: httpx.AsyncClient
    database: Database
    settings: Settings
    headers: Callable[..., dict[str, str]]
    idp: LocalIdentityProvider

    @property
    def execution(self) -> Execution:
        execution: Execution = self.app.state.execution
        return execution

    @property
    def runtime(self) -> WorkerRuntime:
        runtime = self.execution.runtime
        assert runtime is not None
        return runtime

    async def user(self, username: str = "alice") -> Principal:
        return await create_user(self.database, self.idp, username)

    async def execute(self, path: str, inputs: Any, wait: float | None = None, **kw: Any) -> Any:
        params = {} if wait is None else {"wait": wait}
        headers = kw.pop("headers", None) or self.headers("alice")
        return await self.client.post(
            path, json={"inputs": inputs}, params=params, headers=headers, **kw
        )


@contextlib.asynccontextmanager
async def running_platform(
    url: str, idp: LocalIdentityProvider, tmp_path: Path, sandbox: str, **overrides: Any
) -> AsyncIterator[Platform]:
    options: dict[str, Any] = {
        "database_url": url,
        "oidc_issuer": idp.issuer,
        "sandbox": sandbox,
        "sandbox_timeout_seconds": TEST_TIMEOUT,
        "code_cache_dir": tmp_path / "code-cache",
        "sweeper_interval_seconds": 3600,
        "inprocess_worker_threads": 2,
    }
    options.update(overrides)
    settings = Settings(_env_file=None, **options)  # type: ignore[call-arg]
    database = Database(url)
    app = create_app(settings, database)
    lifespan = app.router.lifespan_context(app)
    try:
        await lifespan.__aenter__()
        try:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://cg.test") as client:
                yield Platform(app, client, database, settings, idp.headers, idp)
        finally:
            await within(
                SHUTDOWN_SECONDS,
                lifespan.__aexit__(None, None, None),
                "the app's shutdown",
                inside=getattr(lifespan, "gen", None),
            )
    finally:
        await within(SHUTDOWN_SECONDS, database.dispose(), "the database's disposal")


async def within(
    seconds: float, step: Coroutine[Any, Any, Any], what: str, inside: Any = None
) -> None:
    """Await `step`, failing the test with where it waits if it has not ended after `seconds`
    (a teardown that hangs fails its test, instead of stalling the suite). It runs as a task
    of its own, so a cancellation it would swallow cannot keep the wait from ending. `inside`:
    an async generator `step` drives (an async context manager's), whose place is shown too."""
    task = asyncio.ensure_future(step)
    await asyncio.wait({task}, timeout=seconds)
    if task.done():
        task.result()
        return
    places = [f"{what}: {_awaiting(task.get_coro())}"]
    if inside is not None:
        places.append(f"inside it: {_awaiting(inside)}")
    places += [
        f"task {other.get_name()}: {_awaiting(other.get_coro())}"
        for other in asyncio.all_tasks()
        if other is not task and other is not asyncio.current_task()
    ]
    task.cancel()
    pytest.fail(
        f"{what} had not ended after {seconds:g} s; where it and the loop's tasks wait:\n"
        + "\n".join(places),
        pytrace=False,
    )


def _awaiting(awaitable: Any) -> str:
    """Where a suspended coroutine (or async generator) waits: each frame of its await chain,
    then what the innermost awaits."""
    places = []
    while True:
        frame = getattr(awaitable, "cr_frame", None) or getattr(awaitable, "ag_frame", None)
        if frame is None:
            break
        places.append(f"{frame.f_code.co_filename}:{frame.f_lineno} {frame.f_code.co_name}")
        awaitable = getattr(awaitable, "cr_await", None) or getattr(awaitable, "ag_await", None)
    return " > ".join([*places, repr(awaitable)])


@pytest.fixture
async def platform(
    exec_url: str, identity_provider: LocalIdentityProvider, tmp_path: Path
) -> AsyncIterator[Platform]:
    async with running_platform(exec_url, identity_provider, tmp_path, default_sandbox()) as p:
        yield p


@pytest.fixture(params=SELECTED)
async def any_sandbox_platform(
    request: pytest.FixtureRequest,
    exec_url: str,
    identity_provider: LocalIdentityProvider,
    tmp_path: Path,
) -> AsyncIterator[Platform]:
    found = _make_backend(str(request.param))
    if isinstance(found, str):
        pytest.skip(found)
    async with running_platform(exec_url, identity_provider, tmp_path, str(request.param)) as p:
        yield p
