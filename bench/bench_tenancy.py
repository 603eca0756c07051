"""The cost of per-user warm sandboxes (issue 12, hole 2): five users call one public function.

Warm sandboxes are keyed by (function version, user), so five callers need five sandboxes where
one used to serve them all. Each scenario runs the same calls through the warm pool (a real
sandbox backend, no API in between), round robin over the users, one at a time and five at a
time, and reports the latency per call with the pool's hit rate (jobs on a warm sandbox / all
jobs) and the sandboxes started:

- `shared`: every user on one tenant: what the pool did before (unsafe; the baseline);
- `per_user`: each user on their own tenant: what the pool does now.
"""

from __future__ import annotations

import os
import tempfile
import textwrap
import threading
import time
from pathlib import Path

from bench.core import Deadline, Options, Result, summarise
from calcgraph.settings import Settings
from calcgraph.workers.sandbox import (
    Limits,
    RunRequest,
    SandboxBackend,
    SandboxUnavailable,
    WarmPool,
    create_backend,
)

USERS = [f"user{i}" for i in range(5)]
CALLS = 400
MAX_SECONDS = 8.0
SOURCE = textwrap.dedent(
    """
    def cantilever(length, force):
        return {"moment": length * force, "deflection": force * length ** 3 / 3e9}
    """
)


def _backends() -> list[SandboxBackend]:
    wanted = os.environ.get("CALCGRAPH_BENCH_SANDBOXES", "bwrap,process").split(",")
    found: list[SandboxBackend] = []
    for name in (w.strip() for w in wanted if w.strip()):
        try:
            backend = create_backend(Settings(_env_file=None), name, check=True)  # type: ignore[call-arg,arg-type]
        except SandboxUnavailable as exc:
            print(f"bench_tenancy: skipping {name}: {exc}")
            continue
        found.append(backend)
    return found


def _scenario(backend: SandboxBackend, code_dir: Path, per_user: bool, concurrency: int) -> Result:
    pool = WarmPool(backend, max_size=200)
    limits = Limits(timeout_seconds=30)
    latencies: list[int] = []
    errors = 0
    lock = threading.Lock()
    counter = iter(range(10**9))

    def call(user: str, i: int) -> None:
        nonlocal errors
        inputs = {"length": 2.0 + i % 7, "force": 1000.0}
        request = RunRequest(
            code_dir, "beam:cantilever", inputs, ("moment", "deflection"), limits,
            tenant=user if per_user else "",
        )  # fmt: skip
        began = time.perf_counter_ns()
        result = pool.run("fv-public", request)
        took = time.perf_counter_ns() - began
        with lock:
            latencies.append(took)
            errors += result.status != "success"

    deadline = Deadline(MAX_SECONDS)

    def worker(offset: int) -> None:
        while not deadline.passed:
            i = next(counter)
            if i >= CALLS:
                return
            call(USERS[(i + offset) % len(USERS)], i)

    began = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(n,)) for n in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    stats = pool.stats
    pool.close()
    jobs = stats.hits + stats.starts
    warm = sorted(latencies)[stats.starts :] if concurrency == 1 else []
    extra: dict[str, object] = {
        "users": len(USERS),
        "hit_rate": round(stats.hits / jobs, 4) if jobs else None,
        "sandboxes_started": stats.starts,
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }
    if warm:
        extra["warm_p50_us"] = round(warm[len(warm) // 2] / 1000, 1)
    return summarise(
        f"tenancy_{'per_user' if per_user else 'shared'}",
        f"{backend.name}, 5 users, {concurrency} at a time",
        f"WarmPool.run, {backend.name} sandbox, round robin over 5 users",
        latencies,
        elapsed,
        errors,
        extra,
    )


def tenancy(options: Options) -> list[Result]:
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="calcgraph-bench-tenancy-") as directory:
        code_dir = Path(directory) / "code"
        code_dir.mkdir()
        (code_dir / "beam.py").write_text(SOURCE)
        for backend in _backends():
            try:
                for concurrency in (1, 5):
                    for per_user in (False, True):
                        result = _scenario(backend, code_dir, per_user, concurrency)
                        print(
                            f"{result.benchmark:20} {result.scenario:32} "
                            f"p50 {result.p50_us:9.0f} us  p99 {result.p99_us:9.0f} us  "
                            f"{result.rps:7.1f}/s  {result.extra}"
                        )
                        results.append(result)
            finally:
                backend.close()
    return results


BENCHMARKS = {"tenancy": tenancy}
