"""Small helpers of the event tests."""

from __future__ import annotations

import uuid
from typing import Any

from tests.execution.conftest import Platform
from tests.packages.publishing import publish, small_body

CODE = "def run(x):\n    if x < 0:\n        raise ValueError('negative')\n    return {'y': x}\n"


async def published(platform: Platform, user: str = "alice", **kw: Any) -> dict[str, Any]:
    name = f"ev-{uuid.uuid4().hex[:10]}"
    return await publish(
        platform.client, platform.headers(user), small_body(name, "1.0.0", code=CODE, **kw)
    )


async def events(platform: Platform, user: str = "alice", **params: Any) -> dict[str, Any]:
    response = await platform.client.get("/events", params=params, headers=platform.headers(user))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def of_subject(body: dict[str, Any], subject: str) -> list[str]:
    return [e["type"] for e in body["items"] if e["subject"] == subject]
