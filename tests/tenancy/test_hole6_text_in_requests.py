"""Issue 12, hole 6, the request side (contract sections 2 and 8): a NUL or a lone surrogate
in any JSON string of a request (a String input, an organization name, GraphQL variables and
literals) is refused with 422 `ValidationError` on both databases; never a 500, nothing written.
Text that is valid Unicode (an escaped surrogate pair included) is stored and read back."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.db

# Raw JSON text: the escapes stay escapes until the server decodes them.
NUL = "a\\u0000b"
LONE = "a\\ud800b"
LONE_LOW = "\\udc00"
BAD = pytest.mark.parametrize("bad", [NUL, LONE, LONE_LOW], ids=["nul", "high", "low"])
JSON = {"Content-Type": "application/json"}


def slug() -> str:
    return f"org-{uuid.uuid4().hex[:8]}"


async def post_raw(
    client: httpx.AsyncClient, path: str, raw: str, headers: dict[str, str]
) -> httpx.Response:
    return await client.post(path, content=raw.encode(), headers={**headers, **JSON})


def assert_refused(response: httpx.Response) -> None:
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail.startswith("ValidationError: ")
    assert "NUL" in detail or "lone surrogate" in detail


@BAD
async def test_organization_name(client: httpx.AsyncClient, bearer: Any, bad: str) -> None:
    name = slug()
    raw = f'{{"slug": "{name}", "name": "{bad}"}}'
    assert_refused(await post_raw(client, "/organizations", raw, bearer("alice")))
    missing = await client.get(f"/organizations/{name}", headers=bearer("alice"))
    assert missing.status_code == 404, "nothing was written"


@BAD
async def test_a_key_of_any_object(client: httpx.AsyncClient, bearer: Any, bad: str) -> None:
    raw = f'{{"slug": "{slug()}", "name": "n", "x": {{"{bad}": 1}}}}'
    assert_refused(await post_raw(client, "/organizations", raw, bearer("alice")))


@BAD
async def test_a_string_input_of_execute(client: httpx.AsyncClient, bearer: Any, bad: str) -> None:
    raw = f'{{"inputs": {{"text": "{bad}"}}}}'
    path = f"/functions/{uuid.uuid4()}/execute"
    assert_refused(await post_raw(client, path, raw, bearer("alice")))


@BAD
async def test_public_routes(client: httpx.AsyncClient, bad: str) -> None:
    raw = f'{{"source": "Force", "target": "{bad}"}}'
    assert_refused(await post_raw(client, "/types/check-connection", raw, {}))


@BAD
async def test_graphql_variables(client: httpx.AsyncClient, bearer: Any, bad: str) -> None:
    query = "mutation($s: String!, $n: String!) { createOrganization(slug: $s, name: $n) { slug } }"
    name = slug()
    raw = f'{{"query": "{query}", "variables": {{"s": "{name}", "n": "{bad}"}}}}'
    assert_refused(await post_raw(client, "/graphql", raw, bearer("alice")))
    missing = await client.get(f"/organizations/{name}", headers=bearer("alice"))
    assert missing.status_code == 404


async def test_graphql_literals(client: httpx.AsyncClient, bearer: Any) -> None:
    name = slug()
    query = f'mutation {{ createOrganization(slug: "{name}", name: "a\\u0000b") {{ slug }} }}'
    response = await client.post("/graphql", json={"query": query}, headers=bearer("alice"))
    body = response.json()
    assert body.get("data") is None
    [error] = body["errors"]
    assert error["extensions"]["code"] == "ValidationError"
    assert "NUL" in error["message"]
    missing = await client.get(f"/organizations/{name}", headers=bearer("alice"))
    assert missing.status_code == 404


async def test_valid_unicode_is_stored_alike(client: httpx.AsyncClient, bearer: Any) -> None:
    name = slug()
    raw = f'{{"slug": "{name}", "name": "Ingénierie \\ud83d\\ude00 ü"}}'
    created = await post_raw(client, "/organizations", raw, bearer("alice"))
    assert created.status_code == 201, created.text
    read = await client.get(f"/organizations/{name}", headers=bearer("alice"))
    assert read.json()["name"] == "Ingénierie \U0001f600 ü"


async def test_raw_utf8_encoded_surrogates_are_not_utf8(client: httpx.AsyncClient) -> None:
    # Python's JSON decoder reads bytes with 'surrogatepass': an encoded surrogate must not
    # slip through that way.
    raw = b'{"source": "Force", "target": "\xed\xa0\x80"}'
    response = await client.post("/types/check-connection", content=raw, headers=JSON)
    assert response.status_code == 422
    assert response.json()["detail"].startswith("ValidationError: ")
