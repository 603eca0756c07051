"""`calcgraph.user.login` in the production shape: Redis as the broker and a separate
`calcgraph worker` process (`tests.events.redis_shape`), signing in through the development
identity provider's code flow as the web app and the CLI do (`POST /auth/callback`).

The test first runs a job through the worker process, so that it is up (and stops cleanly)
before the sign-ins. A module of its own: its users come from that provider (subject =
username), and a database holds one identity per username (the other event modules' users
come from the test one)."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from calcgraph.auth.devidp import DevIdentityProvider
from tests.auth.idp import LocalIdentityProvider
from tests.auth.test_login import sign_in_at_the_provider
from tests.events.helpers import CODE
from tests.events.redis_shape import cursor, events_since, redis_worker, waiting_poll
from tests.events.test_table import assert_envelope
from tests.execution.conftest import Platform
from tests.packages.publishing import publish, small_body

pytestmark = pytest.mark.db


@pytest.fixture(scope="module")
def provider() -> Iterator[DevIdentityProvider]:
    with DevIdentityProvider("calcgraph-api") as running:
        yield running


@pytest.fixture
async def signing_in(
    exec_url: str,
    identity_provider: LocalIdentityProvider,
    provider: DevIdentityProvider,
    tmp_path: Path,
) -> AsyncIterator[Platform]:
    async with redis_worker(
        exec_url,
        identity_provider,
        tmp_path,
        oidc_issuer=provider.issuer,
        oidc_client_id="calcgraph-dashboard",
        oidc_client_secret="api-client-secret",
        oidc_redirect_uri="http://127.0.0.1:5173/callback",
    ) as platform:
        yield platform


async def _sign_in(
    client: httpx.AsyncClient, username: str
) -> tuple[httpx.Response, dict[str, str]]:
    """The code flow; the callback's answer and the exchange it made (to replay it)."""
    start = (await client.post("/auth/login")).json()
    code = sign_in_at_the_provider(start["authorization_url"], username)["code"][0]
    exchange = {"code": code, "code_verifier": start["code_verifier"]}
    return await client.post("/auth/callback", json=exchange), exchange


def _bearer(answer: httpx.Response) -> dict[str, str]:
    assert answer.status_code == 200, answer.text
    return {"Authorization": f"Bearer {answer.json()['access_token']}"}


async def test_user_login_with_a_worker_process(signing_in: Platform) -> None:
    platform = signing_in
    client = platform.client
    first, _ = await _sign_in(client, "alice")
    alice = _bearer(first)
    alice_id = first.json()["user"]["id"]
    bob = _bearer((await _sign_in(client, "bob"))[0])
    admin = _bearer((await _sign_in(client, "admin"))[0])
    # The worker process is up and running jobs (and handles its stop at the end).
    name = f"evl-{uuid.uuid4().hex[:8]}"
    await publish(client, alice, small_body(name, "1.0.0", code=CODE))
    done = await platform.execute(
        f"/packages/{name}/functions/run/execute", {"x": 1.0}, 60, headers=alice
    )
    assert done.json()["status"] == "success", done.text
    start = await cursor(platform, admin)

    # Alice signs in again (the CLI, say): her waiting poll is woken by exactly that event.
    poll = await waiting_poll(platform, alice, type="calcgraph.user.*")
    again, exchange = await _sign_in(client, "alice")
    answered = time.monotonic()
    assert again.status_code == 200, again.text
    woke = await poll.answer(answered)
    assert [(e["type"], e["subject"]) for e in woke] == [("calcgraph.user.login", alice_id)]
    assert_envelope(woke[0], "calcgraph.user.login", alice_id, {"username"})
    assert woke[0]["data"] == {"username": "alice"}

    # A replayed code signs nobody in and records nothing.
    replayed = await client.post("/auth/callback", json=exchange)
    assert replayed.status_code in (400, 401, 403), replayed.text

    every = await events_since(platform, admin, start, type="calcgraph.user.*")
    assert [(e["type"], e["subject"]) for e in every] == [("calcgraph.user.login", alice_id)]
    assert [e["id"] for e in await events_since(platform, alice, start)] == [woke[0]["id"]]
    # Bob sees no one's sign-in but his own.
    seen = await events_since(platform, bob, None, type="calcgraph.user.*")
    assert seen
    assert all(e["data"] == {"username": "bob"} for e in seen)
