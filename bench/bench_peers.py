"""calcgraph next to its peers (issue 7): the same diamond and chain40, side by side, one run.

- `peers_prefect`: our `workflow_diamond_asgi` and `workflow_chain40_asgi` benchmarks (imported from
  bench_workflows, not copied; every row they give, one per execution mode), then the same two
  workflows as Prefect 3 flows (bench/peers/prefect/flows.py), each timed end to end (call to
  return), one call at a time. Prefect runs the way a user runs it locally: no PREFECT_API_URL,
  so its temporary API server starts at the first call, its SQLite database in a fresh
  PREFECT_HOME. The first call of each flow is a warm-up that is not counted, so server startup
  is excluded (its time is printed apart).
  Printed: p50/p99 of each and the ratio Prefect p50 / ours p50 against the target (at least
  20 times). Prefect's defaults are the headline; a second Prefect series, its calls
  alternating with the first, has the flow-run heartbeat off: a synchronous flow call joins
  that thread on the way out, and it sleeps in one-second steps.
  Prefect lives in its own virtual environment, bench/peers/prefect/.venv, made on demand and
  kept while requirements.txt is unchanged. When it cannot be installed (no network) or its
  runner fails, the benchmark prints "peer skipped: why" and returns our figures alone.
- `peers_side_by_side` also runs the same two workflows as Dagster jobs
  (bench/peers/dagster/jobs.py) with `execute_in_process`, in their own venv
  (bench/peers/dagster/.venv, made on demand like Prefect's), 10 calls each after a warm-up.
  The table says what isolation each side has beside its figures, and the ratio of p50s.
- Published chain40 figures (Windmill's engine study: Windmill, Prefect 2, Kestra; one worker,
  the same 40 x fibo(10) flow) are printed beside ours, labelled "published, not measured": a
  Windmill worker ships only as a container image, which this machine cannot fetch.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.bench_workflows import BENCHMARKS as WORKFLOW_BENCHMARKS
from bench.core import Options, Result, summarise

PREFECT = Path(__file__).resolve().parent / "peers" / "prefect"
DAGSTER = Path(__file__).resolve().parent / "peers" / "dagster"
DAGSTER_RUNS = 10
ISOLATION = {
    "calcgraph": "every node a job in a warm sandbox process apart from the API (bwrap when "
    "installed: own namespaces, rlimits), each state committed to SQLite",
    "Prefect": "tasks in threads of the calling process (default task runner): no isolation "
    "between tasks or from the caller; states sent to a local API server (SQLite)",
    "Dagster": "in-process executor: ops one after another in the calling process, no isolation "
    "between ops or from the caller; ephemeral in-memory instance",
}
PREFECT_RUNS = 10  # a Prefect flow call takes about a second; 10 keeps the run to a minute
TARGET = 20.0
FLOWS = {"diamond": "workflow_diamond_asgi", "chain40": "workflow_chain40_asgi"}
# Windmill's engine study (windmill.dev/docs/misc/benchmarks/competitors, run in 2025):
# Python, one worker, a flow of 40 sequential fibo(10) tasks, total seconds.
PUBLISHED_CHAIN40 = (
    ("Windmill 1.483.1, dedicated worker", 2.092),
    ("Windmill 1.483.1, normal worker", 4.383),
    ("Prefect 2.14.4, served, PostgreSQL", 4.872),
    ("Kestra 0.22.3", 6.044),
)


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


def parse_report(stdout: str) -> dict[str, Any]:
    """The runner's JSON object: the last line of its output that is one."""
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            report: dict[str, Any] = json.loads(line)
            return report
    raise ValueError(f"no JSON report in the runner's output: {stdout[-300:]!r}")


