"""`python -m bench [name ...]`: run the benchmarks, print a table, write results/latest.json.

A name selects a module (`types` for bench_types.py) or benchmarks by name or name prefix
(`check_connection` runs check_connection_service, _asgi and _http). No name runs everything.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import importlib
import json
import os
import platform
import signal
import sys
import time
import traceback
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench.core import Benchmark, Options, Result
from bench.speed import reference_ms

RESULTS = Path(__file__).resolve().parent / "results" / "latest.json"
# Benchmarks drive one caller far past the default rate limit (600 a minute): a limit they
# never reach keeps the limiter's cost in the figures without its refusals. Servers inherit it.
os.environ.setdefault("CALCGRAPH_RATE_LIMIT_PER_MINUTE", "1000000000")
os.environ.setdefault("CALCGRAPH_RATE_LIMIT_BURST", "1000000000")


# The benchmark modules, in the order `make bench` runs them: one line each, so that adding a
# module is a one-line change that merges with the others.
MODULES = (
    "bench_types",
    "bench_builds",
    "bench_execution",
    "bench_workflows",
    "bench_tenancy",
    "bench_sandbox_sweep",
    "bench_soak",
    "bench_scale_tick",
    "bench_scale",
    "bench_tick_cpu",
    "bench_scale_graphql",
    "bench_web",
    "bench_peers",
    "bench_events",
    "bench_dependencies",
    "bench_run_control",
    "bench_canary",
)


def discover() -> dict[str, dict[str, Benchmark]]:
    """module stem (without `bench_`) -> its BENCHMARKS, for every module of MODULES."""
    found: dict[str, dict[str, Benchmark]] = {}
    for name in MODULES:
        module = importlib.import_module(f"bench.{name}")
        found[name.removeprefix("bench_")] = dict(module.BENCHMARKS)
    return found


def select(modules: dict[str, dict[str, Benchmark]], names: list[str]) -> dict[str, Benchmark]:
    everything = {name: fn for benchmarks in modules.values() for name, fn in benchmarks.items()}
    if not names:
        return everything
    chosen: dict[str, Benchmark] = {}
    for wanted in names:
        stem = wanted.removeprefix("bench_").removesuffix(".py")
        matches = dict(modules.get(stem, {})) or {
            name: fn
            for name, fn in everything.items()
            if name == wanted or name.startswith(wanted + "_")
        }
        if not matches:
            raise SystemExit(
                f"bench: no benchmark or module named {wanted!r}; "
                f"modules: {', '.join(modules)}; benchmarks: {', '.join(everything)}"
            )
        chosen.update(matches)
    return chosen


def parse_args(argv: list[str]) -> tuple[list[str], Options, bool]:
    defaults = Options()
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("names", nargs="*", help="modules or benchmarks to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    parser.add_argument("--duration", type=float, default=defaults.duration_s, help="wrk seconds")
    parser.add_argument("--warmup", type=float, default=defaults.warmup_s, help="wrk seconds")
    parser.add_argument("--threads", type=int, default=defaults.threads)
    parser.add_argument("--connections", type=int, default=defaults.connections)
    parser.add_argument(
        "--workers",
        type=int,
        nargs="+",
        default=list(defaults.workers),
        help="uvicorn worker counts to serve with, one HTTP run each (default: 1)",
    )
    parser.add_argument(
        "--runs",
        type=int,
        nargs="+",
        default=list(defaults.runs),
        help="runs at once, one phase each (scale_polled_runs_http; default 10 100 500)",
    )
    parser.add_argument(
        "--minutes",
        type=float,
        default=defaults.soak_minutes,
        help="length of the soak benchmark (soak_hostile_http; default 10)",
    )
    # Load generators standing for other machines, niced (-1: SCHED_IDLE; 0: not niced).
    for flag, default, whose in (
        ("--flood-nice", defaults.flood_nice, "events_flood_http's flood and follower"),
        ("--hostile-nice", defaults.hostile_nice, "soak_hostile_http's hostile users' process"),
    ):
        parser.add_argument(
            flag,
            type=int,
            default=default,
            choices=range(-1, 20),
            metavar="-1-19",
            help=f"niceness of {whose} (default {default}; 0: not niced)",
        )
    args = parser.parse_args(argv)
    options = dataclasses.replace(
        defaults,
        duration_s=args.duration,
        warmup_s=args.warmup,
        threads=args.threads,
        connections=args.connections,
        workers=tuple(args.workers),
        runs=tuple(args.runs),
        soak_minutes=args.minutes,
        flood_nice=args.flood_nice,
        hostile_nice=args.hostile_nice,
    )
    return args.names, options, args.list


def _latency(us: float) -> str:
    return f"{us:,.1f} µs" if us < 1000 else f"{us / 1000:,.2f} ms"


def table(results: list[Result]) -> Table:
    out = Table(title="calcgraph benchmarks", title_justify="left")
    out.add_column("benchmark")
    out.add_column("scenario")
    out.add_column("setup")
    out.add_column("requests", justify="right")
    out.add_column("req/s", justify="right")
    out.add_column("p50", justify="right")
    out.add_column("p99", justify="right")
    out.add_column("errors", justify="right")
    out.add_column("load 1m", justify="right")
    for r in results:
        out.add_row(
            r.benchmark,
            r.scenario,
            r.setup,
            f"{r.requests:,}",
            f"{r.rps:,.0f}",
            _latency(r.p50_us),
            _latency(r.p99_us),
            str(r.errors),
            f"{r.load1:.2f}",
        )
    return out


def _exit_on_sigterm(signum: int, frame: object) -> None:
    # SystemExit unwinds through the benchmarks' `finally`, which stop the servers they started.
    sys.exit(128 + signum)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    names, options, list_only = parse_args(argv)
    modules = discover()
    if list_only:
        for stem, benchmarks in modules.items():
            print(f"{stem}: {', '.join(benchmarks)}")
        return 0
    chosen = select(modules, names)
    console = Console()
    if not console.is_terminal:  # a log or a pipe: room for the table rather than wrapped cells
        console = Console(width=180)
    started = dt.datetime.now(dt.UTC)
    load_before = os.getloadavg()
    speed_before = reference_ms()
    results: list[Result] = []
    failures: dict[str, str] = {}
    for name, benchmark in chosen.items():
        console.print(f"[bold]bench[/]: {name} ...")
        t0 = time.perf_counter()
        speed = reference_ms()
        try:
            results.extend(dataclasses.replace(r, reference_ms=speed) for r in benchmark(options))
        except Exception:  # one broken benchmark must not hide the others' figures
            failures[name] = traceback.format_exc()
            console.print(f"[red]bench: {name} failed[/]\n{failures[name]}")
        console.print(f"  ({time.perf_counter() - t0:.1f} s)")
    console.print(table(results))
    for r in results:  # what the table has no column for: CPU, memory, sizes, targets
        if r.extra:
            figures = ", ".join(f"{k}={v}" for k, v in r.extra.items())
            console.print(
                f"  {r.benchmark} [{r.scenario}] (load {r.load1:.2f}, reference "
                f"{r.reference_ms} ms): {figures}"
            )
    speed_after = reference_ms()
    report = {
        "started_at": started.isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "loadavg_before": load_before,
            "loadavg_after": os.getloadavg(),
            "reference_ms_before_after": [speed_before, speed_after],
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "options": dataclasses.asdict(options),
        "results": [dataclasses.asdict(r) for r in results],
        "failures": failures,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    console.print(f"results written to {RESULTS}")
    console.print(
        f"load average before/after: {load_before[0]:.2f} / {os.getloadavg()[0]:.2f} "
        f"on {os.cpu_count()} CPUs (the machine is shared: figures move with it); "
        f"reference work (bench/speed.py) {speed_before} / {speed_after} ms "
        "of CPU: divide a CPU figure by it to compare machines and days"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
