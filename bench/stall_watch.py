"""Where a benchmarked server's event loop stalls: a heartbeat and a watching thread.

A benchmark that wants it starts `calcgraph serve` with `environment(path)` added to its
settings. Python then imports `bench/stall_site/sitecustomize.py` first, which calls `install()`:
uvicorn's `Server.serve` is wrapped so that, in each serving process,

- a task on the event loop notes the time every `BEAT_S` (the heartbeat);
- a daemon thread looks every `BEAT_S`: while the heartbeat is late by more than the threshold
  (`CALCGRAPH_BENCH_STALL_MS`, 60 ms unless set), it samples the loop thread's Python stack;
  when the heartbeat comes back, it appends the stall to the file as one JSON line: `at` (wall
  time of its start), `ms`, `pid`, `samples` (the innermost frame of each sample, and the
  innermost frame of calcgraph's own code), and from the loop thread's `/proc` schedstat,
  read at every look, the milliseconds of the stall it ran (`run_ms`) and waited for a core
  (`queued_ms`): the rest it was blocked, on the GIL or a lock;
- a `gc.callbacks` hook appends each cyclic collection on the loop's thread that took more than
  `GC_MS` (`gc`: its generation, `ms`, and `cpu_ms` of the thread), which a stall's stack
  cannot name.

A stack sampled while the loop runs C code (uvloop, asyncpg's protocol, pydantic-core, `json`)
shows the Python frame that called it, which is what names the cause. The watch costs the loop
one wake-up per `BEAT_S`, in both phases of a comparison alike. `read(path, since, until)` and
`summary(...)` turn the file into a benchmark's figures.

Nothing here is imported by the product: it is loaded by path, and only when the benchmark asks.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Iterable
from pathlib import Path
from typing import Any

FILE_ENV = "CALCGRAPH_BENCH_STALL_FILE"
MS_ENV = "CALCGRAPH_BENCH_STALL_MS"
DEFAULT_MS = 60.0
BEAT_S = 0.005
GC_MS = 10.0
SITE = Path(__file__).resolve().parent / "stall_site"


def environment(path: Path, threshold_ms: float = DEFAULT_MS) -> dict[str, str]:
    """Settings that make a `calcgraph serve` started with them record its stalls in `path`."""
    python_path = os.pathsep.join(p for p in (str(SITE), os.environ.get("PYTHONPATH", "")) if p)
    return {FILE_ENV: str(path), MS_ENV: str(threshold_ms), "PYTHONPATH": python_path}


def _label(frame: Any) -> str:
    """`path:function`, the path from the package's folder (or the standard library's)."""
    code = frame.f_code
    parts = Path(code.co_filename).parts
    for anchor in ("site-packages", "calcgraph"):
        if anchor in parts:
            at = len(parts) - 1 - parts[::-1].index(anchor)
            parts = parts[at + (anchor == "site-packages") :]
            break
    return f"{'/'.join(parts[-4:])}:{code.co_name}"


def _sample(frame: Any) -> tuple[str, str]:
    """The innermost frame, and the innermost of calcgraph's own code (or "")."""
    inner = _label(frame)
    ours = ""
    while frame is not None:
        if f"{os.sep}calcgraph{os.sep}" in frame.f_code.co_filename:
            ours = _label(frame)
            break
        frame = frame.f_back
    return inner, ours


def _scheduled(schedstat: Path) -> tuple[int, int]:
    """The thread's time on a core and waiting for one, in ns (`/proc/.../schedstat`)."""
    try:
        run_ns, queued_ns, _slices = schedstat.read_text().split()
    except (OSError, ValueError):
        return 0, 0
    return int(run_ns), int(queued_ns)


