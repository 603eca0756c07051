"""The machine's speed beside every figure: the CPU time this machine takes for one fixed piece
of pure Python work, much like a request's (dicts, strings, JSON, small calls).

CPU per unit of work is the figure that survives the load average, but not a change of machine
or a host whose other guests slow each CPU second: on this project's 2-core virtual machines
the same code has measured 3 times more CPU per tick on one day than on another. A figure
divided by the reference measured in the same run can be compared across machines and days;
the reference itself is the least of a few tries (the try least disturbed).
"""

from __future__ import annotations

import json
import time

TRIES = 5


def _work() -> int:
    total = 0
    for i in range(10_000):
        row = {"id": f"run-{i}", "status": "running", "attempt": i % 3, "outputs": {"y": i / 7}}
        text = json.dumps(row)
        back = json.loads(text)
        total += len(text) + back["attempt"] + len(str(back["outputs"]["y"]))
    return total


def reference_ms() -> float:
    """CPU milliseconds (this process, user + system) of the fixed work, least of `TRIES`."""
    best = float("inf")
    for _ in range(TRIES):
        start = time.process_time()
        _work()
        best = min(best, time.process_time() - start)
    return round(best * 1000, 1)
