"""Every versioned call path resolves to exactly one function version (the service the
execute routes and workflows call), on both databases."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from calcgraph.db.engine import Database
from calcgraph.demo import package_files
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.errors import NotFound, PermissionDenied
from calcgraph.domain.functions.service import function_version_service
from calcgraph.domain.functions.views import ResolvedFunction
from calcgraph.domain.packages.addressing import ExecuteAddress
from tests.access.factories import create_user
from tests.auth.idp import LocalIdentityProvider
from tests.packages.publishing import Bearer, by_name, demo_body, publish


class World:
    def __init__(self, database: Database, alice: Principal, bob: Principal) -> None:
        self.database = database
        self.alice = alice
        self.bob = bob
        self.first: dict[str, Any] = {}
        self.second: dict[str, Any] = {}

    async def resolve(self, principal: Principal | None = None, **how: Any) -> ResolvedFunction:
        return await self.resolve_address(ExecuteAddress(**how), principal)

    async def call(self, package: str, function: str) -> ResolvedFunction:
        """The path segments of `/packages/{package}[@v]/functions/{function}[@v]/execute`."""
        return await self.resolve_address(ExecuteAddress.by_path(package, function))

    async def resolve_address(
        self, address: ExecuteAddress, principal: Principal | None = None
    ) -> ResolvedFunction:
        async with self.database.read_session() as session:
            return await function_version_service.resolve_function_version(
                session, principal or self.alice, address
            )

    def version_id(self, report: dict[str, Any], name: str) -> str:
        return str(by_name(report)[name]["version_id"])


@pytest.fixture
async def world(
    client: httpx.AsyncClient,
    bearer: Bearer,
    database: Database,
    identity_provider: LocalIdentityProvider,
) -> World:
    w = World(
        database,
        await create_user(database, identity_provider, "alice"),
        await create_user(database, identity_provider, "bob"),
    )
    w.first = await publish(client, bearer("alice"), demo_body())
    changed = package_files()["checks.py"].replace("125.0", "150.0")
    w.second = await publish(
        client, bearer("alice"), demo_body("1.3.0", files={"checks.py": changed})
    )
    return w


async def test_by_immutable_ids(world: World) -> None:
    pinned = world.version_id(world.first, "verdict")
    resolved = await world.resolve(function_id=pinned)
    assert resolved.version.id == pinned
    assert resolved.version.version == "1.2.0"
    assert resolved.function.name == "verdict"
    assert resolved.function.package == "demo-beam"
    function_id = by_name(world.first)["verdict"]["id"]
    current = await world.resolve(function_id=function_id)
    assert current.version.id == world.version_id(world.second, "verdict")
    with pytest.raises(NotFound):
        await world.resolve(function_id="no-such-id")
    with pytest.raises(PermissionDenied):
        await world.resolve(world.bob, function_id=pinned)


async def test_by_package_and_function(world: World) -> None:
    latest = await world.resolve(package="demo-beam", function="verdict")
    assert latest.version.version == "1.2.1"
    assert (
        await world.resolve(package="demo-beam", function="verdict", function_selector="latest")
    ) == latest
    exact = await world.resolve(package="demo-beam", function="verdict", function_selector="1.2.0")
    assert exact.version.id == world.version_id(world.first, "verdict")
    by_id = await world.resolve(package=world.first["package_id"], function="verdict")
    assert by_id == latest
    assert exact.version.handler == "checks:verdict"
    assert exact.version.inputs_schema is not None


async def test_by_package_version(world: World) -> None:
    old = await world.resolve(package="demo-beam", package_selector="1.2.0", function="verdict")
    assert old.version.id == world.version_id(world.first, "verdict")
    carried = await world.resolve(
        package="demo-beam", package_selector="1.3.0", function="cantilever"
    )
    assert carried.version.id == world.version_id(world.first, "cantilever")
    newest = await world.resolve(package="demo-beam", package_selector="latest", function="verdict")
    assert newest.version.version == "1.2.1"
    pinned_both = await world.resolve(
        package="demo-beam",
        package_selector="1.3.0",
        function="cantilever",
        function_selector="1.2.0",
    )
    assert pinned_both == carried


async def test_call_path_segments(world: World) -> None:
    assert (await world.call("demo-beam", "verdict@1.2.0")).version.version == "1.2.0"
    assert (await world.call("demo-beam", "verdict@latest")).version.version == "1.2.1"
    assert (await world.call("demo-beam@1.2.0", "verdict")).version.version == "1.2.0"
    assert (await world.call("demo-beam", "verdict")).version.version == "1.2.1"
    async with world.database.read_session() as session:
        ref = await function_version_service.resolve_reference(
            session, world.alice, "demo-beam/stress_check@1.2.0"
        )
        assert ref.version.id == world.version_id(world.first, "stress_check")
        by_id = await function_version_service.resolve_reference(
            session, world.alice, ref.version.id
        )
        assert by_id == ref


async def test_versions_that_do_not_exist_name_what_exists(world: World) -> None:
    with pytest.raises(NotFound) as missing:
        await world.call("demo-beam", "verdict@9.9.9")
    assert "1.2.0, 1.2.1" in missing.value.message
    assert missing.value.extra["versions"] == ["1.2.0", "1.2.1"]
    with pytest.raises(NotFound) as package_missing:
        await world.call("demo-beam@4.0.0", "verdict")
    assert package_missing.value.extra["versions"] == ["1.2.0", "1.3.0"]
    with pytest.raises(NotFound) as function_missing:
        await world.call("demo-beam@1.3.0", "nothing")
    assert "cantilever" in function_missing.value.message
    with pytest.raises(NotFound):
        await world.call("demo-beam", "nothing")
    with pytest.raises(NotFound):
        await world.call("no-package", "verdict")
    with pytest.raises(NotFound):
        await world.resolve(
            package="demo-beam",
            package_selector="1.3.0",
            function="cantilever",
            function_selector="1.2.1",
        )


async def test_hidden_package_is_permission_denied(world: World) -> None:
    with pytest.raises(PermissionDenied):
        await world.resolve(world.bob, package="demo-beam", function="verdict")
    with pytest.raises(PermissionDenied):
        await world.resolve(world.bob, package="demo-beam", package_selector="1.2.0", function="x")
