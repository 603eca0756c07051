"""The other recorded events: sign-in (UserLogin), builds (ready and refused, with their
uploads), and retention."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from calcgraph.db.base import utcnow
from calcgraph.db.engine import Database
from calcgraph.domain.events.catalog import USER_LOGIN
from calcgraph.domain.events.service import event_row, event_service, record_rows
from calcgraph.settings import Settings
from tests.auth.idp import LocalIdentityProvider
from tests.auth.test_login import login_client, provider, sign_in_at_the_provider  # noqa: F401
from tests.builds.build_fixtures import VULNERABLE, build_settings
from tests.builds.test_build_api import Bearer, pins, submit

pytestmark = pytest.mark.db


@pytest.fixture
def settings(
    database_url: str, identity_provider: LocalIdentityProvider, tmp_path: Path
) -> Settings:
    base = Settings(database_url=database_url, oidc_issuer=identity_provider.issuer, _env_file=None)
    return build_settings(base, tmp_path)


async def test_sign_in_records_user_login(login_client: httpx.AsyncClient) -> None:  # noqa: F811
    start = (await login_client.post("/auth/login")).json()
    code = sign_in_at_the_provider(start["authorization_url"], "bob")["code"][0]
    answer = await login_client.post(
        "/auth/callback", json={"code": code, "code_verifier": start["code_verifier"]}
    )
    assert answer.status_code == 200, answer.text
    token = answer.json()["access_token"]
    user_id = answer.json()["user"]["id"]
    found = await login_client.get(
        "/events", params={"type": "calcgraph.user.*"}, headers={"Authorization": f"Bearer {token}"}
    )
    items = found.json()["items"]
    assert [(e["subject"], e["data"]) for e in items] == [(user_id, {"username": "bob"})]


async def test_builds_record_ready_refused_and_the_upload(
    client: httpx.AsyncClient, bearer: Bearer
) -> None:
    ready = await submit(client, bearer("alice"))
    assert ready.status_code == 201, ready.text
    function_id = ready.json()["function_id"]
    refused = await submit(client, bearer("alice"), name="risky", requirements=pins(VULNERABLE))
    assert refused.status_code == 400
    mine = (await client.get("/events", headers=bearer("alice"))).json()["items"]
    types = [(e["type"], e["subject"]) for e in mine]
    assert ("calcgraph.file.uploaded", function_id) in types
    assert ("calcgraph.build.ready", function_id) in types
    built = next(e for e in mine if e["type"] == "calcgraph.build.ready")
    assert built["data"]["status"] == "ready"
    assert built["data"]["build_id"]
    upload = next(e for e in mine if e["type"] == "calcgraph.file.uploaded")
    assert upload["data"]["function"] == function_id
    assert {f["path"] for f in upload["data"]["files"]} == {"main.py", "requirements.txt"}
    refusal = next(e for e in mine if e["type"] == "calcgraph.build.refused")
    assert refusal["data"]["status"] == "refused"
    assert refusal["data"]["reason"]
    assert refusal["data"]["vulnerabilities"]
    # Nothing of a refused build was uploaded.
    assert not [
        e
        for e in mine
        if e["type"] == "calcgraph.file.uploaded" and e["subject"] == refusal["subject"]
    ]
    bob = (await client.get("/events", headers=bearer("bob"))).json()["items"]
    assert not [e for e in bob if e["subject"] in (function_id, refusal["subject"])]


async def test_retention_deletes_old_events(database: Database) -> None:
    async with database.write_session() as session:
        old = event_row(USER_LOGIN, "u-old", {"username": "old"})
        old["recorded_at"] = utcnow() - timedelta(days=8)
        new = event_row(USER_LOGIN, "u-new", {"username": "new"})
        await record_rows(session, [old, new])
    async with database.write_session() as session:
        assert await event_service.prune(session, 7.0) == 1
    async with database.write_session() as session:
        await event_service.sequence(session)
        end = await event_service.end(session)
    assert end >= 1
