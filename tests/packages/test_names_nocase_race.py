"""Issue 27, point 6 (contract 8b): package names are unique without regard to case at the
database, not only in the service: first deployments of one name in different cases, raced,
create one package (201) and are refused 409 `Conflict` otherwise; and the unique indexes on
lower(name) refuse a second row even when no service check runs.

Like `test_publish_concurrency.py`, the app gets a real `Database` (own pool, real commits)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError

from calcgraph.app import create_app
from calcgraph.db.base import new_id
from calcgraph.db.engine import Database
from calcgraph.domain.access.models import User
from calcgraph.domain.functions.models import Function
from calcgraph.domain.packages.models import Package
from calcgraph.settings import Settings
from tests.packages.publishing import Bearer, small_body

pytestmark = pytest.mark.db

STEM = f"Race-{uuid.uuid4().hex[:8]}"
USERS = ("nocase-a", "nocase-b")


@pytest.fixture
async def real_database(database_url: str) -> AsyncIterator[Database]:
    database = Database(database_url)
    try:
        yield database
    finally:
        async with database.write_session() as session:
            await session.execute(delete(Package).where(func.lower(Package.name) == STEM.lower()))
            await session.execute(delete(User).where(User.username.in_(USERS)))
        await database.dispose()


@pytest.fixture
async def racing_client(
    settings: Settings, real_database: Database
) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(settings, real_database))
    async with httpx.AsyncClient(transport=transport, base_url="http://calcgraph.test") as c:
        yield c


async def test_first_publishes_in_different_case_raced(
    racing_client: httpx.AsyncClient, real_database: Database, bearer: Bearer
) -> None:
    for user in USERS:  # provisioned before the race
        assert (await racing_client.get("/packages", headers=bearer(user))).status_code == 200
    names = [STEM, STEM.lower(), STEM.upper(), STEM.swapcase()]
    responses = await asyncio.gather(
        *(
            racing_client.post(
                "/packages", json=small_body(name, "1.0.0"), headers=bearer(USERS[i % 2])
            )
            for i, name in enumerate(names)
        )
    )
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [201, 409, 409, 409], [r.text for r in responses]
    for response in responses:
        if response.status_code == 409:
            assert response.json()["detail"].startswith("Conflict: "), response.text
    async with real_database.read_session() as session:
        stored = list(
            await session.scalars(
                select(Package.name).where(func.lower(Package.name) == STEM.lower())
            )
        )
    [created] = [r.json() for r in responses if r.status_code == 201]
    assert stored == [created["package"]]

    # The database itself holds the rule, whatever the service checks.
    package = await _package(real_database, created["package"])
    with pytest.raises(IntegrityError):
        async with real_database.write_session() as session:
            session.add(
                Package(
                    id=new_id(),
                    name=package.name.swapcase(),
                    owner_id=package.owner_id,
                    visibility="private",
                )
            )
    [function] = await _functions(real_database, package.id)
    with pytest.raises(IntegrityError):
        async with real_database.write_session() as session:
            session.add(Function(id=new_id(), name=function.swapcase(), package_id=package.id))


async def _package(database: Database, name: str) -> Package:
    async with database.read_session() as session:
        package = await session.scalar(select(Package).where(Package.name == name))
        assert package is not None
        return package


async def _functions(database: Database, package_id: str) -> list[str]:
    async with database.read_session() as session:
        return list(
            await session.scalars(select(Function.name).where(Function.package_id == package_id))
        )
