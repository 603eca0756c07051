"""Concurrent deployments of one package never produce two versions with one number.

The `database` fixture cannot show this: its sessions share one connection in one outer
transaction and take turns. Here the app gets a real `Database` on the test URL (its own
pool, real transactions, real commits), the requests run concurrently with
`asyncio.gather`, and the rows are deleted at the end.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlalchemy import delete, select

from calcgraph.app import create_app
from calcgraph.db.engine import Database
from calcgraph.domain.access.models import User
from calcgraph.domain.functions.models import Function, FunctionVersion
from calcgraph.domain.packages.models import CodeBlob, Package, PackageVersion
from calcgraph.domain.packages.publishing.writing.service import sha256_hex
from calcgraph.settings import Settings
from tests.packages.publishing import Bearer, small_body

RACERS = 4
PACKAGES = ("race-new", "race-same", "race-many")
USER = "racer"


@pytest.fixture
async def real_database(database_url: str) -> AsyncIterator[Database]:
    database = Database(database_url)
    try:
        yield database
    finally:
        async with database.write_session() as session:
            await session.execute(delete(Package).where(Package.name.in_(PACKAGES)))
            await session.execute(delete(User).where(User.username == USER))
            codes = [_code(i) for i in range(RACERS)] + [
                small_body("x", "1.0.0")["files"]["main.py"]
            ]
            await session.execute(
                delete(CodeBlob).where(CodeBlob.sha256.in_([sha256_hex(c.encode()) for c in codes]))
            )
        await database.dispose()


@pytest.fixture
async def racing_client(
    settings: Settings, real_database: Database
) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(settings, real_database))
    async with httpx.AsyncClient(transport=transport, base_url="http://calcgraph.test") as c:
        yield c


def _code(i: int) -> str:
    return f"def run(x):\n    return {{'y': x + {i}}}\n"


async def _race(client: httpx.AsyncClient, bodies: list[dict[str, Any]], headers: Any) -> list[int]:
    responses = await asyncio.gather(
        *(client.post("/packages", json=body, headers=headers) for body in bodies)
    )
    for response in responses:
        assert response.status_code in (201, 409), response.text
        if response.status_code == 409:
            assert response.json()["detail"].startswith("Conflict: ")
    return [r.status_code for r in responses]


async def _versions(database: Database, name: str) -> list[tuple[str, bool]]:
    async with database.read_session() as session:
        rows = await session.execute(
            select(PackageVersion.version, PackageVersion.is_latest)
            .join(Package, Package.id == PackageVersion.package_id)
            .where(Package.name == name)
            .order_by(PackageVersion.version)
        )
        return [(v, bool(latest)) for v, latest in rows]


async def test_concurrent_deployments(
    racing_client: httpx.AsyncClient, real_database: Database, bearer: Bearer
) -> None:
    headers = bearer(USER)
    assert (await racing_client.get("/packages", headers=headers)).status_code == 200

    # The very first deployment of a package, raced: one creates it, the others are refused.
    bodies = [small_body("race-new", "1.0.0", code=_code(i)) for i in range(RACERS)]
    statuses = await _race(racing_client, bodies, headers)
    assert statuses.count(201) == 1
    assert await _versions(real_database, "race-new") == [("1.0.0", True)]

    # One new version of an existing package, raced: exactly one row with that number.
    first = await racing_client.post(
        "/packages", json=small_body("race-same", "1.0.0"), headers=headers
    )
    assert first.status_code == 201
    bodies = [small_body("race-same", "1.1.0", code=_code(i)) for i in range(RACERS)]
    statuses = await _race(racing_client, bodies, headers)
    assert statuses.count(201) == 1
    assert await _versions(real_database, "race-same") == [("1.0.0", False), ("1.1.0", True)]

    # Different versions at once: all are hosted, and exactly one is latest.
    bodies = [small_body("race-many", f"1.{i}.0", code=_code(i)) for i in range(RACERS)]
    statuses = await _race(racing_client, bodies, headers)
    assert statuses == [201] * RACERS
    versions = await _versions(real_database, "race-many")
    assert [v for v, _ in versions] == [f"1.{i}.0" for i in range(RACERS)]
    assert [v for v, latest in versions if latest] == [f"1.{RACERS - 1}.0"]
    async with real_database.read_session() as session:
        numbers = list(
            await session.scalars(
                select(FunctionVersion.version)
                .join(Function, Function.id == FunctionVersion.function_id)
                .join(Package, Package.id == Function.package_id)
                .where(Package.name == "race-many")
            )
        )
    assert len(numbers) == len(set(numbers)) == RACERS  # the auto rule's bumps never collide
