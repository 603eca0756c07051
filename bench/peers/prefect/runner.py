"""Times the flows of flows.py, one call at a time; prints one JSON object on stdout.

Run with this folder's .venv by bench/bench_peers.py, in a fresh PREFECT_HOME and with no
PREFECT_API_URL: Prefect starts its temporary local API server (SQLite under PREFECT_HOME) at
the first flow call. The first call of each flow in each mode is a warm-up and is not counted,
so server startup is excluded from the figures; its time is reported as `first_call_s`.

Two modes, one server: `default` (Prefect's settings as installed) and `heartbeat_off`
(PREFECT_FLOWS_HEARTBEAT_FREQUENCY unset), since a synchronous flow call joins its heartbeat
thread on the way out, and that thread sleeps in one-second steps.

usage: runner.py RUNS
"""

import json
import sys
import time

import prefect
from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

from flows import chain40, diamond

EXPECTED = {"diamond": lambda x: 2 * (x + 2), "chain40": lambda x: x + 40 * 55}
MODES = {
    "default": {},
    "heartbeat_off": {PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None},
}


def timed(flow, mode: str, x: float) -> int:
    with temporary_settings(updates=MODES[mode]):
        start = time.perf_counter_ns()
        result = flow(x)
        took = time.perf_counter_ns() - start
    expected = EXPECTED[flow.name](x)
    if abs(result - expected) > 1e-6:
        raise RuntimeError(f"{flow.name} returned {result}, expected {expected}")
    return took


def measure(flow, runs: int) -> dict:
    """Both modes, calls alternating between them so that load on the machine hits both alike."""
    report = {mode: {"latencies_ns": [], "seconds": 0.0} for mode in MODES}
    for mode in MODES:
        report[mode]["first_call_s"] = timed(flow, mode, -1.0) / 1e9
    order = list(MODES)
    for i in range(runs):
        for mode in order if i % 2 == 0 else order[::-1]:
            x = i + time.time() % 1  # fresh inputs, as calcgraph's benchmark uses
            took = timed(flow, mode, x)
            report[mode]["latencies_ns"].append(took)
            report[mode]["seconds"] += took / 1e9
    return report


def main() -> None:
    runs = int(sys.argv[1])
    flows = {"diamond": measure(diamond, runs), "chain40": measure(chain40, runs)}
    report = {"prefect_version": prefect.__version__}
    for mode in MODES:
        report[mode] = {name: measured[mode] for name, measured in flows.items()}
    sys.stdout.write(json.dumps(report) + "\n")


if __name__ == "__main__":
    main()
