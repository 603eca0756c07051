"""The soak's clients that must not share a process with the honest users (issue 27):
`python -m bench.soak_clients` reads its orders (JSON) on stdin, runs them until their deadline
and prints one JSON line of what it saw.

- `health`: a monitoring probe, `GET /health` every `HEALTH_EVERY_S`, blocking, on a
  connection of its own; its latencies.
- `hostile`: the five hostile users of `bench_soak`, each its own attack, as fast as the
  server answers it; the calls made and those refused.

In the benchmark's own process the hostile users decoded their 8 MiB answers on the loop that
timed the honest users, and the probe waited behind 50 users' responses: both measured the load
generator as much as the server. Here each is a client of its own, as they are in life.

Hostile users, each its own attack:
- big outputs: executes a function returning 8 MiB, lists its jobs 500 at a time, reads a run
  whose 3 nodes each output 8 MiB, whole and through GraphQL `nodeStates`;
- huge workflows: saves 12,000-node workflows and starts runs of them (until the runs quota
  answers 429; then cancels them), lists its runs and reads one whole;
- socket floods: opens 60 WebSockets that never send `connection_init` and 25 authenticated
  ones (over the 50 and 20 the contract allows), holds them, closes them, again;
- background threads: executes a handler that starts a busy thread and forks a sleeping child;
- GraphQL games: fragments that double each other, 2,000 aliases, nested lists, and
  `workflowRuns(limit: 12) { planSnapshot nodeStates ... }`.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.auth.idp import claims_of, sign_with

HEALTH_EVERY_S = 0.5
HUGE_NODES = 12_000
TOKEN_REFRESH_S = 60.0


@dataclass
class Tally:
    hostile_calls: int = 0
    refused: int = 0
    """Hostile calls answered 4xx (quotas, validation, socket closes): the defences at work."""


@dataclass
class Remote:
    """What a client process knows of the benchmark's server: its address, alice's package,
    and the identity provider's signing key (to renew its users' tokens)."""

    base_url: str
    package: str
    issuer: str
    kid: str
    key: rsa.RSAPrivateKey
    http: httpx.AsyncClient
    _users: dict[str, tuple[float, dict[str, str]]] = field(default_factory=dict)

    def headers_of(self, user: str) -> dict[str, str]:
        """`user`'s bearer token, renewed every minute (the provider's tokens live 5)."""
        now = time.monotonic()
        held = self._users.get(user)
        if held is None or now - held[0] > TOKEN_REFRESH_S:
            token = sign_with(self.key, self.kid, claims_of(self.issuer, user))
            held = self._users[user] = (now, {"Authorization": f"Bearer {token}"})
        return held[1]


def orders(
    role: str,
    base_url: str,
    package: str,
    issuer: str,
    kid: str,
    key: rsa.RSAPrivateKey,
    seconds: float,
    **more: Any,
) -> bytes:
    """The JSON a client process reads on stdin."""
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    body = {
        "role": role,
        "base_url": base_url,
        "package": package,
        "issuer": issuer,
        "kid": kid,
        "key": pem,
        "seconds": seconds,
        **more,
    }
    return json.dumps(body).encode()


def health(base_url: str, seconds: float) -> list[int]:
    """`GET /health` every `HEALTH_EVERY_S` for `seconds`: each answer's latency in ns (a
    refused or dropped connection counts as the time it took to fail)."""
    address = urlsplit(base_url)
    connection = http.client.HTTPConnection(address.hostname or "127.0.0.1", address.port, 30)
    latencies: list[int] = []
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        began = time.perf_counter_ns()
        try:
            connection.request("GET", "/health")
            connection.getresponse().read()
        except (OSError, http.client.HTTPException):
            connection.close()
            connection = http.client.HTTPConnection(
                address.hostname or "127.0.0.1", address.port, 30
            )
        latencies.append(time.perf_counter_ns() - began)
        time.sleep(max(0.0, HEALTH_EVERY_S - (time.perf_counter_ns() - began) / 1e9))
    return latencies


async def _execute(api: Remote, user: str, package: str, function: str, x: float) -> httpx.Response:
    """One of the hostile package's functions, run and waited for (30 s at most)."""
    return await api.http.post(
        f"/packages/{package}/functions/{function}/execute",
        json={"inputs": {"x": x}},
        params={"wait": 30},
        headers=api.headers_of(user),
    )


