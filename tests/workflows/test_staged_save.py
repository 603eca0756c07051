"""Issue 27: saving a large workflow type checks its graph, and creating a run of one plans it,
for seconds of CPU; neither may hold a pooled connection (nor SQLite's write lock) meanwhile,
or every other request of the process waits for it. Here the API process has one pooled
connection; while the validator (or the planner) of a large save (or run) is held on its
thread, another caller's read and write are answered, and the save still succeeds after."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from calcgraph.app import create_app
from calcgraph.db.engine import Database
from calcgraph.domain.runs.create import service as create_service
from calcgraph.domain.spend import OFF_LOOP_NODES
from calcgraph.domain.workflows import checking
from calcgraph.settings import Settings
from tests.auth.idp import LocalIdentityProvider
from tests.packages.publishing import small_body
from tests.workflows.graphs import fn, inp

pytestmark = pytest.mark.db

WIDTH = 4 * OFF_LOOP_NODES  # a few thousand nodes: large, validated and planned on a thread
HOLD_S = 30.0  # how long a held validator waits for the other caller before giving up


@dataclass
class Held:
    """A pure step (validation, planning) of a large graph, held on its thread until the test
    lets it go; what it saw of the pool when it started."""

    database: Database
    entered: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    checked_out: list[int] = field(default_factory=list)
    released: list[bool] = field(default_factory=list)
    """Per large call: whether the test let it go (False: it waited HOLD_S in vain)."""

    def wrap(self, step: Callable[..., Any], nodes: Callable[..., int]) -> Callable[..., Any]:
        loop_thread = threading.get_ident()

        def held(*args: Any) -> Any:
            if nodes(*args) < WIDTH:
                return step(*args)
            self.checked_out.append(self.database.engine.pool.checkedout())
            self.entered.set()
            # On the event loop's thread it could never see the other caller's answer.
            on_thread = threading.get_ident() != loop_thread
            self.released.append(on_thread and self.release.wait(HOLD_S))
            return step(*args)

        return held


@pytest.fixture
async def one_connection(
    database_url: str, identity_provider: LocalIdentityProvider
) -> AsyncIterator[tuple[httpx.AsyncClient, Database]]:
    """An API process with one pooled connection and short waits for it (PostgreSQL's pool,
    SQLite's write lock): a request that cannot get one fails fast rather than hangs."""
    settings = Settings(  # type: ignore[call-arg]
        database_url=database_url,
        oidc_issuer=identity_provider.issuer,
        _env_file=None,
        database_pool_size=1,
        database_max_overflow=0,
        database_pool_timeout_seconds=3,
        sqlite_busy_timeout_ms=1000,
    )
    database = Database.from_settings(settings)
    transport = httpx.ASGITransport(app=create_app(settings, database))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://calcgraph.test") as c:
            yield c, database
    finally:
        await database.dispose()


@pytest.fixture
def user(identity_provider: LocalIdentityProvider) -> dict[str, str]:
    # Its rows are committed (no test transaction around this process): a user of its own.
    return identity_provider.headers(f"staged-{uuid.uuid4().hex[:8]}")


def _graph(pkg: str, width: int) -> dict[str, Any]:
    return {"nodes": [inp("x"), *(fn(f"n{i}", f"{pkg}/run", x="x") for i in range(width))]}


async def _meanwhile(
    client: httpx.AsyncClient, headers: dict[str, str], held: Held, slow: asyncio.Task[Any]
) -> None:
    """While `slow` is held in its pure step: a read and a write of another caller answered,
    then the step let go."""
    assert await asyncio.to_thread(held.entered.wait, HOLD_S), "the large step never started"
    try:
        read = await client.get("/workflows", headers=headers)
        assert read.status_code == 200, read.text
        other = f"other-{uuid.uuid4().hex[:8]}"
        wrote = await client.post("/packages", json=small_body(other, "1.0.0"), headers=headers)
        assert wrote.status_code == 201, wrote.text
        assert not slow.done()
    finally:
        held.release.set()


async def _published(client: httpx.AsyncClient, headers: dict[str, str]) -> str:
    pkg = f"staged-{uuid.uuid4().hex[:8]}"
    published = await client.post("/packages", json=small_body(pkg, "1.0.0"), headers=headers)
    assert published.status_code == 201, published.text
    return pkg


@pytest.mark.parametrize("save", ["create", "update"])
async def test_a_large_save_validates_holding_no_connection(
    one_connection: tuple[httpx.AsyncClient, Database],
    user: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    save: str,
) -> None:
    client, database = one_connection
    held = Held(database)
    monkeypatch.setattr(
        checking,
        "validate",
        held.wrap(checking.validate, lambda graph, _signatures: len(graph.nodes)),
    )
    pkg = await _published(client, user)
    slug = f"staged-{uuid.uuid4().hex[:8]}"
    body = {"slug": slug, "name": slug, "graph": _graph(pkg, WIDTH)}
    if save == "create":
        request = client.post("/workflows", json=body, headers=user)
    else:
        small = {**body, "graph": _graph(pkg, 2)}
        created = await client.post("/workflows", json=small, headers=user)
        assert created.status_code == 201, created.text[:500]
        request = client.put(f"/workflows/{slug}", json={"graph": body["graph"]}, headers=user)
    saving = asyncio.create_task(request)
    try:
        await _meanwhile(client, user, held, saving)
    finally:
        held.release.set()
        saved = await saving
    assert saved.status_code == (201 if save == "create" else 200), saved.text[:500]
    assert saved.json()["latest_version"] == (1 if save == "create" else 2)
    assert held.checked_out == [0]  # no connection held while it validated
    assert held.released == [True]  # it validated until the other caller had its answers


async def test_a_large_run_is_planned_holding_no_connection(
    one_connection: tuple[httpx.AsyncClient, Database],
    user: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client, database = one_connection
    pkg = await _published(client, user)
    slug = f"staged-{uuid.uuid4().hex[:8]}"
    body = {"slug": slug, "name": slug, "graph": _graph(pkg, WIDTH)}
    created = await client.post("/workflows", json=body, headers=user)
    assert created.status_code == 201, created.text[:500]
    held = Held(database)
    monkeypatch.setattr(
        create_service,
        "planned_version",
        held.wrap(
            create_service.planned_version, lambda version, _defaults: len(version.graph["nodes"])
        ),
    )
    starting = asyncio.create_task(
        client.post(f"/workflows/{slug}/runs", json={"inputs": {"x": 1}}, headers=user)
    )
    try:
        await _meanwhile(client, user, held, starting)
    finally:
        held.release.set()
        started = await starting
    assert started.status_code == 201, started.text[:500]
    assert set(started.json()["node_states"]) == {f"n{i}" for i in range(WIDTH)}
    assert held.checked_out == [0]
    assert held.released == [True]


async def test_a_version_hidden_while_the_save_validates_is_not_saved(
    one_connection: tuple[httpx.AsyncClient, Database],
    identity_provider: LocalIdentityProvider,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The write checks again that every resolved version is still visible to the saver: a
    package made private while the save validated makes the save start over, and it is
    refused as any save after that change (422, the reference unknown), not saved with a
    version its author may no longer see."""
    client, database = one_connection
    owner = identity_provider.headers(f"owner-{uuid.uuid4().hex[:8]}")
    saver = identity_provider.headers(f"saver-{uuid.uuid4().hex[:8]}")
    pkg = f"staged-{uuid.uuid4().hex[:8]}"
    body = small_body(pkg, "1.0.0", visibility="public")
    published = await client.post("/packages", json=body, headers=owner)
    assert published.status_code == 201, published.text
    held = Held(database)
    monkeypatch.setattr(
        checking,
        "validate",
        held.wrap(checking.validate, lambda graph, _signatures: len(graph.nodes)),
    )
    slug = f"staged-{uuid.uuid4().hex[:8]}"
    saving = asyncio.create_task(
        client.post(
            "/workflows",
            json={"slug": slug, "name": slug, "graph": _graph(pkg, WIDTH)},
            headers=saver,
        )
    )
    try:
        assert await asyncio.to_thread(held.entered.wait, HOLD_S)
        hidden = await client.patch(
            f"/packages/{published.json()['package_id']}",
            json={"visibility": "private"},
            headers=owner,
        )
        assert hidden.status_code == 200, hidden.text
    finally:
        held.release.set()
        saved = await saving
    assert saved.status_code == 422, saved.text[:500]
    unknown = saved.json()["report"]["unknown_functions"]
    assert {p["node_key"] for p in unknown} == {f"n{i}" for i in range(WIDTH)}
    assert held.checked_out == [0, 0]  # validated twice, each time holding no connection
    gone = await client.get(f"/workflows/{slug}", headers=saver)
    assert gone.status_code == 404, gone.text
