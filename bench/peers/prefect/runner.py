"""Runs the flows of flows.py one call at a time, as bench/bench_peers.py asks on stdin.

Started with this folder's .venv by bench/bench_peers.py, in a fresh PREFECT_HOME and with no
PREFECT_API_URL: Prefect starts its temporary local API server (SQLite under PREFECT_HOME) at
the first flow call. The benchmark sends one JSON request a line, `{"flow": "diamond", "mode":
"default", "x": 1.5}`, and reads one JSON answer a line, `{"ns": ...}` (the call's wall time)
or `{"error": ...}`; so its calls alternate with calcgraph's and Dagster's in one window.

Two modes, one server: `default` (Prefect's settings as installed) and `heartbeat_off`
(PREFECT_FLOWS_HEARTBEAT_FREQUENCY unset), since a synchronous flow call joins its heartbeat
thread on the way out, and that thread sleeps in one-second steps.
"""

import json
import sys
import time

import prefect
from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

from flows import chain40, diamond

FLOWS = {"diamond": diamond, "chain40": chain40}
EXPECTED = {"diamond": lambda x: 2 * (x + 2), "chain40": lambda x: x + 40 * 55}
MODES = {
    "default": {},
    "heartbeat_off": {PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None},
}


def timed(name: str, mode: str, x: float) -> int:
    with temporary_settings(updates=MODES[mode]):
        start = time.perf_counter_ns()
        result = FLOWS[name](x)
        took = time.perf_counter_ns() - start
    expected = EXPECTED[name](x)
    if abs(result - expected) > 1e-6:
        raise RuntimeError(f"{name} returned {result}, expected {expected}")
    return took


def main() -> None:
    sys.stdout.write(json.dumps({"ready": True, "version": prefect.__version__}) + "\n")
    sys.stdout.flush()
    for line in sys.stdin:
        asked = json.loads(line)
        try:
            answer = {"ns": timed(asked["flow"], asked["mode"], float(asked["x"]))}
        except Exception as exc:  # reported to the benchmark, which stops on it
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