def _count(tally: Tally, response: httpx.Response) -> None:
    tally.hostile_calls += 1
    if 400 <= response.status_code < 500:
        tally.refused += 1


async def _big_outputs(api: Remote, user: str, package: str, tally: Tally, until: float) -> None:
    headers = api.headers_of(user)
    nodes = [
        {"node_key": "x", "kind": "input", "input_spec": {"type_expr": "Float"}},
        *(
            {
                "node_key": f"B{i}",
                "kind": "function",
                "function": f"{package}/big",
                "input_bindings": {
                    "x": {"source": "input_node", "input_key": "x", "from_port": "value"}
                },
            }
            for i in range(3)
        ),
    ]
    slug = f"soak-big-{uuid.uuid4().hex[:6]}"
    body = {"slug": slug, "name": slug, "graph": {"nodes": nodes}}
    _count(tally, await api.http.post("/workflows", json=body, headers=headers))
    run_id = None
    n = 0.0
    while time.monotonic() < until:
        headers = api.headers_of(user)
        n += 1
        with contextlib.suppress(httpx.HTTPError):
            _count(tally, await _execute(api, user, package, "big", n))
            _count(tally, await api.http.get("/jobs", params={"limit": 500}, headers=headers))
            if run_id is None:
                started = await api.http.post(
                    f"/workflows/{slug}/runs", json={"inputs": {"x": n}}, headers=headers
                )
                _count(tally, started)
                run_id = started.json().get("id") if started.status_code == 201 else None
            if run_id is not None:
                _count(tally, await api.http.post(f"/workflow-runs/{run_id}/tick", headers=headers))
                _count(tally, await api.http.get(f"/workflow-runs/{run_id}", headers=headers))
                query = "query($id: ID!) { workflowRun(id: $id) { nodeStates { outputs } } }"
                _count(
                    tally,
                    await api.http.post(
                        "/graphql",
                        json={"query": query, "variables": {"id": run_id}},
                        headers=headers,
                    ),
                )


async def _huge_workflows(api: Remote, user: str, tally: Tally, until: float) -> None:
    inc = f"{api.package}/inc"
    binding = {"x": {"source": "input_node", "input_key": "x", "from_port": "value"}}
    nodes: list[dict[str, Any]] = [
        {"node_key": "x", "kind": "input", "input_spec": {"type_expr": "Float"}}
    ]
    nodes += [
        {"node_key": f"n{i}", "kind": "function", "function": inc, "input_bindings": binding}
        for i in range(HUGE_NODES)
    ]
    slugs: list[str] = []
    runs: list[str] = []
    while time.monotonic() < until:
        headers = api.headers_of(user)
        with contextlib.suppress(httpx.HTTPError):
            if len(slugs) < 3:
                slug = f"soak-huge-{uuid.uuid4().hex[:6]}"
                body = {"slug": slug, "name": slug, "graph": {"nodes": nodes}}
                created = await api.http.post("/workflows", json=body, headers=headers)
                _count(tally, created)
                if created.status_code == 201:
                    slugs.append(slug)
                continue
            started = await api.http.post(
                f"/workflows/{slugs[len(runs) % 3]}/runs",
                json={"inputs": {"x": 1.0}},
                headers=headers,
            )
            _count(tally, started)
            if started.status_code == 201:
                runs.append(started.json()["id"])
            elif started.status_code == 429:  # the runs quota: cancel and go on
                for run_id in runs[:20]:
                    _count(
                        tally,
                        await api.http.post(f"/workflow-runs/{run_id}/cancel", headers=headers),
                    )
                del runs[:20]
            _count(
                tally, await api.http.get("/workflow-runs", params={"limit": 500}, headers=headers)
            )
            if runs:
                _count(tally, await api.http.get(f"/workflow-runs/{runs[-1]}", headers=headers))


