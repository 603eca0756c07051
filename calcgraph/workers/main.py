"""`calcgraph worker`: Dramatiq workers against the Redis broker, in N processes of M threads.

Each process builds its own backbone and workers (`calcgraph.workers.assembly`, the assembly
the in-process workers use too: broker connection, runtime with its event loop, database engine
and warm pool, actors, timers); processes are started with `spawn` so none inherits another's
threads or sockets.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
from typing import Any

from prometheus_client import start_http_server

from calcgraph.settings import Settings
from calcgraph.workers.assembly import Workers
from calcgraph.workers.backbone import Backbone
from calcgraph.workers.runtime import WorkerRuntime
from calcgraph.workers.sandbox import preflight

log = logging.getLogger("calcgraph.workers")


def serve_worker(
    settings: Settings,
    threads: int,
    stop: threading.Event | None = None,
    index: int = 0,
    parent: int | None = None,
) -> None:
    """One worker process (or thread, in tests): runs until SIGTERM/SIGINT or `stop`, or
    until the supervising process `parent` is gone."""
    if settings.redis_url is None:
        raise ValueError(
            "`calcgraph worker` needs CALCGRAPH_REDIS_URL (without it, `calcgraph serve` runs "
            "the workers in-process)"
        )
    if stop is None:
        stop = threading.Event()
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, lambda *_: stop.set())
    backbone = Backbone.build(settings)
    workers = Workers(settings, backbone, threads=threads, own_process=True)
    metrics_server = _serve_metrics(settings, workers.runtime, index)
    workers.start()
    try:
        _wait(stop, parent)
    finally:
        workers.stop()
        backbone.broker.close()
        if metrics_server is not None:
            metrics_server.shutdown()
            metrics_server.server_close()


def _serve_metrics(settings: Settings, runtime: WorkerRuntime, index: int) -> Any:
    # Worker metrics live in each process (job runs, warm pool, cache stores): process i of
    # `--processes N` answers on port + i, for Prometheus to scrape each.
    if settings.worker_metrics_port is None:
        return None
    port = settings.worker_metrics_port + index
    server, _ = start_http_server(port, addr=settings.host, registry=runtime.metrics.registry)
    log.info("worker metrics at http://%s:%d/metrics", settings.host, port)
    return server


def _child(threads: int, index: int) -> None:
    from calcgraph.ops.logs import setup_logging
    from calcgraph.settings import get_settings

    setup_logging(get_settings())
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    # A spawned child reads the same environment as its parent, hence the same settings.
    serve_worker(get_settings(), threads, stop, index, parent=os.getppid())


def _wait(stop: threading.Event, parent: int | None) -> None:
    """The main thread's wait for `stop`, a second at a time. A signal that the kernel hands
    to another thread (any thread not blocking it may take a process's signal) only flags its
    Python handler, which runs when the main thread next runs Python code: a main thread
    waiting without end never ran it, and a SIGTERM was lost (a worker ran on until killed).
    With `parent`, each wake also checks the supervisor: one killed outright (SIGKILL) cannot
    stop its children, so they stop themselves, closing their sandboxes, instead of running
    on as orphans."""
    while not stop.wait(1.0):
        if parent is not None and os.getppid() != parent:
            log.warning("the supervising process is gone; stopping")
            stop.set()


def run_workers(settings: Settings, processes: int, threads: int) -> int:
    preflight(settings)  # refuse to start, naming the fix, before any process is spawned
    if processes <= 1:
        serve_worker(settings, threads)
        return 0
    context = multiprocessing.get_context("spawn")
    children = [
        context.Process(target=_child, args=(threads, i), name=f"calcgraph-worker-{i}")
        for i in range(processes)
    ]
    for child in children:
        child.start()
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    while not stop.wait(1.0):
        if not any(child.is_alive() for child in children):
            break
    for child in children:
        if child.is_alive() and child.pid is not None:
            child.terminate()
    for child in children:
        child.join(timeout=40)
        if child.is_alive():
            child.kill()
            child.join(timeout=5)
    return max((child.exitcode or 0) for child in children)
