"""The GraphQL door of publishing: mutations, the graph package -> versions -> functions ->
versions through loaders (with a statement ceiling), addressing, contract error codes."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from calcgraph.demo import package_files
from calcgraph.settings import Settings
from tests.packages.publishing import Bearer, demo_body, small_body

PUBLISH = """
mutation($manifest: JSON!, $files: JSON!, $visibility: Visibility) {
  publishPackage(manifest: $manifest, files: $files, visibility: $visibility) {
    packageId package packageVersion isLatest
    functions { id name version versionId status endpoint isBreakingChange }
  }
}
"""

GRAPH = """
query($package: String!) {
  packageVersions(package: $package) {
    currentVersion
    package { name versions { version } }
    versions {
      version isLatest isStable gitRef
      functions {
        name version status
        functionVersion { version handler codeChecksum typed versions { version } }
      }
    }
  }
}
"""


async def gql(
    client: httpx.AsyncClient,
    query: str,
    headers: dict[str, str],
    variables: dict[str, Any] | None = None,
) -> dict[str, Any]:
    response = await client.post(
        "/graphql", json={"query": query, "variables": variables or {}}, headers=headers
    )
    body: dict[str, Any] = response.json()
    return body


def codes(body: dict[str, Any]) -> list[str]:
    return [e["extensions"]["code"] for e in body.get("errors", [])]


async def publish(
    client: httpx.AsyncClient, headers: dict[str, str], body: dict[str, Any]
) -> dict[str, Any]:
    result = await gql(client, PUBLISH, headers, body)
    assert "errors" not in result, result
    report: dict[str, Any] = result["data"]["publishPackage"]
    return report


async def test_publish_and_walk_the_graph(client: httpx.AsyncClient, bearer: Bearer) -> None:
    alice = bearer("alice")
    first = await publish(client, alice, demo_body())
    assert first["packageVersion"] == "1.2.0"
    assert {f["status"] for f in first["functions"]} == {"new"}
    changed = package_files()["checks.py"].replace("125.0", "150.0")
    second = await publish(client, alice, demo_body("1.3.0", files={"checks.py": changed}))
    assert second["isLatest"] is True

    body = await gql(client, GRAPH, alice, {"package": "demo-beam"})
    assert "errors" not in body, body
    history = body["data"]["packageVersions"]
    assert history["currentVersion"] == "1.3.0"
    assert [v["version"] for v in history["package"]["versions"]] == ["1.2.0", "1.3.0"]
    newest = history["versions"][1]
    assert newest["isLatest"] is True
    assert newest["gitRef"] is None
    verdict = next(f for f in newest["functions"] if f["name"] == "verdict")
    assert verdict["status"] == "updated"
    assert verdict["functionVersion"]["handler"] == "checks:verdict"
    assert [v["version"] for v in verdict["functionVersion"]["versions"]] == ["1.2.0", "1.2.1"]

    # From a package, as the identity door serves it.
    query = """query($id: ID!) { package(id: $id) { versions { version }
        functions { name currentVersion versions { version deprecated } } } }"""
    body = await gql(client, query, alice, {"id": first["packageId"]})
    assert "errors" not in body, body
    functions = {f["name"]: f for f in body["data"]["package"]["functions"]}
    assert [v["version"] for v in functions["cantilever"]["versions"]] == ["1.2.0"]
    assert functions["verdict"]["currentVersion"] == "1.2.1"


async def test_function_versions_and_resolution(client: httpx.AsyncClient, bearer: Bearer) -> None:
    alice = bearer("alice")
    report = await publish(client, alice, demo_body())
    query = """{ functionVersions(function: "cantilever") { package currentVersion
        versions { version packageVersion status deprecated } } }"""
    body = await gql(client, query, alice)
    assert body["data"]["functionVersions"] == {
        "package": "demo-beam",
        "currentVersion": "1.2.0",
        "versions": [
            {"version": "1.2.0", "packageVersion": "1.2.0", "status": "new", "deprecated": False}
        ],
    }
    resolve = "query($ref: String!) { resolveFunction(reference: $ref) { id version } }"
    body = await gql(client, resolve, alice, {"ref": "demo-beam/verdict@latest"})
    verdict = next(f for f in report["functions"] if f["name"] == "verdict")
    assert body["data"]["resolveFunction"] == {"id": verdict["versionId"], "version": "1.2.0"}
    missing = await gql(client, resolve, alice, {"ref": "demo-beam/verdict@2.0.0"})
    assert codes(missing) == ["NotFound"]
    assert missing["errors"][0]["extensions"]["versions"] == ["1.2.0"]


async def test_errors_carry_contract_codes(client: httpx.AsyncClient, bearer: Bearer) -> None:
    alice = bearer("alice")
    await publish(client, alice, small_body("gql-errors", "1.0.0"))
    again = await gql(client, PUBLISH, alice, small_body("gql-errors", "1.0.0"))
    assert codes(again) == ["Conflict"]
    hidden = await gql(client, GRAPH, bearer("bob"), {"package": "gql-errors"})
    assert codes(hidden) == ["PermissionDenied"]
    foreign = await gql(client, PUBLISH, bearer("bob"), small_body("gql-errors", "1.1.0"))
    assert codes(foreign) == ["PermissionDenied"]
    bad = await gql(client, PUBLISH, alice, {"manifest": {"kind": "package"}, "files": {}})
    assert codes(bad) == ["ValidationError"]
    anonymous = await gql(client, GRAPH, {}, {"package": "gql-errors"})
    assert codes(anonymous) == ["Unauthenticated"]

    visibility = """mutation { setPackageVisibility(package: "gql-errors", visibility: public)
        { visibility } }"""
    assert codes(await gql(client, visibility, bearer("bob"))) == ["PermissionDenied"]
    body = await gql(client, visibility, alice)
    assert body["data"] == {"setPackageVisibility": {"visibility": "public"}}
    assert "errors" not in await gql(client, GRAPH, bearer("bob"), {"package": "gql-errors"})


@pytest.fixture
def settings(settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """Local git deploys from the tests' temporary folders only."""
    return settings.model_copy(update={"git_local_roots": [tmp_path_factory.getbasetemp()]})


