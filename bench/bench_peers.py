"""calcgraph next to its peers, side by side in one window: the same diamond and chain40.

`peers_side_by_side` keeps every side open at once and calls them in turn, one call at a time,
the order turning by one side each round (A B C, B C A, ...), so that whatever else the machine
does falls on every side alike; the ratios are of p50s measured in that same window.

- calcgraph over HTTP: `calcgraph serve` in its own process (uvicorn), PostgreSQL, in-process
  workers, an RS256 token, long-poll ticks; once with chain execution (the default) and once with
  node execution (one tracked job per node), each server on a database of its own.
- calcgraph in-process: the same app through ASGI on SQLite, both execution modes.
- Prefect 3 (bench/peers/prefect), its flows run by one runner process as a user runs them
  locally (no PREFECT_API_URL: its temporary API server starts at the first call, SQLite in a
  fresh PREFECT_HOME), with its defaults and with the flow-run heartbeat off. The heartbeat-off
  figure is the fair one: a synchronous flow call joins the heartbeat thread on the way out, and
  that thread sleeps in one-second steps, so the defaults' figure is mostly that sleep.
- Dagster (bench/peers/dagster), `execute_in_process`, ephemeral instance.

The first call of each flow on each side is a warm-up, not counted (sandboxes started, code
staged, Prefect's server started). Beside each p50: the CPU one call cost that side's processes
(calcgraph: the server and its sandboxes with the PostgreSQL backends of its database, or this
process and its sandboxes in-process; a peer: its runner and every process it started), the
figure that survives a loaded machine. chain40 with node execution is the like-for-like
comparison with the peers' tracked tasks (every node its own job, as every Prefect task and
Dagster op is tracked); with chain execution one job runs the forty nodes.

Each peer lives in its own virtual environment, bench/peers/NAME/.venv, made on demand and kept
while its requirements.txt is unchanged. When one cannot be installed (no network) or its runner
fails, the benchmark prints "peer skipped: why" and goes on without it.

Published chain40 figures (Windmill's engine study: Windmill, Prefect 2, Kestra; one worker, the
same 40 x fibo(10) flow) are printed beside ours, labelled "published, not measured": a Windmill
worker ships only as a container image, which this machine cannot fetch.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from rich.console import Console
from rich.table import Table

from bench.bench_workflows import chain, diamond, platform
from bench.core import Options, Result, summarise
from bench.scale_client import POSTGRES_URL, api, cpu_seconds

PREFECT = Path(__file__).resolve().parent / "peers" / "prefect"
DAGSTER = Path(__file__).resolve().parent / "peers" / "dagster"
RUNS = 10  # counted calls per side and flow, after one warm-up; a Prefect call takes seconds
FLOWS: dict[str, Callable[[str], list[dict[str, Any]]]] = {
    "diamond": diamond,
    "chain40": lambda package: chain(package, 40),
}
MODES = ("chain", "node")
# The aims, for the diamond over HTTP with PostgreSQL: at least 3x Dagster's in-process
# executor and 10x Prefect with its heartbeat off (the fair Prefect figure).
TARGETS = {"Dagster": 3.0, "Prefect, heartbeat off": 10.0}
# Windmill's engine study (windmill.dev/docs/misc/benchmarks/competitors, run in 2025):
# Python, one worker, a flow of 40 sequential fibo(10) tasks, total seconds.
PUBLISHED_CHAIN40 = (
    ("Windmill 1.483.1, dedicated worker", 2.092),
    ("Windmill 1.483.1, normal worker", 4.383),
    ("Prefect 2.14.4, served, PostgreSQL", 4.872),
    ("Kestra 0.22.3", 6.044),
)
ANSWER_TIMEOUT_S = 600.0


class PeerUnavailable(Exception):
    """The peer cannot be installed or started here; its comparison is skipped."""


def ensure_venv(folder: Path) -> float | None:
    """Create folder/.venv from folder/requirements.txt unless it already matches.

    Returns the install time in seconds, or None when the environment was already there.
    """
    requirements = (folder / "requirements.txt").read_text()
    venv = folder / ".venv"
    python = venv / "bin" / "python"
    stamp = venv / ".requirements"  # written last: a half-made venv is made again
    if python.exists() and stamp.exists() and stamp.read_text() == requirements:
        return None
    t0 = time.perf_counter()
    steps = (
        [sys.executable, "-m", "venv", "--clear", str(venv)],
        # One retry and a short timeout: without the network, fail in seconds, not minutes.
        [str(python), "-m", "pip", "install", "-q", "--retries", "1", "--timeout", "20"]
        + ["-r", str(folder / "requirements.txt")],
    )
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, timeout=900, check=False)
        if done.returncode != 0:
            lines = [ln for ln in done.stderr.splitlines() if not ln.startswith("WARNING:")]
            raise PeerUnavailable(f"{' '.join(step[:4])} failed: {' / '.join(lines[-3:])}")
    stamp.write_text(requirements)
    return time.perf_counter() - t0


def _process_tree(root: int, skip: set[int]) -> list[int]:
    """`root` and its descendants, leaving out the subtrees rooted at `skip`."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError), open(f"/proc/{entry}/stat") as stat:
                ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
                parents.setdefault(ppid, []).append(int(entry))
    found, todo = [root], [root]
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in skip:
                found.append(child)
                todo.append(child)
    return found


