"""What ending a job's processes and threads costs the warm path (issue 27, point 4).

After every job the runner kills whatever the handler started and counts its threads (contract
section 8b); a job that left a thread has its sandbox stopped. Scenarios, each through the warm
pool (a real sandbox backend, no API in between), one call at a time:

- `sandbox_sweep_runner`: the sweep alone in a runner-like process with nothing to end (one
  `waitpid`, one listing of `/proc/self/task`): the cost every warm job pays;
- `sandbox_sweep_trivial`: a trivial job on a warm sandbox (the sweep finds nothing);
- `sandbox_sweep_fork`: the handler forks a child that outlives it: the runner kills and reaps
  it, and the sandbox stays warm;
- `sandbox_sweep_thread`: the handler leaves a thread: every job runs on a fresh sandbox (the
  price a handler pays for leaving threads).

Each figure gives the CPU per job of the caller and every sandbox process (`bench.tree_cpu`:
a cpuacct cgroup, so killed sandboxes count too) and the load average.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from bench.core import Deadline, Options, Result, summarise
from bench.tree_cpu import TreeCpu
from calcgraph.settings import Settings
from calcgraph.workers.sandbox import (
    Limits,
    SandboxBackend,
    SandboxSpec,
    SandboxUnavailable,
    WarmPool,
    create_backend,
)
from calcgraph.workers.sandbox.session import runner_source

CALLS = 300
MAX_SECONDS = 5.0
SOURCE = textwrap.dedent(
    """
    import os
    import threading
    import time


    def main(action):
        if action == "fork" and os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        if action == "thread":
            threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
        return {"ok": True}
    """
)
_SWEEP_ALONE = """
import json, sys, time
namespace = {"__name__": "runner"}
exec(sys.stdin.read(), namespace)
sweep, samples = namespace["_sweep"], []
for _ in range(5000):
    began = time.perf_counter_ns()
    sweep({"kill_all": False})
    samples.append(time.perf_counter_ns() - began)
print(json.dumps(samples))
"""


def _backends() -> list[SandboxBackend]:
    wanted = os.environ.get("CALCGRAPH_BENCH_SANDBOXES", "bwrap,process").split(",")
    found: list[SandboxBackend] = []
    for name in (w.strip() for w in wanted if w.strip()):
        try:
            backend = create_backend(Settings(_env_file=None), name, check=True)  # type: ignore[call-arg,arg-type]
        except SandboxUnavailable as exc:
            print(f"bench_sandbox_sweep: skipping {name}: {exc}")
            continue
        found.append(backend)
    return found


def _sweep_alone() -> Result:
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-I", "-c", _SWEEP_ALONE],
        input=runner_source(),
        capture_output=True,
        text=True,
        check=True,
    )
    samples: list[int] = json.loads(done.stdout)
    # The sweep is all the child does once started: its CPU per call is about its latency.
    return summarise(
        "sandbox_sweep_runner",
        "the sweep with nothing to end",
        "runner's _sweep in a child process, 5000 times",
        samples,
        time.perf_counter() - began,
        extra={"loadavg": [round(x, 2) for x in os.getloadavg()]},
    )


def _scenario(backend: SandboxBackend, code_dir: Path, action: str) -> Result:
    cpu = TreeCpu()
    with cpu.counting():  # before the pool starts its sandbox: the sandbox counts too
        pool = WarmPool(backend)
        spec = SandboxSpec(code_dir, "job:main", limits=Limits(timeout_seconds=30), tenant="u")
        latencies: list[int] = []
        errors = 0
        try:
            pool.run_spec("fv", spec, {"action": "trivial"})  # warm
            deadline = Deadline(MAX_SECONDS)
            before = cpu.seconds()
            began = time.perf_counter()
            for _ in range(CALLS):
                if deadline.passed:
                    break
                start = time.perf_counter_ns()
                result = pool.run_spec("fv", spec, {"action": action})
                latencies.append(time.perf_counter_ns() - start)
                errors += result.status != "success"
            elapsed = time.perf_counter() - began
            stats = pool.stats
        finally:
            pool.close()
        spent = cpu.seconds() - before  # the sandboxes ended by the close included
    load = [round(x, 2) for x in os.getloadavg()]
    return summarise(
        f"sandbox_sweep_{action}",
        f"{backend.name}, handler: {action}",
        f"WarmPool.run_spec, {backend.name} sandbox, one at a time",
        latencies,
        elapsed,
        errors,
        {
            "sandboxes_started": stats.starts,
            "cpu_ms_per_job": round(spent * 1000 / max(len(latencies), 1), 2),
            "cpu_counted_by": cpu.how,
            "loadavg": load,
        },
    )


def sweep(options: Options) -> list[Result]:
    results = [_sweep_alone()]
    with tempfile.TemporaryDirectory(prefix="calcgraph-bench-sweep-") as directory:
        code_dir = Path(directory) / "code"
        code_dir.mkdir()
        (code_dir / "job.py").write_text(SOURCE)
        for backend in _backends():
            try:
                for action in ("trivial", "fork", "thread"):
                    results.append(_scenario(backend, code_dir, action))
            finally:
                backend.close()
    for result in results:
        print(
            f"{result.benchmark:24} {result.scenario:32} p50 {result.p50_us:9.1f} us  "
            f"p99 {result.p99_us:9.1f} us  {result.extra}"
        )
    return results


BENCHMARKS = {"sandbox_sweep": sweep}
