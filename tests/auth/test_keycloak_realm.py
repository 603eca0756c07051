"""The Keycloak realm export sets up the specification's three clients and claim mappers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REALM = Path(__file__).resolve().parents[2] / "deploy" / "keycloak" / "calcgraph-realm.json"


def realm() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(REALM.read_text())
    return data


def client(client_id: str) -> dict[str, Any]:
    return next(c for c in realm()["clients"] if c["clientId"] == client_id)


def test_roles_and_default_role() -> None:
    data = realm()
    assert {r["name"] for r in data["roles"]["realm"]} == {"admin", "user"}
    assert "user" in data["defaultRole"]["composites"]["realm"]


def test_confidential_api_client() -> None:
    api = client("calcgraph-api")
    assert api["publicClient"] is False
    assert api["secret"] == "${CALCGRAPH_OIDC_CLIENT_SECRET}"
    assert api["standardFlowEnabled"]
    assert api["serviceAccountsEnabled"]
    assert api["directAccessGrantsEnabled"] is False


def test_public_password_grant_client() -> None:
    cli = client("calcgraph-cli")
    assert cli["publicClient"] is True
    assert cli["directAccessGrantsEnabled"] is True
    assert cli["standardFlowEnabled"] is False


def test_dashboard_client_with_pkce_and_lifespans() -> None:
    dashboard = client("calcgraph-dashboard")
    assert dashboard["publicClient"]
    assert dashboard["standardFlowEnabled"]
    assert not dashboard["directAccessGrantsEnabled"]
    assert not dashboard["implicitFlowEnabled"]
    attributes = dashboard["attributes"]
    assert attributes["pkce.code.challenge.method"] == "S256"
    assert attributes["access.token.lifespan"] == "300"
    assert attributes["client.session.idle.timeout"] == "1800"
    assert attributes["client.session.max.lifespan"] == "43200"


def test_claim_mappers() -> None:
    scope = next(s for s in realm()["clientScopes"] if s["name"] == "calcgraph")
    by_claim = {m["config"].get("claim.name", "aud"): m["config"] for m in scope["protocolMappers"]}
    assert by_claim["aud"]["included.client.audience"] == "calcgraph-api"
    roles = by_claim["realm_access.roles"]
    assert roles["multivalued"] == "true"
    for claim in ("realm_access.roles", "preferred_username"):
        assert by_claim[claim]["lightweight.claim"] == "true"
        assert by_claim[claim]["introspection.token.claim"] == "true"
    assert by_claim["email"]["lightweight.claim"] == "false"
    assert by_claim["email"]["introspection.token.claim"] == "true"
    for claim in ("given_name", "family_name"):
        assert by_claim[claim]["lightweight.claim"] == "false"
        assert by_claim[claim]["introspection.token.claim"] == "false"
    for c in realm()["clients"]:
        assert "calcgraph" in c["defaultClientScopes"]
