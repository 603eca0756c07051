"""Package dependencies (issue 26, contract 11): what resolving and staging them costs.

In process, through the services over a migrated SQLite file (no HTTP, no sandbox):

- `dependencies_deploy`: one deployment (`publishing_service.publish`, one unit of work) of a
  one-function package declaring 0, 5 or 20 dependencies, each of which pinned 2 of its own
  (so a closure of 0, 15 or 60 packages): latency p50/p99 and CPU per deployment.
- `dependencies_code`: what a worker reads once per function version to stage it
  (`job_store_service.code`: its files, its closure's files merged under their import
  names), for the same closures: latency and CPU per read.

Every figure carries the load average; CPU is this process's user + system time per unit.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.core import Options, Result, summarise
from calcgraph.db.engine import Database
from calcgraph.domain.access.principal import Identity, Principal
from calcgraph.domain.access.service import access_service
from calcgraph.domain.jobs.store.service import job_store_service
from calcgraph.domain.packages.publishing.service import publishing_service
from calcgraph.migrations.runner import upgrade

SIZES = (0, 5, 20)
DEPLOYS = 40
READS = 200
IO = {"inputs": {"x": {"type": "Float"}}, "outputs": {"y": {"type": "Float"}}}


def _body(name: str, version: str, deps: dict[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    package: dict[str, Any] = {"name": name, "version": version}
    if deps:
        package["dependencies"] = deps
    manifest = {
        "kind": "package",
        "version": 1,
        "package": package,
        "functions": {"run": {"handler": "main:run", **IO}},
    }
    files = {"main.py": "def run(x):\n    return {'y': x}\n", "util.py": "K = 1\n" * 50}
    return manifest, files


def _cpu() -> float:
    return time.process_time()


async def _deploy(
    database: Database, alice: Principal, name: str, version: str, deps: dict[str, str]
) -> Any:
    manifest, files = _body(name, version, deps)
    async with database.write_session() as session:
        return await publishing_service.publish(session, alice, manifest, files)


async def _run(tmp: Path) -> list[Result]:
    url = f"sqlite+aiosqlite:///{tmp / f'deps-{uuid.uuid4().hex[:6]}.db'}"
    migrator = Database(url)
    try:
        await upgrade(migrator)
    finally:
        await migrator.dispose()
    database = Database(url)
    results: list[Result] = []
    try:
        identity = Identity("bench-alice", "alice", None, None, None, ("user",))
        async with database.write_session() as session:
            alice = await access_service.provision(session, identity)
        # 20 libraries, each pinning two leaves of its own.
        for i in range(max(SIZES)):
            leaves = {}
            for j in range(2):
                leaf = f"leaf-{i}-{j}"
                await _deploy(database, alice, leaf, "1.0.0", {})
                leaves[leaf] = "^1"
            await _deploy(database, alice, f"lib-{i}", "1.0.0", leaves)
        for size in SIZES:
            deps = {f"lib-{i}": "^1" for i in range(size)}
            latencies: list[int] = []
            version_id = ""
            cpu = _cpu()
            began = time.perf_counter()
            for n in range(DEPLOYS):
                start = time.perf_counter_ns()
                report = await _deploy(database, alice, f"app-{size}", f"1.0.{n}", deps)
                latencies.append(time.perf_counter_ns() - start)
                version_id = report.functions[0].version_id
                assert len(report.dependency_closure) == size * 3
            used = _cpu() - cpu
            results.append(
                summarise(
                    "dependencies_deploy",
                    f"{size} deps, closure {size * 3}",
                    "publishing_service, SQLite, one unit of work each",
                    latencies,
                    time.perf_counter() - began,
                    extra={"cpu_ms_per_deploy": round(used / DEPLOYS * 1000, 2)},
                )
            )
            latencies = []
            cpu = _cpu()
            began = time.perf_counter()
            for _ in range(READS):
                start = time.perf_counter_ns()
                async with database.read_session() as session:
                    code = await job_store_service.code(session, version_id)
                latencies.append(time.perf_counter_ns() - start)
                assert code is not None
                assert len(code.files) == 2 + 2 * size * 3
            used = _cpu() - cpu
            results.append(
                summarise(
                    "dependencies_code",
                    f"{size * 3}-package closure, {len(code.files)} files",
                    "job_store_service.code, SQLite, one read session each",
                    latencies,
                    time.perf_counter() - began,
                    extra={"cpu_ms_per_read": round(used / READS * 1000, 3)},
                )
            )
    finally:
        await database.dispose()
    return results


def dependencies(options: Options) -> list[Result]:
    with tempfile.TemporaryDirectory() as tmp:
        return asyncio.run(_run(Path(tmp)))


BENCHMARKS = {"dependencies": dependencies}