@pytest.fixture
def tagged_repo(tmp_path: Path) -> tuple[Path, str]:
    """A repository of the demo package tagged v1.2.0, and its commit."""
    if subprocess.run(["git", "--version"], capture_output=True).returncode != 0:
        pytest.skip("git is not installed")
    run = ["git", "-c", "user.name=T", "-c", "user.email=t@example.com"]
    subprocess.run([*run, "init", "-q", "-b", "main"], cwd=tmp_path, check=True)
    for name, source in package_files().items():
        (tmp_path / name).write_text(source)
    subprocess.run([*run, "add", "-A"], cwd=tmp_path, check=True)
    subprocess.run([*run, "commit", "-q", "-m", "demo"], cwd=tmp_path, check=True)
    subprocess.run([*run, "tag", "v1.2.0"], cwd=tmp_path, check=True)
    sha = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=tmp_path, check=True, capture_output=True, text=True
    ).stdout.strip()
    return tmp_path, sha


async def test_publish_from_git(
    client: httpx.AsyncClient, bearer: Bearer, tagged_repo: tuple[Path, str]
) -> None:
    repo, sha = tagged_repo
    mutation = """mutation($url: String!) { publishPackageFromGit(gitUrl: $url, ref: "v1.2.0")
        { packageVersion gitRef gitCommit } }"""
    body = await gql(client, mutation, bearer("alice"), {"url": repo.as_uri()})
    assert body["data"] == {
        "publishPackageFromGit": {"packageVersion": "1.2.0", "gitRef": "v1.2.0", "gitCommit": sha}
    }


@pytest.fixture
def statements(engine: AsyncEngine) -> Iterator[list[str]]:
    seen: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if not statement.lstrip().upper().startswith(("SAVEPOINT", "RELEASE", "ROLLBACK")):
            seen.append(statement)

    event.listen(engine.sync_engine, "before_cursor_execute", count)
    yield seen
    event.remove(engine.sync_engine, "before_cursor_execute", count)


async def test_nested_versions_do_not_grow_the_statement_count(
    client: httpx.AsyncClient, bearer: Bearer, statements: list[str]
) -> None:
    alice = bearer("alice")
    query = """{ packages { items { name versions { version functions { name
        functionVersion { version versions { version } } } } } } }"""
    counts = []
    for batch in (1, 3):
        for i in range(batch):
            for version in ("1.0.0", "1.1.0"):
                code = f"def run(x):\n    return {{'y': x + {version[2]}}}\n"
                await publish(client, alice, small_body(f"n{batch}-{i}", version, code=code))
        statements.clear()
        body = await gql(client, query, alice)
        assert "errors" not in body, body
        counts.append(len(statements))
    assert counts[0] == counts[1], counts
    assert counts[1] <= 12, statements