def run_dagster(runs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="calcgraph-bench-dagster-") as home:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DAGSTER_")}
        env["DAGSTER_HOME"] = home
        done = subprocess.run(
            [str(DAGSTER / ".venv" / "bin" / "python"), "runner.py", str(runs)],
            cwd=DAGSTER,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"Dagster runner failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return parse_report(done.stdout)


def run_prefect(runs: int) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    with tempfile.TemporaryDirectory(prefix="calcgraph-bench-prefect-") as home:
        env["PREFECT_HOME"] = home
        # Startup is not measured; on a loaded shared machine it can pass the default 20 s.
        env["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "180"
        done = subprocess.run(
            [str(PREFECT / ".venv" / "bin" / "python"), "runner.py", str(runs)],
            cwd=PREFECT,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"Prefect runner failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return parse_report(done.stdout)


def _prefect_result(flow: str, label: str, measured: dict[str, Any], ours: list[Result]) -> Result:
    return _peer_result(
        flow,
        label,
        "Prefect flow call to return, default task runner, temporary local server, SQLite",
        measured,
        ours,
    )


def _peer_result(
    flow: str, label: str, setup: str, measured: dict[str, Any], ours: list[Result]
) -> Result:
    result = summarise(
        f"peers_{flow}",
        label,
        setup,
        measured["latencies_ns"],
        measured["seconds"],
    )
    extra = {
        "first_call_s": round(measured["first_call_s"], 3),
        "ratio_p50_vs_calcgraph": {o.scenario: round(result.p50_us / o.p50_us, 2) for o in ours},
        "target_ratio": TARGET,
    }
    return dataclasses.replace(result, extra=extra)


def _ms(us: float) -> str:
    return f"{us / 1000:,.1f} ms"


def _print(ours: dict[str, list[Result]], peers: dict[str, list[Result]], note: str) -> None:
    console = Console(width=None if sys.stdout.isatty() else 180)
    out = Table(title=f"calcgraph vs its peers, side by side ({note})", title_justify="left")
    columns = ("flow", "calcgraph", "p50", "p99", "peer", "p50 ", "p99 ", "ratio p50", "≥20x")
    for column in columns:
        out.add_column(column, justify="right" if column.startswith(("p", "r", "≥")) else "left")
    for flow, rows in ours.items():
        for our in rows:
            mine = (flow, our.scenario, _ms(our.p50_us), _ms(our.p99_us))
            for peer in peers.get(flow, []):
                ratio = peer.p50_us / our.p50_us
                met = "[green]met[/]" if ratio >= TARGET else "[red]not met[/]"
                theirs = (peer.scenario, _ms(peer.p50_us), _ms(peer.p99_us), f"{ratio:,.1f}x", met)
                out.add_row(*mine, *theirs)
            if not peers.get(flow):
                out.add_row(*mine, "skipped", "", "", "", "")
    console.print(out)
    for side, isolation in ISOLATION.items():
        console.print(f"  isolation, {side}: {isolation}")
    console.print(f"  load average now: {os.getloadavg()[0]:.2f} (1 min) on {os.cpu_count()} CPUs")
    chain = min(ours.get("chain40", []), key=lambda r: r.p50_us, default=None)
    ref = Table(
        title="chain40, published, not measured (Windmill's engine study, Python, one worker, "
        "2025; another machine)",
        title_justify="left",
    )
    for column in ("engine", "total", "per task", "vs our best chain40 p50"):
        ref.add_column(column, justify="left" if column == "engine" else "right")
    for engine, seconds in PUBLISHED_CHAIN40:
        versus = f"{seconds * 1e6 / chain.p50_us:,.1f}x" if chain else ""
        ref.add_row(engine, f"{seconds:.3f} s", f"{seconds / 40 * 1000:.0f} ms", versus)
    console.print(ref)


def _dagster(ours: dict[str, list[Result]]) -> tuple[dict[str, list[Result]], str]:
    """Dagster's rows per flow and a note, or none and why not."""
    try:
        installed = ensure_venv(DAGSTER)
        report = run_dagster(DAGSTER_RUNS)
    except (PeerUnavailable, OSError, subprocess.TimeoutExpired) as exc:
        print(f"peer skipped: Dagster could not be installed in {DAGSTER / '.venv'}: {exc}")
        return {}, "Dagster skipped"
    except (RuntimeError, ValueError) as exc:
        print(f"peer skipped: Dagster's runner failed: {exc}")
        return {}, "Dagster skipped"
    version = report["dagster_version"]
    setup = "Dagster execute_in_process call to return, in-process executor, ephemeral instance"
    rows = {
        flow: [
            _peer_result(flow, f"Dagster {version} (in-process)", setup, report[flow], ours[flow])
        ]
        for flow in FLOWS
    }
    how = "already installed" if installed is None else f"installed in {installed:.0f} s"
    return rows, f"Dagster {version} {how}, {DAGSTER_RUNS} calls each after one warm-up"


def side_by_side(options: Options) -> list[Result]:
    # bench_workflows may give one row per execution mode: each is compared with Prefect.
    ours = {
        flow: [
            dataclasses.replace(r, benchmark=f"peers_{flow}", scenario=f"calcgraph {r.scenario}")
            for r in WORKFLOW_BENCHMARKS[name](options)
        ]
        for flow, name in FLOWS.items()
    }
    mine = [r for rows in ours.values() for r in rows]
    dagster, dagster_note = _dagster(ours)
    dagster_rows = [row for flow in FLOWS for row in dagster.get(flow, [])]
    try:
        install_s = ensure_venv(PREFECT)
    except (PeerUnavailable, OSError, subprocess.TimeoutExpired) as exc:
        print(f"peer skipped: Prefect could not be installed in {PREFECT / '.venv'}: {exc}")
        _print(ours, dagster, f"Prefect skipped; {dagster_note}")
        return mine + dagster_rows
    try:
        report = run_prefect(PREFECT_RUNS)
    except (RuntimeError, ValueError, subprocess.TimeoutExpired) as exc:
        print(f"peer skipped: Prefect's runner failed: {exc}")
        _print(ours, dagster, f"Prefect skipped; {dagster_note}")
        return mine + dagster_rows
    version = report["prefect_version"]
    installed = "already installed" if install_s is None else f"installed in {install_s:.0f} s"
    modes = (("default", "defaults"), ("heartbeat_off", "flow-run heartbeat off"))
    peers = {
        flow: [
            _prefect_result(flow, f"Prefect {version} ({label})", report[mode][flow], ours[flow])
            for mode, label in modes
        ]
        + dagster.get(flow, [])
        for flow in FLOWS
    }
    first = report["default"]["diamond"]["first_call_s"]
    _print(
        ours,
        peers,
        f"Prefect {version} {installed}; {PREFECT_RUNS} calls each after one warm-up call, "
        f"server startup excluded (first call {first:.1f} s); {dagster_note}",
    )
    return mine + [peer for flow in FLOWS for peer in peers[flow]]


BENCHMARKS = {"peers_side_by_side": side_by_side}
