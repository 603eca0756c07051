"""What a benchmark returns and how it is configured; small measuring helpers."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Options:
    """Knobs of one `python -m bench` run; the defaults keep each scenario to a few seconds."""

    duration_s: float = 5.0  # measured wrk run per HTTP scenario
    warmup_s: float = 1.0  # discarded wrk run before it
    threads: int = 2
    connections: int = 16
    workers: tuple[int, ...] = (1,)  # uvicorn worker processes; more than 1 is noise on 2 cores
    runs: tuple[int, ...] = ()  # the curve's sizes where a benchmark takes them (empty: its own)
    inprocess_requests: int = 2000  # sequential in-process requests per scenario (upper bound)
    inprocess_max_s: float = 4.0  # ... and the time bound on them
    service_calls: int = 20000
    service_max_s: float = 2.0
    soak_minutes: float = 10.0  # the soak benchmark's length (bench_soak)
    flood_nice: int = 10  # niceness of events_flood_http's flood and follower (bench_events)
    hostile_nice: int = 0  # niceness of soak_hostile_http's hostile users' process (bench_soak)


@dataclass(frozen=True)
class Result:
    benchmark: str  # e.g. check_connection_http
    scenario: str  # which payload
    setup: str  # how it was driven: load generator, concurrency, server
    requests: int
    seconds: float
    rps: float
    p50_us: float
    p99_us: float
    errors: int = 0
    extra: dict[str, object] = field(default_factory=dict)
    # The machine's 1-minute load average when the figure was taken: on a shared 2-core
    # machine every figure moves with it, so it is printed beside each one.
    load1: float = field(default_factory=lambda: round(os.getloadavg()[0], 2))
    # The machine's speed when the figure was taken (`bench.speed.reference_ms`, measured just
    # before the benchmark): CPU figures divided by it compare across machines and days.
    reference_ms: float | None = None


Benchmark = Callable[[Options], list[Result]]


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile of values already sorted ascending."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def summarise(
    benchmark: str,
    scenario: str,
    setup: str,
    latencies_ns: list[int],
    elapsed_s: float,
    errors: int = 0,
    extra: dict[str, object] | None = None,
) -> Result:
    """A Result from per-call latencies measured back to back (one at a time)."""
    ordered = sorted(latencies_ns)
    return Result(
        benchmark=benchmark,
        scenario=scenario,
        setup=setup,
        requests=len(ordered),
        seconds=round(elapsed_s, 3),
        rps=len(ordered) / elapsed_s if elapsed_s > 0 else math.nan,
        p50_us=percentile(ordered, 50) / 1000,
        p99_us=percentile(ordered, 99) / 1000,
        errors=errors,
        extra=extra or {},
    )


class Deadline:
    """A wall-clock bound for a measuring loop."""

    def __init__(self, seconds: float) -> None:
        self._end = time.perf_counter() + seconds

    @property
    def passed(self) -> bool:
        return time.perf_counter() >= self._end


def niced(nice: int) -> tuple[str, ...]:
    """The command prefix running a load generator's process at niceness `nice` (-1: as
    SCHED_IDLE, 0: as it is): on one machine, clients that stand for other machines' yield
    its cores to the platform they load."""
    return ("chrt", "--idle", "0") if nice < 0 else ("nice", "-n", str(nice)) if nice else ()
