"""GraphQL on a finished 10,000-node run, in-process (issue 14 goal 5): what the query costs the
server without HTTP, to isolate the execution from the transport (bench_scale measures it end
to end through uvicorn).

- `scale_graphql_asgi_10000_nodes`: the whole run in one query (every node state with its job)
  and the first page of 100, posted to the app through ASGI in-process (token checked, JSON
  answer serialised, no socket), on PostgreSQL. The run is made finished by writing its rows
  directly (10,000 `success` node states and their jobs), so the figure does not wait for
  10,000 executions; `extra` has the answer size, the statements per query, and the Python
  heap (tracemalloc) after the queries beside the one after the first.

PostgreSQL: `CALCGRAPH_BENCH_POSTGRES_URL` (default .../cg_runs_bench, reset at start).
"""

from __future__ import annotations

import asyncio
import gc
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from sqlalchemy import Table, event, insert, update

from bench.bench_scale import FIRST_PAGE, WHOLE_RUN
from bench.bench_workflows import Platform, _create_workflow, _runs, parallel_chains, platform
from bench.core import Options, Result, summarise
from calcgraph import heap
from calcgraph.domain.jobs.models import Job
from calcgraph.domain.runs.models import NodeState, WorkflowRun

NODES = 10_000
_JOBS = cast(Table, Job.__table__)
_NODES = cast(Table, NodeState.__table__)
_RUNS = cast(Table, WorkflowRun.__table__)


async def finished_run(bench: Platform, nodes: int) -> str:
    """A run of `nodes` nodes (100 parallel chains) whose every node succeeded with a job."""
    chains = 10 if nodes <= 100 else 100
    slug = await _create_workflow(
        bench, parallel_chains(bench.deployed.package_name, chains, nodes // chains)
    )
    (run_id,) = await _runs(bench, slug, 1)
    now = datetime.now(UTC)
    keys = [f"c{c}n{i}" for c in range(chains) for i in range(nodes // chains)]
    jobs = [
        {
            "id": str(uuid.uuid4()),
            "function_id": bench.deployed.functions["inc"],
            "function_version_id": bench.deployed.versions["inc"],
            "package_id": bench.deployed.package_id,
            "user_id": bench.owner.user_id,
            "status": "success",
            "inputs": {"x": float(i)},
            "resolved_inputs": {"x": float(i)},
            "outputs": {"y": float(i + 1)},
            "logs": "",
            "cache_hit": False,
            "workflow_run_id": run_id,
            "node_key": key,
            "attempt": 1,
            "deliveries": 1,
            "created_at": now,
            "updated_at": now,
            "started_at": now,
            "finished_at": now + timedelta(milliseconds=5),
        }
        for i, key in enumerate(keys)
    ]
    async with bench.database.write_session() as session:
        await session.execute(insert(_JOBS), jobs)
        for job in jobs:
            await session.execute(
                update(_NODES)
                .where(_NODES.c.run_id == run_id, _NODES.c.node_key == job["node_key"])
                .values(
                    status="success",
                    job_id=job["id"],
                    outputs=job["outputs"],
                    attempt=1,
                    started_at=job["started_at"],
                    finished_at=job["finished_at"],
                    revision=1,
                )
            )
        await session.execute(
            update(_RUNS)
            .where(_RUNS.c.id == run_id)
            .values(status="completed", revision=1, completed_at=now)
        )
    return run_id


async def measure(
    bench: Platform, query: str, run_id: str, count: int
) -> tuple[list[int], int, int]:
    """Latencies of `count` queries, the answer size and the statements of one query."""
    body = {"query": query, "variables": {"id": run_id}}
    statements = 0

    def counted(*_: Any) -> None:
        nonlocal statements
        statements += 1

    latencies: list[int] = []
    size = 0
    engine = bench.database.engine.sync_engine
    for i in range(count):
        if i == 0:
            event.listen(engine, "before_cursor_execute", counted)
        start = time.perf_counter_ns()
        response = await bench.client.post("/graphql", json=body, headers=bench.headers)
        latencies.append(time.perf_counter_ns() - start)
        if i == 0:
            event.remove(engine, "before_cursor_execute", counted)
        if response.status_code != 200 or b'"errors"' in response.content[:20]:
            raise RuntimeError(f"query failed: {response.text[:300]}")
        size = len(response.content)
    return latencies, size, statements


def graphql_10000(options: Options) -> list[Result]:
    async def run() -> list[Result]:
        results = []
        async with platform(postgres=True, workers=False) as bench:
            run_id = await finished_run(bench, NODES)
            for name, query, count in (
                ("first page of 100 node states with jobs", FIRST_PAGE, 40),
                ("whole run, every node state with its job", WHOLE_RUN, 10),
            ):
                await measure(bench, query, run_id, 2)  # warm: document cache, plans
                heap.settle()  # what the server's lifespan does
                gc.collect()
                t0, cpu0 = time.perf_counter(), time.process_time()
                latencies, size, statements = await measure(bench, query, run_id, count)
                cpu = time.process_time() - cpu0
                results.append(
                    summarise(
                        "scale_graphql_asgi_10000_nodes",
                        f"{NODES:,} nodes: {name}",
                        "ASGI in-process (no socket), token checked, PostgreSQL",
                        latencies,
                        time.perf_counter() - t0,
                        extra={
                            "answer_kb": round(size / 1024, 1),
                            "statements": statements,
                            # the app and the client share the process: CPU of both
                            "process_cpu_ms_per_query": round(cpu / count * 1000, 1),
                        },
                    )
                )
        return results

    return asyncio.run(run())


BENCHMARKS = {"scale_graphql_asgi_10000_nodes": graphql_10000}