class _Watch:
    def __init__(self, path: Path, threshold_s: float) -> None:
        self.path = path
        self.threshold_s = threshold_s
        self.last = time.monotonic()
        self.loop_thread = threading.get_ident()
        self.loop_native_id = threading.get_native_id()
        self.stopped = threading.Event()
        self.lock = threading.Lock()
        self.gc_began = (0.0, 0.0)

    async def beat(self) -> None:
        while True:
            self.last = time.monotonic()
            await asyncio.sleep(BEAT_S)

    def watch(self) -> None:
        samples: list[tuple[str, str]] = []
        began = 0.0
        readings: deque[tuple[float, int, int]] = deque(maxlen=64)
        schedstat = Path(f"/proc/self/task/{self.loop_native_id}/schedstat")
        start = (0, 0)
        while not self.stopped.wait(BEAT_S):
            now = time.monotonic()
            run_ns, queued_ns = _scheduled(schedstat)
            readings.append((now, run_ns, queued_ns))
            late = now - self.last - BEAT_S
            if late > self.threshold_s:
                if not samples:
                    began = self.last + BEAT_S
                    # The loop thread's scheduling when the stall began (the last reading
                    # before it): what it ran and waited for a core during the stall.
                    start = next(((r, q) for t, r, q in reversed(readings) if t <= began), start)
                frame = sys._current_frames().get(self.loop_thread)
                samples.append(_sample(frame) if frame is not None else ("", ""))
            elif samples:
                ran = ((run_ns - start[0]) / 1e6, (queued_ns - start[1]) / 1e6)
                self._write(began, self.last - began, samples, ran)
                samples = []

    def collected(self, phase: str, info: dict[str, int]) -> None:
        """A `gc.callbacks` hook: a cyclic collection on the loop's thread that took more than
        `GC_MS` is written as a record of its own (`gc`: its generation)."""
        if threading.get_ident() != self.loop_thread:
            return
        if phase == "start":
            self.gc_began = (time.perf_counter(), time.thread_time())
            return
        seconds = time.perf_counter() - self.gc_began[0]
        if seconds * 1000 > GC_MS:
            cpu_ms = (time.thread_time() - self.gc_began[1]) * 1000
            record = {"gc": info["generation"], "ms": round(seconds * 1000, 1)}
            record["cpu_ms"] = round(cpu_ms, 1)
            self._append({"at": time.time() - seconds, "pid": os.getpid(), **record})

    def _write(
        self,
        began: float,
        seconds: float,
        samples: list[tuple[str, str]],
        ran: tuple[float, float],
    ) -> None:
        self._append(
            {
                "at": time.time() - (time.monotonic() - began),
                "ms": round(seconds * 1000, 1),
                "run_ms": round(ran[0], 1),
                "queued_ms": round(ran[1], 1),
                "pid": os.getpid(),
                "samples": samples,
            }
        )

    def _append(self, record: dict[str, Any]) -> None:
        with self.lock, self.path.open("a") as out:
            out.write(json.dumps(record) + "\n")


def install() -> None:
    """Wrap uvicorn's `Server.serve` with the watch, when `FILE_ENV` is set."""
    target = os.environ.get(FILE_ENV)
    if not target:
        return
    import uvicorn.server

    original = uvicorn.server.Server.serve
    watch_ms = float(os.environ.get(MS_ENV, DEFAULT_MS))

    async def serve(self: Any, sockets: Any = None) -> None:
        watch = _Watch(Path(target), watch_ms / 1000)
        beat = asyncio.get_running_loop().create_task(watch.beat())
        threading.Thread(target=watch.watch, name="stall-watch", daemon=True).start()
        gc.callbacks.append(watch.collected)
        try:
            await original(self, sockets)
        finally:
            gc.callbacks.remove(watch.collected)
            watch.stopped.set()
            beat.cancel()

    uvicorn.server.Server.serve = serve  # type: ignore[method-assign]


def read(path: Path, since: float, until: float) -> list[dict[str, Any]]:
    """The stalls recorded in `path` that began between the wall times `since` and `until`."""
    if not path.exists():
        return []
    stalls = (json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return [s for s in stalls if since <= s["at"] < until]


def summary(stalls: Iterable[dict[str, Any]], top: int = 6) -> dict[str, Any]:
    """Count, seconds in all, seconds in stalls over 100 ms, and the causes that took most time:
    each stall's time shared among its samples, by innermost frame and by calcgraph's frame;
    then the collections over `GC_MS` by generation, and their seconds."""
    inner: Counter[str] = Counter()
    ours: Counter[str] = Counter()
    count, total, over_100 = 0, 0.0, 0.0
    collections: Counter[int] = Counter()
    collected_s = collected_cpu_s = ran_s = queued_s = 0.0
    for stall in stalls:
        if "gc" in stall:
            collections[stall["gc"]] += 1
            collected_s += stall["ms"] / 1000
            collected_cpu_s += stall.get("cpu_ms", 0.0) / 1000
            continue
        count += 1
        seconds = stall["ms"] / 1000
        total += seconds
        ran_s += stall.get("run_ms", 0.0) / 1000
        queued_s += stall.get("queued_ms", 0.0) / 1000
        over_100 += seconds if stall["ms"] > 100 else 0.0
        samples = stall["samples"] or [["", ""]]
        for frame, own in samples:
            inner[frame or "?"] += seconds / len(samples)
            ours[own or "(not calcgraph)"] += seconds / len(samples)
    return {
        "stalls": count,
        "stall_s": round(total, 2),
        "stall_s_over_100ms": round(over_100, 2),
        "stall_s_running": round(ran_s, 2),
        "stall_s_waiting_for_a_core": round(queued_s, 2),
        "stall_causes_inner": [[k, round(v, 2)] for k, v in inner.most_common(top)],
        "stall_causes_calcgraph": [[k, round(v, 2)] for k, v in ours.most_common(top)],
        "gc_over_10ms": {f"gen{g}": n for g, n in sorted(collections.items())},
        "gc_s_over_10ms": round(collected_s, 2),
        "gc_cpu_s_over_10ms": round(collected_cpu_s, 2),
    }
