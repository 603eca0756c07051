"""GraphQL `submitFunction`, the browser's door to `POST /functions`: the same build service,
its refusals with the rule and line (validation) or the vulnerabilities (scan) in the error's
extensions, and no token refused before anything is built."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from calcgraph.settings import Settings
from tests.auth.idp import LocalIdentityProvider
from tests.builds.build_fixtures import VULNERABLE, build_settings
from tests.builds.test_build_api import CODE, IO

Bearer = Callable[..., dict[str, str]]
SUBMIT = """
mutation Submit($name: String!, $code: String!, $requirements: [String!], $inputs: JSON,
                $outputs: JSON) {
  submitFunction(name: $name, code: $code, requirements: $requirements, inputs: $inputs,
                 outputs: $outputs) {
    functionId status version versionStatus vulnerabilities functionVersionId
  }
}
"""


@pytest.fixture
def settings(
    database_url: str, identity_provider: LocalIdentityProvider, tmp_path: Path
) -> Settings:
    base = Settings(database_url=database_url, oidc_issuer=identity_provider.issuer, _env_file=None)
    return build_settings(base, tmp_path)


async def submit(
    client: httpx.AsyncClient, headers: dict[str, str], **variables: Any
) -> dict[str, Any]:
    variables = {"name": "double", "code": CODE, **IO, **variables}
    response = await client.post(
        "/graphql", json={"query": SUBMIT, "variables": variables}, headers=headers
    )
    body: dict[str, Any] = response.json()
    return body


async def test_a_build_answers_its_version(client: httpx.AsyncClient, bearer: Bearer) -> None:
    body = await submit(client, bearer("alice"))
    assert "errors" not in body, body
    built = body["data"]["submitFunction"]
    assert (built["status"], built["version"], built["versionStatus"]) == ("ready", "1.0.0", "new")
    rest = await client.get(f"/functions/{built['functionId']}", headers=bearer("alice"))
    assert rest.json()["current_version"] == "1.0.0"


async def test_a_validation_refusal_names_rule_and_line(
    client: httpx.AsyncClient, bearer: Bearer
) -> None:
    body = await submit(client, bearer("alice"), code="import os\n\ndef main(x):\n    return x\n")
    (error,) = body["errors"]
    assert error["extensions"]["code"] == "ValidationError"
    assert "os" in error["message"]
    assert "line 1" in error["message"]
    assert any(e["loc"][:4] == ["body", "code", "line", 1] for e in error["extensions"]["errors"])
    listing = await client.get("/functions", headers=bearer("alice"))
    assert listing.json()["items"] == []


async def test_a_scan_refusal_carries_the_vulnerabilities(
    client: httpx.AsyncClient, bearer: Bearer
) -> None:
    body = await submit(client, bearer("alice"), name="risky", requirements=["==".join(VULNERABLE)])
    (error,) = body["errors"]
    assert error["extensions"]["code"] == "InvalidRequest"
    assert error["extensions"]["vulnerabilities"]["critical"] >= 1


@pytest.mark.parametrize(
    ("variables", "field"), [({"name": ""}, "name"), ({"inputs": [1]}, "inputs")]
)
async def test_bad_arguments_and_no_token(
    client: httpx.AsyncClient, bearer: Bearer, variables: dict[str, Any], field: str
) -> None:
    body = await submit(client, bearer("alice"), **variables)
    assert body["errors"][0]["extensions"]["code"] == "ValidationError"
    assert body["errors"][0]["extensions"]["errors"][0]["loc"] == [field]
    anonymous = await submit(client, {})
    assert anonymous["errors"][0]["extensions"]["code"] == "Unauthenticated"
