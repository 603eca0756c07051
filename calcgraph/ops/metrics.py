"""Prometheus metrics, one registry per application (or per worker process), never the global one:
two apps in one process (the tests) must not share or collide on series.

- HTTP requests: count and latency by route template (`/jobs/{job_id}`, `/graphql mutation`),
  method and status; observed by `calcgraph.ops.http.RequestMiddleware`.
- Jobs by status and queue depth: read from the database (one GROUP BY) and the broker when
  /metrics is scraped, so they are right whichever process moved a job.
- Tick duration: observed by the doors around the tick's unit of work (the pure tick is untouched).
- Job runs, warm pool and result cache: per worker process. The pool and cache counters are
  read from their own stats at scrape time, so the hot paths only bump plain integers.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from calcgraph.workers.result_cache import ResultCache
    from calcgraph.workers.sandbox.pool import WarmPool

# `*_created` series double every counter's output for a start time Prometheus does not need.
disable_created_metrics()  # type: ignore[no-untyped-call]

JOB_STATUSES = ("queued", "running", "success", "failed")
# Request latencies: the check-connection hot path answers in well under a millisecond; an
# execute with `wait` may hold a request for up to 300 s.
HTTP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 120)
TICK_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
JOB_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


class _StatsCollector(Collector):
    """Warm pool and result cache counters, read from the objects' own stats at scrape time."""

    def __init__(self) -> None:
        self.pool: WarmPool | None = None
        self.cache: ResultCache | None = None

    def describe(self) -> Iterable[Any]:
        return []

    def collect(self) -> Iterable[Any]:
        pool = self.pool
        if pool is not None:
            stats = pool.stats
            yield _gauge("calcgraph_warm_pool_idle_sandboxes", "idle warm sandboxes", len(pool))
            yield _gauge("calcgraph_warm_pool_max_size", "warm pool capacity", pool.max_size)
            yield _counter("calcgraph_warm_pool_hits", "jobs run on a warm sandbox", stats.hits)
            yield _counter(
                "calcgraph_warm_pool_starts", "sandboxes started (cold jobs)", stats.starts
            )
            yield _counter(
                "calcgraph_warm_pool_evictions", "idle sandboxes evicted", stats.evictions
            )
            yield _counter(
                "calcgraph_warm_pool_discarded", "sandboxes dropped (died, stale)", stats.discarded
            )
            runs = stats.hits + stats.starts
            yield _gauge(
                "calcgraph_warm_pool_hit_ratio",
                "hits / (hits + starts) since the process started",
                stats.hits / runs if runs else 0.0,
            )
        cache = self.cache
        if cache is not None:
            c = cache.stats
            lookups = CounterMetricFamily(
                "calcgraph_result_cache_lookups", "result cache lookups", labels=["result"]
            )
            lookups.add_metric(["hit"], c.hits)
            lookups.add_metric(["miss"], c.misses)
            yield lookups
            yield _counter("calcgraph_result_cache_stores", "successful results stored", c.stores)
            total = c.hits + c.misses
            yield _gauge(
                "calcgraph_result_cache_hit_ratio",
                "hits / lookups since the process started",
                c.hits / total if total else 0.0,
            )


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=value)


class WorkerMetrics:
    """What a worker process measures: job runs, and its warm pool and result cache."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.job_runs = Counter(
            "calcgraph_job_runs",
            "jobs this process ran, by outcome",
            ["status", "error_kind"],
            registry=self.registry,
        )
        self.job_run_seconds = Histogram(
            "calcgraph_job_run_duration_seconds",
            "sandbox time of one job, start to result",
            buckets=JOB_BUCKETS,
            registry=self.registry,
        )
        self._stats = _StatsCollector()
        self.registry.register(self._stats)

    def watch(self, pool: WarmPool | None = None, cache: ResultCache | None = None) -> None:
        if pool is not None:
            self._stats.pool = pool
        if cache is not None:
            self._stats.cache = cache

    def job_finished(self, status: str, error_kind: str | None, seconds: float) -> None:
        self.job_runs.labels(status, error_kind or "").inc()
        self.job_run_seconds.observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class Metrics(WorkerMetrics):
    """An API process's metrics (its in-process workers' included)."""

    def __init__(self) -> None:
        super().__init__()
        registry = self.registry
        self.http_requests = Counter(
            "calcgraph_http_requests",
            "HTTP requests by route template, method and status",
            ["route", "method", "status"],
            registry=registry,
        )
        self.http_seconds = Histogram(
            "calcgraph_http_request_duration_seconds",
            "HTTP request latency by route template, method and status",
            ["route", "method", "status"],
            buckets=HTTP_BUCKETS,
            registry=registry,
        )
        self.tick_seconds = Histogram(
            "calcgraph_tick_duration_seconds",
            "one tick of a workflow run, its commit included",
            buckets=TICK_BUCKETS,
            registry=registry,
        )
        self.rate_limited = Counter(
            "calcgraph_rate_limited_requests",
            "requests refused with 429 by the per-caller rate limit",
            registry=registry,
        )
        self.jobs = Gauge(
            "calcgraph_jobs",
            "jobs by status, counted at scrape time",
            ["status"],
            registry=registry,
        )
        self.queue_depth = Gauge(
            "calcgraph_queue_depth", "jobs waiting for a worker (status queued)", registry=registry
        )
        self.broker_queue_length = Gauge(
            "calcgraph_broker_queue_length",
            "messages in the broker's job queue",
            registry=registry,
        )
        # Label lookups cost more than the observations; a route answers few distinct statuses.
        self._children: dict[tuple[str, str, int], tuple[Any, Any]] = {}
        self._lock = threading.Lock()

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        key = (route, method, status)
        children = self._children.get(key)
        if children is None:
            with self._lock:
                labels = (route, method, str(status))
                children = (self.http_requests.labels(*labels), self.http_seconds.labels(*labels))
                self._children[key] = children
        children[0].inc()
        children[1].observe(seconds)

    def set_jobs(self, counts: Mapping[str, int], broker_queue_length: int | None) -> None:
        """`broker_queue_length` None: the broker does not answer (NaN, "unknown")."""
        for status in sorted({*JOB_STATUSES, *counts}):
            self.jobs.labels(status).set(counts.get(status, 0))
        self.queue_depth.set(counts.get("queued", 0))
        self.broker_queue_length.set(
            float("nan") if broker_queue_length is None else broker_queue_length
        )