def _cpu_of(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):
            total += cpu_seconds(pid)
    return total


@dataclass
class Side:
    """One way of running the two flows: `call(flow, x)` returns the wall time in ns;
    `cpu()` the CPU seconds its processes have used so far."""

    name: str
    peer: str  # "calcgraph", "Prefect", "Prefect, heartbeat off", "Dagster"
    setup: str
    call: Callable[[str, float], Awaitable[int]]
    cpu: Callable[[], float]
    latencies: dict[str, list[int]] = field(default_factory=dict)
    cpu_s: dict[str, list[float]] = field(default_factory=dict)

    async def timed(self, flow: str, x: float, *, count: bool) -> None:
        before = self.cpu()
        took = await self.call(flow, x)
        spent = self.cpu() - before
        if count:
            self.latencies.setdefault(flow, []).append(took)
            self.cpu_s.setdefault(flow, []).append(spent)


class Runner:
    """A peer's runner process: one JSON request a line on stdin, one JSON answer a line."""

    def __init__(self, process: asyncio.subprocess.Process, log: IO[bytes], version: str):
        self.process = process
        self.log = log
        self.version = version
        self.pid = process.pid

    @classmethod
    @contextlib.asynccontextmanager
    async def started(cls, folder: Path, env: dict[str, str]) -> AsyncIterator[Runner]:
        with tempfile.TemporaryFile() as log:
            process = await asyncio.create_subprocess_exec(
                str(folder / ".venv" / "bin" / "python"),
                "runner.py",
                cwd=folder,
                env=env,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
            )
            try:
                runner = cls(process, log, "")
                runner.version = str((await runner._answer())["version"])
                yield runner
            finally:
                if process.stdin is not None:
                    process.stdin.close()
                try:
                    await asyncio.wait_for(process.wait(), 30)
                except TimeoutError:
                    process.kill()
                    await process.wait()

    async def _answer(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), ANSWER_TIMEOUT_S)
        if not line:
            self.log.seek(0)
            tail = self.log.read().decode(errors="replace")[-2000:]
            raise RuntimeError(f"the runner stopped ({self.process.returncode}):\n{tail}")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"the runner failed: {answer['error']}")
        return answer

    async def ask(self, **request: Any) -> int:
        assert self.process.stdin is not None
        self.process.stdin.write((json.dumps(request) + "\n").encode())
        await self.process.stdin.drain()
        return int((await self._answer())["ns"])

    def cpu(self) -> float:
        return _cpu_of(_process_tree(self.pid, set()))


