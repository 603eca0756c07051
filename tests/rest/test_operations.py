"""The declared operations parse their query through their models with the contract's wording,
and answer with their response models."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from calcgraph.domain.workflows.graph import CATEGORIES, NOTICES
from calcgraph.rest_compat.api import OPERATIONS
from calcgraph.rest_compat.wire import ValidationReport

Bearer = Callable[..., dict[str, str]]
UNKNOWN = "00000000-0000-0000-0000-000000000000"
TICK_WAIT = (
    "ValidationError: wait must be a number of seconds from 0 to 30",
    "expected a number of seconds from 0 to 30",
)
SINCE = (
    "ValidationError: since must be a revision of the run (an integer from 0)",
    "expected an integer from 0",
)
EXECUTE_WAIT = (
    "ValidationError: wait must be a number of seconds, 0 or more",
    "expected a number of seconds >= 0",
)
LIMIT = ("ValidationError: limit must be an integer from 1 to 500", "an integer from 1 to 500")


def _refused(response: httpx.Response, name: str, wording: tuple[str, str]) -> None:
    assert response.status_code == 422, response.text
    body: dict[str, Any] = response.json()
    assert body["detail"] == wording[0]
    assert body["errors"] == [{"loc": ["query", name], "msg": wording[1]}]


@pytest.mark.parametrize(
    ("query", "name", "wording"),
    [
        ("wait=x", "wait", TICK_WAIT),
        ("wait=-1", "wait", TICK_WAIT),
        ("wait=nan", "wait", TICK_WAIT),
        ("wait=inf", "wait", TICK_WAIT),
        ("since=x", "since", SINCE),
        ("since=-3", "since", SINCE),
        ("since=1.5", "since", SINCE),
    ],
)
async def test_tick_query_refusals_keep_their_wording(
    client: httpx.AsyncClient, bearer: Bearer, query: str, name: str, wording: tuple[str, str]
) -> None:
    response = await client.post(f"/workflow-runs/{UNKNOWN}/tick?{query}", headers=bearer())
    _refused(response, name, wording)


async def test_tick_blank_and_long_waits_are_taken_not_refused(
    client: httpx.AsyncClient, bearer: Bearer
) -> None:
    # Parsed (a blank is the default, 99 s is served as 30), then the unknown run is 404.
    for query in ("wait=&since=", "wait=99&since=3", "wait=0.5"):
        response = await client.post(f"/workflow-runs/{UNKNOWN}/tick?{query}", headers=bearer())
        assert response.status_code == 404, (query, response.text)


@pytest.mark.parametrize("wait", ["x", "-1", "nan", ""])
async def test_execute_wait_refusals_keep_their_wording(
    client: httpx.AsyncClient, bearer: Bearer, wait: str
) -> None:
    response = await client.post(
        f"/functions/{UNKNOWN}/execute?wait={wait}", json={"inputs": {}}, headers=bearer()
    )
    _refused(response, "wait", EXECUTE_WAIT)


async def test_listing_queries(client: httpx.AsyncClient, bearer: Bearer) -> None:
    _refused(await client.get("/packages?limit=0", headers=bearer()), "limit", LIMIT)
    _refused(await client.get("/jobs?limit=many", headers=bearer()), "limit", LIMIT)
    assert (await client.get("/packages?limit=", headers=bearer())).status_code == 200
    response = await client.get("/workflow-runs?status=running&status=bogus", headers=bearer())
    assert response.status_code == 422
    assert response.json()["detail"] == "ValidationError: unknown run status 'bogus'"
    assert [e["loc"] for e in response.json()["errors"]] == [["query", "status"]]
    page = await client.get("/workflow-runs?status=running&status=failed", headers=bearer())
    assert page.json() == {"items": [], "next_cursor": None}


async def test_an_empty_execute_body_means_no_inputs(
    client: httpx.AsyncClient, bearer: Bearer
) -> None:
    # Past the parsing (no 422): the unknown function is what is refused.
    response = await client.post(f"/functions/{UNKNOWN}/execute?wait=0", headers=bearer())
    assert response.status_code == 404, response.text


def test_the_report_model_names_every_category() -> None:
    assert tuple(ValidationReport.model_fields) == (*CATEGORIES, *NOTICES)


def test_each_operation_is_declared_once() -> None:
    keys = [(op.method, op.path) for op in OPERATIONS]
    assert len(keys) == len(set(keys))
    for op in OPERATIONS:
        assert 200 <= op.success < 300, (op.method, op.path)


def test_a_node_state_on_the_wire() -> None:
    """The tick's node state as REST writes it: `Z` timestamps, a null for what it lacks."""
    from datetime import UTC, datetime, timedelta

    from calcgraph.domain.runs.state import NodeState
    from calcgraph.rest_compat.wire_workflows import NodeStateOut

    start = datetime(2026, 1, 1, tzinfo=UTC)
    state = NodeState(
        "failed",
        "j",
        error={"kind": "timeout", "message": "300 s"},
        attempt=1,
        started_at=start,
        finished_at=start + timedelta(seconds=300),
    )
    wire = NodeStateOut.model_validate(state, from_attributes=True).model_dump(mode="json")
    assert wire == {
        "status": "failed",
        "job_id": "j",
        "outputs": None,
        "outputs_omitted": False,
        "error": {"kind": "timeout", "message": "300 s"},
        "attempt": 1,
        "started_at": "2026-01-01T00:00:00Z",
        "finished_at": "2026-01-01T00:05:00Z",
        "attempts": [],
        "retry_at": None,
        "reused": False,
    }
