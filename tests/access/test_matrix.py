"""The authorization matrix: every protected route and GraphQL field x {anonymous, owner,
org member, non-member, admin} x {private, internal, public}, generated from one table.

Expected outcomes are written out here by hand, independently of `policy.py`, so a change of
the policy that is not also a change of this table shows up as mismatching cells.
Outcomes: an HTTP status; `listed`/`hidden` for whether a listing contains the package's row;
for GraphQL `ok` or the error code (`Unauthenticated`, `PermissionDenied`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from calcgraph.db.engine import Database
from calcgraph.domain.access.models import Membership, Organization
from calcgraph.domain.access.principal import Principal
from tests.access.factories import (
    PackageRows,
    create_job,
    create_organization,
    create_package,
    create_user,
)
from tests.auth.idp import LocalIdentityProvider

ROLES = ("anonymous", "owner", "member", "outsider", "admin")
VISIBILITIES = ("private", "internal", "public")


@dataclass
class World:
    client: httpx.AsyncClient
    database: Database
    headers: dict[str, dict[str, str]]
    rows: PackageRows
    jobs: dict[str, str]
    org: Organization
    extra: Principal

    def own_job(self, role: str) -> str:
        return self.jobs.get(role, self.jobs["owner"])


Probe = Callable[[World, str], Awaitable[str]]


def rest(method: str, path: Callable[[World, str], str], body: Any = None) -> Probe:
    async def probe(world: World, role: str) -> str:
        response = await world.client.request(
            method, path(world, role), json=body, headers=world.headers[role]
        )
        return str(response.status_code)

    return probe


def rest_listing(path: str, row: Callable[[World, str], str]) -> Probe:
    async def probe(world: World, role: str) -> str:
        response = await world.client.get(path, headers=world.headers[role])
        if response.status_code != 200:
            return str(response.status_code)
        listed = row(world, role) in {item["id"] for item in response.json()["items"]}
        return "listed" if listed else "hidden"

    return probe


def graphql(
    query: str,
    variables: Callable[[World, str], dict[str, Any]] = lambda w, r: {},
    listed: Callable[[dict[str, Any], World, str], bool] | None = None,
) -> Probe:
    async def probe(world: World, role: str) -> str:
        response = await world.client.post(
            "/graphql",
            json={"query": query, "variables": variables(world, role)},
            headers=world.headers[role],
        )
        body = response.json()
        if body.get("errors"):
            return str(body["errors"][0]["extensions"]["code"])
        if listed is not None:
            return "listed" if listed(body["data"], world, role) else "hidden"
        return "ok"

    return probe


def package_id(world: World, role: str) -> str:
    return world.rows.package_id


def function_id(world: World, role: str) -> str:
    return world.rows.function_id


def own_job(world: World, role: str) -> str:
    return world.own_job(role)


def item_ids(data: dict[str, Any], field: str) -> set[str]:
    return {item["id"] for item in data[field]["items"]}


U, PD, OK, L, H = "Unauthenticated", "PermissionDenied", "ok", "listed", "hidden"


def same(*cells: str) -> dict[str, tuple[str, ...]]:
    return {v: cells for v in VISIBILITIES}


# (name, probe, expected outcomes by visibility, in the order of ROLES)
TABLE: list[tuple[str, Probe, dict[str, tuple[str, ...]]]] = [
    (
        "GET /auth/me",
        rest("GET", lambda w, r: "/auth/me"),
        same("401", "200", "200", "200", "200"),
    ),
    (
        "GET /packages/{id}",
        rest("GET", lambda w, r: f"/packages/{w.rows.package_id}"),
        {
            "private": ("401", "200", "403", "403", "200"),
            "internal": ("401", "200", "200", "403", "200"),
            "public": ("401", "200", "200", "200", "200"),
        },
    ),
    (
        "GET /packages",
        rest_listing("/packages", package_id),
        {
            "private": ("401", L, H, H, L),
            "internal": ("401", L, L, H, L),
            "public": ("401", L, L, L, L),
        },
    ),
    (
        "GET /functions",
        rest_listing("/functions", function_id),
        {
            "private": ("401", L, H, H, L),
            "internal": ("401", L, L, H, L),
            "public": ("401", L, L, L, L),
        },
    ),
    (
        "GET /jobs (own job)",
        rest_listing("/jobs", own_job),
        {
            "private": ("401", L, H, H, L),
            "internal": ("401", L, L, H, L),
            "public": ("401", L, L, L, L),
        },
    ),
    (
        "GET /jobs/{own job}",
        rest("GET", lambda w, r: f"/jobs/{w.own_job(r)}"),
        {
            "private": ("401", "200", "403", "403", "200"),
            "internal": ("401", "200", "200", "403", "200"),
            "public": ("401", "200", "200", "200", "200"),
        },
    ),
    (
        "GET /jobs/{owner's job}",
        rest("GET", lambda w, r: f"/jobs/{w.jobs['owner']}"),
        same("401", "200", "403", "403", "200"),
    ),
    (
        "GET /organizations/{slug}",
        rest("GET", lambda w, r: f"/organizations/{w.org.slug}"),
        same("401", "200", "200", "403", "200"),
    ),
    (
        "POST /organizations/{slug}/members",
        rest(
            "POST",
            lambda w, r: f"/organizations/{w.org.slug}/members",
            {"username": "extra", "role": "member"},
        ),
        same("401", "201", "403", "403", "201"),
    ),
    (
        "DELETE /organizations/{slug}/members/{username}",
        rest("DELETE", lambda w, r: f"/organizations/{w.org.slug}/members/extra"),
        same("401", "204", "403", "403", "204"),
    ),
    (
        "POST /packages/{name}/functions/{name}/execute",
        rest(
            "POST",
            lambda w, r: "/packages/pkg/functions/solve/execute?wait=0",
            {"inputs": {}},
        ),
        {
            "private": ("401", "202", "403", "403", "202"),
            "internal": ("401", "202", "202", "403", "202"),
            "public": ("401", "202", "202", "202", "202"),
        },
    ),
    (
        "POST /functions/{id}/execute",
        rest(
            "POST", lambda w, r: f"/functions/{w.rows.function_id}/execute?wait=0", {"inputs": {}}
        ),
        {
            "private": ("401", "202", "403", "403", "202"),
            "internal": ("401", "202", "202", "403", "202"),
            "public": ("401", "202", "202", "202", "202"),
        },
    ),
    ("gql me", graphql("{ me { id } }"), same(U, OK, OK, OK, OK)),
    (
        "gql package(id)",
        graphql(
            "query($id: ID!) { package(id: $id) { id name } }",
            lambda w, r: {"id": w.rows.package_id},
        ),
        {
            "private": (U, OK, PD, PD, OK),
            "internal": (U, OK, OK, PD, OK),
            "public": (U, OK, OK, OK, OK),
        },
    ),
    (
        "gql package(id).functions",
        graphql(
            "query($id: ID!) { package(id: $id) { functions { id } } }",
            lambda w, r: {"id": w.rows.package_id},
        ),
        {
            "private": (U, OK, PD, PD, OK),
            "internal": (U, OK, OK, PD, OK),
            "public": (U, OK, OK, OK, OK),
        },
    ),
    (
        "gql package(id).organization",
        graphql(
            "query($id: ID!) { package(id: $id) { organization { slug members { username } } } }",
            lambda w, r: {"id": w.rows.package_id},
        ),
        {
            "private": (U, OK, PD, PD, OK),
            "internal": (U, OK, OK, PD, OK),
            "public": (U, OK, OK, PD, OK),
        },
    ),
    (
        "gql packages",
        graphql(
            "{ packages { items { id } } }",
            listed=lambda d, w, r: w.rows.package_id in item_ids(d, "packages"),
        ),
        {"private": (U, L, H, H, L), "internal": (U, L, L, H, L), "public": (U, L, L, L, L)},
    ),
    (
        "gql functions { package }",
        graphql(
            "{ functions { items { id package { id } } } }",
            listed=lambda d, w, r: w.rows.function_id in item_ids(d, "functions"),
        ),
        {"private": (U, L, H, H, L), "internal": (U, L, L, H, L), "public": (U, L, L, L, L)},
    ),
    (
        "gql jobs { package function }",
        graphql(
            "{ jobs { items { id package { id } function { id } } } }",
            listed=lambda d, w, r: w.own_job(r) in item_ids(d, "jobs"),
        ),
        {"private": (U, L, H, H, L), "internal": (U, L, L, H, L), "public": (U, L, L, L, L)},
    ),
    (
        "gql job(own) { package function }",
        graphql(
            "query($id: ID!) { job(id: $id) { id package { id } function { id } } }",
            lambda w, r: {"id": w.own_job(r)},
        ),
        {
            "private": (U, OK, PD, PD, OK),
            "internal": (U, OK, OK, PD, OK),
            "public": (U, OK, OK, OK, OK),
        },
    ),
    (
        "gql job(owner's)",
        graphql("query($id: ID!) { job(id: $id) { id } }", lambda w, r: {"id": w.jobs["owner"]}),
        same(U, OK, PD, PD, OK),
    ),
    (
        "gql organization(slug)",
        graphql(
            "query($s: String!) { organization(slug: $s) { slug members { role } } }",
            lambda w, r: {"s": w.org.slug},
        ),
        same(U, OK, OK, PD, OK),
    ),
    (
        "gql organization(slug).packages",
        graphql(
            "query($s: String!) { organization(slug: $s) { packages { id } } }",
            lambda w, r: {"s": w.org.slug},
            listed=lambda d, w, r: (
                w.rows.package_id in {p["id"] for p in d["organization"]["packages"]}
            ),
        ),
        {
            "private": (U, L, H, PD, L),
            "internal": (U, L, L, PD, L),
            "public": (U, L, L, PD, L),
        },
    ),
    (
        "gql mutation addMember",
        graphql(
            'mutation($s: String!) { addMember(slug: $s, username: "extra") { role } }',
            lambda w, r: {"s": w.org.slug},
        ),
        same(U, OK, PD, PD, OK),
    ),
]


async def ensure_member(database: Database, org: Organization, user: Principal) -> None:
    async with database.write_session() as session:
        await session.merge(Membership(organization_id=org.id, user_id=user.user_id, role="member"))


async def build_world(
    client: httpx.AsyncClient,
    database: Database,
    idp: LocalIdentityProvider,
    visibility: str,
) -> World:
    roles = {"owner": ("user",), "member": ("user",), "outsider": ("user",)}
    users = {name: await create_user(database, idp, name, r) for name, r in roles.items()}
    users["admin"] = await create_user(database, idp, "admin", ("admin", "user"))
    extra = await create_user(database, idp, "extra")
    org = await create_organization(
        database, "acme", {users["owner"]: "owner", users["member"]: "member"}
    )
    rows = await create_package(database, users["owner"], "pkg", visibility, org)
    jobs = {name: await create_job(database, rows, user) for name, user in users.items()}
    headers = {name: idp.headers(name, roles.get(name, ("admin", "user"))) for name in users}
    headers["anonymous"] = {}
    return World(client, database, headers, rows, jobs, org, extra)


def test_the_table_covers_every_cell() -> None:
    for name, _, expected in TABLE:
        assert set(expected) == set(VISIBILITIES), name
        assert all(len(cells) == len(ROLES) for cells in expected.values()), name
    assert len(TABLE) * len(ROLES) * len(VISIBILITIES) >= 300


@pytest.mark.parametrize("visibility", VISIBILITIES)
async def test_authorization_matrix(
    visibility: str,
    client: httpx.AsyncClient,
    database: Database,
    identity_provider: LocalIdentityProvider,
) -> None:
    world = await build_world(client, database, identity_provider, visibility)
    mismatches: list[str] = []
    for name, probe, expected in TABLE:
        for role, want in zip(ROLES, expected[visibility], strict=True):
            if name.startswith("DELETE"):
                await ensure_member(database, world.org, world.extra)
            got = await probe(world, role)
            if got != want:
                mismatches.append(f"{name} | {role} | {visibility}: expected {want}, got {got}")
    assert mismatches == []
