"""Times the jobs of jobs.py, one `execute_in_process` call at a time; prints one JSON object.

Run with this folder's .venv by bench/bench_peers.py. The first call of each job is a warm-up
and is not counted; its time is reported as `first_call_s`.

usage: runner.py RUNS
"""

import json
import sys
import time

import dagster

from jobs import chain40, diamond

EXPECTED = {"diamond": lambda x: 2 * (x + 2), "chain40": lambda x: x + 40 * 55}
OUTPUT = {"diamond": "D", "chain40": "n39"}


def timed(job, x: float) -> int:
    start = time.perf_counter_ns()
    result = job.execute_in_process(input_values={"x": x}, raise_on_error=True)
    took = time.perf_counter_ns() - start
    value = result.output_for_node(OUTPUT[job.name])
    expected = EXPECTED[job.name](x)
    if abs(value - expected) > 1e-6:
        raise RuntimeError(f"{job.name} returned {value}, expected {expected}")
    return took


def measure(job, runs: int) -> dict:
    report = {"latencies_ns": [], "seconds": 0.0, "first_call_s": timed(job, -1.0) / 1e9}
    for i in range(runs):
        took = timed(job, i + time.time() % 1)
        report["latencies_ns"].append(took)
        report["seconds"] += took / 1e9
    return report


def main() -> None:
    runs = int(sys.argv[1])
    report = {
        "dagster_version": dagster.__version__,
        "diamond": measure(diamond, runs),
        "chain40": measure(chain40, runs),
    }
    sys.stdout.write(json.dumps(report) + "\n")


if __name__ == "__main__":
    main()
