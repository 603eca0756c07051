"""Issue 12, hole 5: one anonymous request must not stall everyone. Fragment bombs and costly
documents are refused before execution, oversized headers get 431 before they are read whole,
hostile JSON (deep, huge integers) gets 422, and refused tokens count against the address."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from calcgraph.app import create_app
from calcgraph.auth.provider import OidcProvider
from calcgraph.auth.verify import TokenVerifier
from calcgraph.db.engine import Database
from calcgraph.domain.errors import Unauthenticated
from calcgraph.settings import Settings
from tests.auth.idp import AUDIENCE, LocalIdentityProvider
from tests.auth.test_dev_identity import env, free_port
from tests.client.conftest import Served

pytestmark = pytest.mark.db


def fragment_bomb(levels: int) -> str:
    """Each fragment spreads the previous one twice: 2^levels selections of `__typename`."""
    fragments = ["fragment F0 on Query { __typename }"]
    for n in range(1, levels + 1):
        fragments.append(f"fragment F{n} on Query {{ ...F{n - 1} ...F{n - 1} }}")
    return f"query {{ ...F{levels} }}\n" + "\n".join(fragments)


async def gql(client: httpx.AsyncClient, query: str, **extra: Any) -> httpx.Response:
    return await client.post("/graphql", json={"query": query, **extra})


class TestFragmentBomb:
    async def test_doubling_fragments_are_refused_by_their_expanded_size(
        self, client: httpx.AsyncClient
    ) -> None:
        response = await gql(client, fragment_bomb(16))
        body = response.json()
        assert "data" not in body or body["data"] is None
        [error] = body["errors"]
        assert error["extensions"]["code"] == "ValidationError"
        assert "65536 fields once its fragments are expanded" in error["message"]
        assert "limit is 5000" in error["message"]

    async def test_the_count_itself_is_linear(self, client: httpx.AsyncClient) -> None:
        # 2^40 selections: counted through memoised fragment sizes, never expanded.
        [error] = (await gql(client, fragment_bomb(40))).json()["errors"]
        assert f"selects {2**40} fields" in error["message"]
        assert (await client.get("/health")).status_code == 200

    async def test_a_document_within_the_bound_runs(self, client: httpx.AsyncClient) -> None:
        body = (await gql(client, fragment_bomb(5))).json()
        assert body == {"data": {"__typename": "Query"}}

    async def test_nested_lists_are_refused_by_their_cost(
        self, settings: Settings, database: Database
    ) -> None:
        cheap = settings.model_copy(update={"graphql_max_cost": 500})
        app = create_app(cheap, database)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://calcgraph.test"
        ) as client:
            query = "{ packages(limit: 100) { items { versions { functions { name } } } } }"
            [error] = (await gql(client, query)).json()["errors"]
            assert error["extensions"]["code"] == "ValidationError"
            assert "estimated cost" in error["message"]
            assert "limit is 500" in error["message"]


def deep_array(depth: int) -> str:
    return "[" * depth + "]" * depth


def deep_object(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


class TestHostileJson:
    @pytest.mark.parametrize(
        ("raw", "says"),
        [
            (f'{{"source": {deep_array(100_000)}, "target": "Force"}}', "nested deeper than 64"),
            (f'{{"source": {deep_object(100_000)}, "target": "Force"}}', "nested deeper than 64"),
            (f'{{"source": {deep_array(70)}, "target": "Force"}}', "nested deeper than 64"),
            ('{"source": "Force", "target": "Force", "n": ' + "9" * 5000 + "}", "64 bits"),
            ('{"source": "Force", "target": "Force", "n": 9223372036854775808}', "64 bits"),
            ('{"source": "Force", "target": "Force", "n": NaN}', "NaN is not JSON"),
        ],
        ids=["deep-array", "deep-object", "65-levels", "5000-digits", "2**63", "nan"],
    )
    async def test_rest_bodies(self, client: httpx.AsyncClient, raw: str, says: str) -> None:
        response = await client.post(
            "/types/check-connection",
            content=raw.encode(),
            headers={"Content-Type": "application/json"},
        )
        assert response.status_code == 422, response.text[:300]
        assert response.json()["detail"].startswith("ValidationError: ")
        assert says in response.json()["detail"]

    async def test_an_integer_within_64_bits_is_fine(self, client: httpx.AsyncClient) -> None:
        raw = '{"source": "Force", "target": "Force", "n": 9223372036854775807}'
        response = await client.post(
            "/types/check-connection", content=raw, headers={"Content-Type": "application/json"}
        )
        # Parsed: the model refuses the extra field by name, not the number.
        assert "n: Extra inputs are not permitted" in response.json()["detail"]

    async def test_authenticated_bodies_too(self, client: httpx.AsyncClient, bearer: Any) -> None:
        raw = '{"slug": "o", "name": ' + deep_array(100_000) + "}"
        response = await client.post(
            "/organizations",
            content=raw,
            headers={**bearer("alice"), "Content-Type": "application/json"},
        )
        assert response.status_code == 422
        assert response.json()["detail"].startswith("ValidationError: ")

    async def test_deep_type_expressions_in_a_workflow(
        self, client: httpx.AsyncClient, bearer: Any
    ) -> None:
        spec = deep_object(100_000).replace("1", '"Force"')
        raw = (
            '{"graph": {"nodes": [{"node_key": "x", "kind": "input", "input_spec": '
            f'{{"type_expr": {spec}}}}}]}}}}'
        )
        response = await client.post(
            "/workflows/validate",
            content=raw,
            headers={**bearer("alice"), "Content-Type": "application/json"},
        )
        assert response.status_code == 422, response.text[:300]
        assert "nested deeper than 64" in response.json()["detail"]

    async def test_graphql_variables(self, client: httpx.AsyncClient) -> None:
        query = "query($s: String!) { checkConnection(source: $s, target: $s) { compatibility } }"
        raw = json.dumps({"query": query, "variables": {"s": None}}).replace(
            "null", deep_array(100_000)
        )
        response = await client.post(
            "/graphql", content=raw, headers={"Content-Type": "application/json"}
        )
        assert response.status_code == 422, response.text[:300]
        assert "nested deeper than 64" in response.json()["detail"]

    async def test_graphql_inline_values(self, client: httpx.AsyncClient) -> None:
        literal = deep_array(2000)
        query = f'{{ checkConnection(source: {literal}, target: "Force") {{ compatibility }} }}'
        body = (await gql(client, query)).json()
        assert [e["extensions"]["code"] for e in body["errors"]] == ["ValidationError"]
        shallow = deep_array(70)
        query = f'{{ checkConnection(source: {shallow}, target: "Force") {{ compatibility }} }}'
        body = (await gql(client, query)).json()
        assert "nested deeper than 64" in body["errors"][0]["message"]


class TestRefusedTokensAreRateLimited:
    @pytest.fixture
    def limited(self, settings: Settings, database: Database) -> Starlette:
        return create_app(
            settings.model_copy(update={"rate_limit_per_minute": 60, "rate_limit_burst": 3}),
            database,
        )

    @pytest.mark.parametrize("address", ["203.0.113.9", "127.0.0.1"])
    async def test_per_address(self, limited: Starlette, address: str) -> None:
        transport = httpx.ASGITransport(app=limited, client=(address, 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            statuses = [
                (await client.get("/jobs", headers={"Authorization": "Bearer nope"})).status_code
                for _ in range(5)
            ]
            assert statuses[:3] == [401, 401, 401]
            assert statuses[3:] == [429, 429]
            refused = await client.get("/jobs", headers={"Authorization": "Bearer nope"})
            assert refused.json()["detail"].startswith("RateLimited: ")
            assert "Retry-After" in refused.headers


def _raw_request(url: str, header_bytes: int) -> tuple[int, bytes, float]:
    """Send GET /health with an Authorization header of `header_bytes` over a plain socket;
    the status, body and seconds until the answer."""
    host, port = url.removeprefix("http://").split(":")
    started = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ")
        sent, chunk = 0, b"a" * 65536
        try:
            while sent < header_bytes:
                sock.sendall(chunk)
                sent += len(chunk)
            sock.sendall(b"\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed before reading it all: the point
        answer = b""
        try:
            while True:
                data = sock.recv(65536)
                if not data:
                    break
                answer += data
                if b"\r\n\r\n" in answer and answer.count(b"}") >= 1:
                    break
        except ConnectionResetError:
            pass
    head, _, body = answer.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head else 0
    return status, body, time.monotonic() - started


class TestHeaderLimit:
    def test_oversized_headers_get_431_before_they_are_read(self, served: Served) -> None:
        status, body, _ = _raw_request(served.url, 60 * 1024 * 1024)
        assert status == 431
        assert json.loads(body)["detail"].startswith("RequestHeaderFieldsTooLarge: ")

    def test_just_over_16_kib(self, served: Served) -> None:
        response = httpx.get(
            f"{served.url}/jobs", headers={"Authorization": "Bearer " + "a" * (16 * 1024)}
        )
        assert response.status_code == 431
        assert response.json()["detail"].startswith("RequestHeaderFieldsTooLarge: ")

    def test_headers_within_the_limit_are_read(self, served: Served) -> None:
        response = httpx.get(
            f"{served.url}/jobs", headers={"Authorization": "Bearer " + "a" * (15 * 1024)}
        )
        assert response.status_code == 401
        ok = httpx.get(f"{served.url}/health", headers={"X-Pad": "b" * 8000})
        assert ok.status_code == 200

    def test_keep_alive_requests_are_each_limited(self, served: Served) -> None:
        with httpx.Client(base_url=served.url) as client:
            assert client.get("/health").status_code == 200
            big = {"X-Pad": "c" * (17 * 1024)}
            assert client.get("/health", headers=big).status_code == 431

    def test_health_answers_while_a_huge_header_is_refused(self, served: Served) -> None:
        status, _, _ = _raw_request(served.url, 8 * 1024 * 1024)
        assert status == 431
        assert httpx.get(f"{served.url}/health").status_code == 200


async def test_tokens_over_16_kib_are_refused(identity_provider: LocalIdentityProvider) -> None:
    claims = {**identity_provider.claims(), "pad": "x" * (16 * 1024)}
    token = identity_provider.sign(claims)
    verifier = TokenVerifier(OidcProvider(identity_provider.issuer), AUDIENCE)
    with pytest.raises(Unauthenticated, match="longer than 16384 bytes"):
        await verifier.verify(token)


def test_calcgraph_serve_answers_431(tmp_path: Path) -> None:
    """The product's own command runs the protocol, not only the tests' server."""
    api_port, idp_port = free_port(), free_port()
    environment = env(tmp_path, dev_idp_port=str(idp_port))
    with (tmp_path / "serve.log").open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "calcgraph", "serve", "--port", str(api_port)],
            env=environment,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    try:
        base = f"http://127.0.0.1:{api_port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert process.poll() is None, (tmp_path / "serve.log").read_text()
            assert time.monotonic() < deadline
            time.sleep(0.2)
        status, body, _ = _raw_request(base, 4 * 1024 * 1024)
        assert status == 431
        assert json.loads(body)["detail"].startswith("RequestHeaderFieldsTooLarge: ")
        assert httpx.get(f"{base}/health").status_code == 200
    finally:
        process.terminate()
        process.wait(timeout=30)