def _peer_env(prefix: str, home: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefix)}
    if prefix == "PREFECT_" and home is not None:
        env["PREFECT_HOME"] = home
        # Startup is not measured; on a loaded shared machine it can pass the default 20 s.
        env["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "180"
    if prefix == "DAGSTER_" and home is not None:
        env["DAGSTER_HOME"] = home
    return env


async def _peer_sides(
    stack: contextlib.AsyncExitStack, skipped: list[str], skip: set[int]
) -> list[Side]:
    """Prefect (two sides, one runner) and Dagster; their runners' pids go into `skip`."""
    sides: list[Side] = []
    for folder, prefix in ((PREFECT, "PREFECT_"), (DAGSTER, "DAGSTER_")):
        peer = folder.name.capitalize()
        try:
            installed = ensure_venv(folder)
            home = stack.enter_context(tempfile.TemporaryDirectory(prefix=f"bench-{folder.name}-"))
            runner = await stack.enter_async_context(
                Runner.started(folder, _peer_env(prefix, home))
            )
        except (PeerUnavailable, OSError, subprocess.TimeoutExpired, RuntimeError) as exc:
            print(f"peer skipped: {peer} could not be installed or started: {exc}")
            skipped.append(peer)
            continue
        skip.add(runner.pid)
        how = "already installed" if installed is None else f"installed in {installed:.0f} s"
        print(f"{peer} {runner.version}, {how}")
        if folder is PREFECT:
            setup = (
                "Prefect flow call to return, default task runner (threads of the caller), "
                "temporary local API server, SQLite"
            )
            for mode, label in (
                ("default", "Prefect"),
                ("heartbeat_off", "Prefect, heartbeat off"),
            ):

                async def call(flow: str, x: float, mode: str = mode, r: Runner = runner) -> int:
                    return await r.ask(flow=flow, mode=mode, x=x)

                which = "defaults" if mode == "default" else "flow-run heartbeat off"
                name = f"Prefect {runner.version} ({which})"
                sides.append(Side(name, label, setup, call, runner.cpu))
        else:

            async def ask(flow: str, x: float, r: Runner = runner) -> int:
                return await r.ask(flow=flow, x=x)

            setup = (
                "Dagster execute_in_process call to return, in-process executor, ephemeral instance"
            )
            sides.append(
                Side(f"Dagster {runner.version} (in-process)", "Dagster", setup, ask, runner.cpu)
            )
    return sides


async def _http_side(
    stack: contextlib.AsyncExitStack, mode: str, sandbox: str, skip: set[int]
) -> Side:
    url = POSTGRES_URL if mode == "chain" else f"{POSTGRES_URL}_node"
    served = await stack.enter_async_context(
        api(
            postgres_url=url,
            extra_env={"CALCGRAPH_CHAIN_EXECUTION": mode, "CALCGRAPH_SANDBOX": sandbox},
        )
    )
    skip.add(served.pid)
    slugs = {flow: await served.workflow(nodes(served.package)) for flow, nodes in FLOWS.items()}
    backends: list[int] = []

    async def call(flow: str, x: float) -> int:
        t0 = time.perf_counter_ns()
        await served.run_to_end(slugs[flow], x, limit_s=ANSWER_TIMEOUT_S)
        took = time.perf_counter_ns() - t0
        if not backends:  # after the warm-up call: the pool keeps what it opened
            backends.extend(await served.postgres_backends())
        return took

    def cpu() -> float:
        return _cpu_of(_process_tree(served.pid, set()) + backends)

    setup = served.setup.replace("process sandbox", f"{sandbox} sandbox") + ", long-poll ticks"
    return Side(f"calcgraph HTTP PostgreSQL, {mode} execution", "calcgraph", setup, call, cpu)


async def _asgi_side(
    stack: contextlib.AsyncExitStack, mode: str, sandbox: str, skip: set[int]
) -> Side:
    bench = await stack.enter_async_context(platform(chain_execution=mode, sandbox=sandbox))
    slugs = {
        flow: await bench.workflow(nodes(bench.deployed.package_name))
        for flow, nodes in FLOWS.items()
    }

    async def call(flow: str, x: float) -> int:
        t0 = time.perf_counter_ns()
        await bench.run_to_end(slugs[flow], x)
        return time.perf_counter_ns() - t0

    def cpu() -> float:  # this process and its sandboxes, the other sides' processes left out
        return _cpu_of(_process_tree(os.getpid(), skip))

    setup = f"ASGI in-process, SQLite, in-process broker, {sandbox} sandbox, long-poll ticks"
    return Side(f"calcgraph in-process SQLite, {mode} execution", "calcgraph", setup, call, cpu)


def _ms(us: float) -> str:
    return f"{us / 1000:,.1f} ms"


def _results(sides: list[Side], loads: dict[str, tuple[float, float]]) -> list[Result]:
    results: list[Result] = []
    for flow in FLOWS:
        ours = [s for s in sides if s.peer == "calcgraph"]
        p50: dict[str, float] = {}
        for side in sides:
            latencies = side.latencies.get(flow, [])
            if not latencies:
                continue
            cpu = sorted(side.cpu_s[flow])
            result = summarise(
                f"peers_{flow}",
                side.name,
                side.setup,
                latencies,
                sum(latencies) / 1e9,
                extra={
                    "cpu_ms_per_call_p50": round(cpu[len(cpu) // 2] * 1000, 1),
                    "cpu_ms_per_call_mean": round(sum(cpu) / len(cpu) * 1000, 1),
                    "loadavg_before_after": loads[flow],
                },
            )
            p50[side.name] = result.p50_us
            results.append(result)
        for result in results:
            peer = next(s for s in sides if s.name == result.scenario).peer
            if result.benchmark == f"peers_{flow}" and peer != "calcgraph":
                result.extra["ratio_p50_vs_calcgraph"] = {
                    o.name: round(result.p50_us / p50[o.name], 2) for o in ours if o.name in p50
                }
                if flow == "diamond" and peer in TARGETS:
                    result.extra["target_ratio_vs_http_postgresql"] = TARGETS[peer]
    return results


def _print(sides: list[Side], results: list[Result], note: str) -> None:
    console = Console(width=None if sys.stdout.isatty() else 200)
    by = {(r.benchmark, r.scenario): r for r in results}
    for flow in FLOWS:
        load = next(
            (r.extra["loadavg_before_after"] for r in results if r.benchmark == f"peers_{flow}"),
            None,
        )
        out = Table(
            title=f"{flow}: calcgraph vs its peers, calls alternating (load {load}; {note})",
            title_justify="left",
        )
        for column in (
            "side",
            "p50",
            "p99",
            "CPU/call p50",
            "Prefect ratio",
            "Prefect hb-off ratio",
            "Dagster ratio",
        ):
            out.add_column(column, justify="left" if column == "side" else "right")
        peers = {s.peer: by.get((f"peers_{flow}", s.name)) for s in sides if s.peer != "calcgraph"}
        for side in sides:
            mine = by.get((f"peers_{flow}", side.name))
            if mine is None:
                continue
            cells = [
                side.name,
                _ms(mine.p50_us),
                _ms(mine.p99_us),
                f"{mine.extra['cpu_ms_per_call_p50']} ms",
            ]
            for peer in ("Prefect", "Prefect, heartbeat off", "Dagster"):
                theirs = peers.get(peer)
                if side.peer != "calcgraph" or theirs is None:
                    cells.append("")
                    continue
                ratio = theirs.p50_us / mine.p50_us
                target = TARGETS.get(peer) if flow == "diamond" and "HTTP" in side.name else None
                verdict = (
                    ""
                    if target is None
                    else (" [green]met[/]" if ratio >= target else f" [red]< {target:g}x[/]")
                )
                cells.append(f"{ratio:,.1f}x{verdict}")
            out.add_row(*cells)
        console.print(out)
    console.print(
        "  isolation: calcgraph runs every job in a sandbox process apart from the API and commits "
        "each state; Prefect runs tasks in threads of the caller and Dagster ops in the calling "
        "process, with no isolation between tasks or from the caller"
    )
    console.print(f"  load average now: {os.getloadavg()[0]:.2f} (1 min) on {os.cpu_count()} CPUs")
    chain40 = [
        r for r in results if r.benchmark == "peers_chain40" and r.scenario.startswith("calcgraph")
    ]
    best = min(chain40, key=lambda r: r.p50_us, default=None)
    ref = Table(
        title="chain40, published, not measured (Windmill's engine study, Python, one worker, "
        "2025; another machine)",
        title_justify="left",
    )
    for column in ("engine", "total", "per task", "vs our best chain40 p50"):
        ref.add_column(column, justify="left" if column == "engine" else "right")
    for engine, seconds in PUBLISHED_CHAIN40:
        versus = f"{seconds * 1e6 / best.p50_us:,.1f}x" if best else ""
        ref.add_row(engine, f"{seconds:.3f} s", f"{seconds / 40 * 1000:.0f} ms", versus)
    console.print(ref)


def side_by_side(options: Options) -> list[Result]:
    async def run() -> list[Result]:
        sandbox = "bwrap" if shutil.which("bwrap") else "process"
        skipped: list[str] = []
        skip: set[int] = set()
        async with contextlib.AsyncExitStack() as stack:
            sides = await _peer_sides(stack, skipped, skip)
            for mode in MODES:
                sides.insert(0, await _http_side(stack, mode, sandbox, skip))
            for mode in MODES:
                sides.insert(0, await _asgi_side(stack, mode, sandbox, skip))
            loads: dict[str, tuple[float, float]] = {}
            for flow in FLOWS:
                for side in sides:
                    await side.timed(flow, -1.0, count=False)  # warm-up
                before = round(os.getloadavg()[0], 2)
                for i in range(RUNS):
                    order = sides[i % len(sides) :] + sides[: i % len(sides)]
                    for side in order:
                        await side.timed(flow, i + time.time() % 1, count=True)
                loads[flow] = (before, round(os.getloadavg()[0], 2))
        results = _results(sides, loads)
        note = f"{RUNS} calls each after one warm-up" + (
            f"; skipped: {', '.join(skipped)}" if skipped else ""
        )
        _print(sides, results, note)
        return results

    return asyncio.run(run())


BENCHMARKS = {"peers_side_by_side": side_by_side}
