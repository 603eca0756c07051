"""GET /metrics: Prometheus text, public, HTTP series by route template; jobs by status and queue
depth from the database and the broker; tick, job run, warm pool and result cache series moved
by a real execution and real ticks."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Callable

import httpx
import pytest
from starlette.applications import Starlette

from calcgraph.db.engine import Database
from tests.access.factories import create_user
from tests.auth.idp import LocalIdentityProvider
from tests.execution.conftest import Platform
from tests.execution.factories import deploy
from tests.ops.conftest import Samples, parse_metrics, value
from tests.workflows.graphs import fn, inp

pytestmark = pytest.mark.db

CHECK = {"source": "Force", "target": "Numeric"}
REQUESTS = "calcgraph_http_requests_total"
# A label value that is a raw path segment: an id (ours are uuid-like) or a number.
RAW_ID = re.compile(r"[0-9a-f]{8}-?[0-9a-f]{4}|/\d+(/|$)")


async def scrape(client: httpx.AsyncClient) -> Samples:
    response = await client.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return parse_metrics(response.text)


async def test_metrics_is_public_prometheus_text(client: httpx.AsyncClient) -> None:
    response = await client.get("/metrics")
    assert response.status_code == 200
    assert "# TYPE calcgraph_http_requests_total counter" in response.text
    assert "# TYPE calcgraph_http_request_duration_seconds histogram" in response.text
    assert "# TYPE calcgraph_jobs gauge" in response.text


async def test_http_series_by_route_template_method_and_status(
    client: httpx.AsyncClient, bearer: Callable[..., dict[str, str]]
) -> None:
    before = await scrape(client)
    for _ in range(3):
        assert (await client.post("/types/check-connection", json=CHECK)).status_code == 200
    missing = [str(uuid.uuid4()) for _ in range(2)]
    for job_id in missing:
        response = await client.get(f"/jobs/{job_id}", headers=bearer("alice"))
        assert response.status_code == 404
    assert (await client.get(f"/jobs/{missing[0]}")).status_code == 401  # refused before routing
    assert (await client.get("/no/such/path/42")).status_code == 404
    query = await client.post("/graphql", json={"query": "{ __typename }"})
    assert query.status_code == 200
    after = await scrape(client)

    def delta(**labels: str) -> float:
        return value(after, REQUESTS, **labels) - value(before, REQUESTS, **labels)

    check = {"route": "/types/check-connection", "method": "POST"}
    assert delta(**check, status="200") == 3
    assert delta(route="/jobs/{job_id}", method="GET", status="404") == 2
    assert delta(route="/jobs/{job_id}", method="GET", status="401") == 1
    assert delta(route="<unmatched>", method="GET", status="404") == 1
    assert delta(route="/graphql query", method="POST", status="200") == 1
    histogram = "calcgraph_http_request_duration_seconds_count"
    assert (
        value(after, histogram, **check, status="200")
        - value(before, histogram, **check, status="200")
        == 3
    )
    labels = {v for (name, pairs) in after for k, v in pairs if k == "route"}
    assert "/jobs/{job_id}" in labels
    assert not [label for label in labels if RAW_ID.search(label)], labels


async def test_graphql_route_names_the_operation_type(
    client: httpx.AsyncClient, bearer: Callable[..., dict[str, str]]
) -> None:
    before = await scrape(client)
    mutation = 'mutation { createOrganization(slug: "ops-metrics", name: "Ops") { __typename } }'
    response = await client.post("/graphql", json={"query": mutation}, headers=bearer("alice"))
    assert response.status_code == 200
    after = await scrape(client)
    labels = {"route": "/graphql mutation", "method": "POST", "status": "200"}
    assert value(after, REQUESTS, **labels) - value(before, REQUESTS, **labels) == 1


async def test_jobs_by_status_and_queue_depth_without_workers(
    app: Starlette,
    client: httpx.AsyncClient,
    database: Database,
    identity_provider: LocalIdentityProvider,
) -> None:
    # This app's lifespan never ran: no worker takes the job, which stays queued.
    alice = await create_user(database, identity_provider, "alice")
    deployed = await deploy(database, alice)
    before = await scrape(client)
    response = await client.post(
        f"/functions/{deployed.functions['add']}/execute",
        json={"inputs": {"x": 1, "y": 2}},
        params={"wait": 0},
        headers=identity_provider.headers("alice"),
    )
    assert response.status_code == 202, response.text
    after = await scrape(client)
    queued = value(after, "calcgraph_jobs", status="queued")
    assert queued - value(before, "calcgraph_jobs", status="queued") == 1
    assert value(after, "calcgraph_queue_depth") == queued
    assert value(after, "calcgraph_broker_queue_length") == (
        value(before, "calcgraph_broker_queue_length") + 1
    )
    for status in ("running", "success", "failed"):
        assert ("calcgraph_jobs", (("status", status),)) in after


async def test_execution_moves_job_pool_and_cache_series(platform: Platform) -> None:
    alice = await platform.user("alice")
    deployed = await deploy(platform.database, alice)
    path = f"/functions/{deployed.functions['add']}/execute"
    before = await scrape(platform.client)

    first = await platform.execute(path, {"x": 1, "y": 2}, wait=20)
    assert first.json()["status"] == "success", first.text
    cached = await platform.execute(path, {"x": 1, "y": 2}, wait=20)
    assert cached.json()["status"] == "success"
    job = await platform.client.get(
        f"/jobs/{cached.json()['job_id']}", headers=platform.headers("alice")
    )
    assert job.json()["cache_hit"] is True
    warm = await platform.execute(path, {"x": 5, "y": 6}, wait=20)
    assert warm.json()["status"] == "success"
    # The worker stores a result in the cache just after recording it, so the answer can come
    # first: wait (bounded) for the second store rather than read the counters too early.
    for _ in range(100):
        after = await scrape(platform.client)
        stores = value(after, "calcgraph_result_cache_stores_total")
        if stores - value(before, "calcgraph_result_cache_stores_total") >= 2:
            break
        await asyncio.sleep(0.1)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    # Two sandbox runs (the cached answer ran nothing), the second on the first one's sandbox.
    assert delta("calcgraph_job_runs_total", status="success", error_kind="") == 2
    assert delta("calcgraph_job_run_duration_seconds_count") == 2
    assert delta("calcgraph_warm_pool_hits_total") >= 1
    assert delta("calcgraph_warm_pool_hits_total") + delta("calcgraph_warm_pool_starts_total") == 2
    assert value(after, "calcgraph_warm_pool_idle_sandboxes") >= 1
    assert 0 < value(after, "calcgraph_warm_pool_hit_ratio") <= 1
    assert delta("calcgraph_result_cache_lookups_total", result="hit") == 1
    assert delta("calcgraph_result_cache_lookups_total", result="miss") == 2
    assert delta("calcgraph_result_cache_stores_total") == 2
    assert delta("calcgraph_jobs", status="success") == 3  # the cached answer is a job row too


async def test_ticks_are_timed(platform: Platform) -> None:
    alice = await platform.user("alice")
    deployed = await deploy(platform.database, alice)
    slug = f"ops-{uuid.uuid4().hex[:8]}"
    graph = {"nodes": [inp("a"), inp("b"), fn("S", f"{deployed.package_name}/add", x="a", y="b")]}
    headers = platform.headers("alice")
    created = await platform.client.post(
        "/workflows", json={"slug": slug, "name": slug, "graph": graph}, headers=headers
    )
    assert created.status_code == 201, created.text
    run = await platform.client.post(
        f"/workflows/{slug}/runs", json={"inputs": {"a": 1, "b": 2}}, headers=headers
    )
    assert run.status_code == 201, run.text
    before = await scrape(platform.client)
    ticks = 0
    status = run.json()["status"]
    while status not in ("completed", "failed") and ticks < 20:
        ticked = await platform.client.post(
            f"/workflow-runs/{run.json()['id']}/tick", params={"wait": 5}, headers=headers
        )
        assert ticked.status_code == 200, ticked.text
        status, ticks = ticked.json()["status"], ticks + 1
    assert status == "completed"
    after = await scrape(platform.client)
    count = "calcgraph_tick_duration_seconds_count"
    assert value(after, count) - value(before, count) == ticks
    assert value(after, "calcgraph_tick_duration_seconds_sum") > value(
        before, "calcgraph_tick_duration_seconds_sum"
    )