async def _socket_flood(api: Remote, user: str, tally: Tally, until: float) -> None:
    from websockets.asyncio.client import connect

    url = api.base_url.replace("http://", "ws://") + "/graphql"

    async def hold(authenticated: bool) -> None:
        with contextlib.suppress(Exception):
            async with connect(url, subprotocols=["graphql-transport-ws"], open_timeout=30) as ws:  # type: ignore[list-item]
                if authenticated:
                    token = api.headers_of(user)["Authorization"]
                    init = {"type": "connection_init", "payload": {"Authorization": token}}
                    await ws.send(json.dumps(init))
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(ws.recv(), 4)
                    await asyncio.wait_for(ws.recv(), 4)
                tally.refused += ws.close_code is not None and ws.close_code >= 4400
        tally.hostile_calls += 1

    while time.monotonic() < until:
        await asyncio.gather(*(hold(False) for _ in range(60)), *(hold(True) for _ in range(25)))


async def _threads(api: Remote, user: str, package: str, tally: Tally, until: float) -> None:
    n = 0.0
    while time.monotonic() < until:
        n += 1
        with contextlib.suppress(httpx.HTTPError):
            _count(tally, await _execute(api, user, package, "spin", n))


def _doubling_fragments(levels: int) -> str:
    parts = ["query Q { ...F0 }", "fragment F0 on Query { me { username } }"]
    for i in range(1, levels + 1):
        parts.append(f"fragment F{i} on Query {{ ...F{i - 1} ...F{i - 1} }}")
    parts[0] = f"query Q {{ ...F{levels} }}"
    return "\n".join(parts)


async def _graphql_games(api: Remote, user: str, tally: Tally, until: float) -> None:
    aliases = "{ " + " ".join(f"a{i}: me {{ username }}" for i in range(2000)) + " }"
    nested = "{ " + "packages(limit: 100) { items { functions { versions { id } } } } " * 3 + "}"
    runs = """{ workflowRuns(limit: 12) { items { planSnapshot
        nodeStates { nodeKey outputs } workflowVersion { graph } } } }"""
    documents = [_doubling_fragments(30), aliases, nested, runs]
    i = 0
    while time.monotonic() < until:
        i += 1
        with contextlib.suppress(httpx.HTTPError):
            response = await api.http.post(
                "/graphql",
                json={"query": documents[i % len(documents)]},
                headers=api.headers_of(user),
            )
            tally.hostile_calls += 1
            body = response.json()
            tally.refused += bool(body.get("errors"))


async def hostile(
    remote: Remote, users: list[str], packages: dict[str, str], seconds: float
) -> Tally:
    tally = Tally()
    until = time.monotonic() + seconds
    await asyncio.gather(
        _big_outputs(remote, users[0], packages["big"], tally, until),
        _huge_workflows(remote, users[1], tally, until),
        _socket_flood(remote, users[2], tally, until),
        _threads(remote, users[3], packages["spin"], tally, until),
        _graphql_games(remote, users[4], tally, until),
    )
    return tally


async def _hostile_main(order: dict[str, Any]) -> dict[str, int]:
    key = serialization.load_pem_private_key(order["key"].encode(), password=None)
    assert isinstance(key, rsa.RSAPrivateKey)
    limits = httpx.Limits(max_connections=50)
    async with httpx.AsyncClient(
        base_url=order["base_url"], timeout=120, limits=limits
    ) as http_client:
        remote = Remote(
            order["base_url"], order["package"], order["issuer"], order["kid"], key, http_client
        )
        tally = await hostile(remote, order["users"], order["packages"], order["seconds"])
    return {"hostile_calls": tally.hostile_calls, "refused": tally.refused}


def main() -> None:
    order = json.loads(sys.stdin.buffer.read())
    if order["role"] == "health":
        found: dict[str, Any] = {"latencies_ns": health(order["base_url"], order["seconds"])}
    else:
        found = asyncio.run(_hostile_main(order))
    sys.stdout.write(json.dumps(found) + "\n")


if __name__ == "__main__":
    main()
