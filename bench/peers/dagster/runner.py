"""Runs the jobs of jobs.py, one `execute_in_process` call at a time, as bench/bench_peers.py
asks on stdin: one JSON request a line, `{"flow": "diamond", "x": 1.5}`, one JSON answer a
line, `{"ns": ...}` (the call's wall time) or `{"error": ...}`; so its calls alternate with
calcgraph's and Prefect's in one window.
"""

import json
import sys
import time

import dagster

from jobs import chain40, diamond

JOBS = {"diamond": diamond, "chain40": chain40}
EXPECTED = {"diamond": lambda x: 2 * (x + 2), "chain40": lambda x: x + 40 * 55}
OUTPUT = {"diamond": "D", "chain40": "n39"}


def timed(name: str, x: float) -> int:
    start = time.perf_counter_ns()
    result = JOBS[name].execute_in_process(input_values={"x": x}, raise_on_error=True)
    took = time.perf_counter_ns() - start
    value = result.output_for_node(OUTPUT[name])
    expected = EXPECTED[name](x)
    if abs(value - expected) > 1e-6:
        raise RuntimeError(f"{name} returned {value}, expected {expected}")
    return took


def main() -> None:
    sys.stdout.write(json.dumps({"ready": True, "version": dagster.__version__}) + "\n")
    sys.stdout.flush()
    for line in sys.stdin:
        asked = json.loads(line)
        try:
            answer = {"ns": timed(asked["flow"], float(asked["x"]))}
        except Exception as exc:  # reported to the benchmark, which stops on it
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
