"""Check-connection (`POST /types/check-connection`): over HTTP, in-process, and the bare service.

Three views of one request, so a regression can be placed: the service call alone (type parsing
and the compatibility rule), the whole ASGI app without a socket (routing, middleware, body
parsing, JSON), and uvicorn on loopback under a real load generator (wrk).
"""

from __future__ import annotations

import asyncio
import tempfile
import time

import httpx

from bench import server, wrk
from bench.core import Deadline, Options, Result, summarise
from calcgraph.app import create_app
from calcgraph.domain.types.service import type_service
from calcgraph.services import services_of
from calcgraph.settings import Settings

PATH = "/types/check-connection"

# name -> (request body, expected verdict)
PAYLOADS: dict[str, tuple[dict[str, object], str]] = {
    "simple Force->Numeric": ({"source": "Force", "target": "Numeric"}, "ALLOWED"),
    "nested struct/list": (
        {
            "source": {"loads": "list[Force3]", "joint": {"moment": "Moment3", "span": "Length"}},
            "target": {"loads": "list[Vector3]", "joint": {"moment": "Moment3", "span": "Float"}},
        },
        "ALLOWED",
    ),
}


def _check_answer(response: httpx.Response, expected: str) -> None:
    """Refuse to time an endpoint that answers something else than the right verdict."""
    if response.status_code != 200:
        raise RuntimeError(f"{PATH} answered {response.status_code}: {response.text[:300]}")
    verdict = response.json().get("compatibility")
    if verdict != expected:
        raise RuntimeError(f"{PATH} answered {verdict}, expected {expected}: {response.text}")


def http(options: Options) -> list[Result]:
    results: list[Result] = []
    for workers in options.workers:
        with server.serve(workers=workers) as srv:
            url = srv.base_url + PATH
            for name, (body, expected) in PAYLOADS.items():
                _check_answer(httpx.post(url, json=body, timeout=5.0), expected)
                load = {"threads": options.threads, "connections": options.connections}
                if options.warmup_s > 0:
                    wrk.run(url, body, duration_s=options.warmup_s, **load)
                run = wrk.run(url, body, duration_s=options.duration_s, **load)
                results.append(
                    Result(
                        benchmark="check_connection_http",
                        scenario=name,
                        setup=(
                            f"wrk {options.threads}t/{options.connections}c "
                            f"{options.duration_s:g}s -> {srv.command}"
                        ),
                        requests=run.requests,
                        seconds=run.seconds,
                        rps=run.rps,
                        p50_us=run.p50_us,
                        p99_us=run.p99_us,
                        errors=run.non_2xx + run.socket_errors,
                        extra={"workers": workers, "wrk_output": run.output},
                    )
                )
    return results


async def _asgi(options: Options) -> list[Result]:
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="calcgraph-bench-") as tmp:
        app = create_app(Settings(database_url=f"sqlite+aiosqlite:///{tmp}/bench.db"))
        transport = httpx.ASGITransport(app=app)
        try:
            async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
                for name, (body, expected) in PAYLOADS.items():
                    _check_answer(await client.post(PATH, json=body), expected)
                    for _ in range(min(200, options.inprocess_requests)):  # warm-up
                        await client.post(PATH, json=body)
                    latencies: list[int] = []
                    errors = 0
                    deadline = Deadline(options.inprocess_max_s)
                    start = time.perf_counter()
                    while len(latencies) < options.inprocess_requests and not deadline.passed:
                        t0 = time.perf_counter_ns()
                        response = await client.post(PATH, json=body)
                        latencies.append(time.perf_counter_ns() - t0)
                        errors += response.status_code != 200
                    elapsed = time.perf_counter() - start
                    results.append(
                        summarise(
                            "check_connection_asgi",
                            name,
                            "in-process httpx.ASGITransport, sequential",
                            latencies,
                            elapsed,
                            errors,
                        )
                    )
        finally:
            await services_of(app).database.dispose()
    return results


def asgi(options: Options) -> list[Result]:
    return asyncio.run(_asgi(options))


def service(options: Options) -> list[Result]:
    results: list[Result] = []
    for name, (body, expected) in PAYLOADS.items():
        source, target = body["source"], body["target"]
        answer = type_service.check_connection(source, target)
        if answer.compatibility.verdict != expected:
            raise RuntimeError(f"check_connection gave {answer.compatibility.verdict}")
        for _ in range(1000):  # warm-up
            type_service.check_connection(source, target)
        latencies: list[int] = []
        deadline = Deadline(options.service_max_s)
        start = time.perf_counter()
        while len(latencies) < options.service_calls and not deadline.passed:
            t0 = time.perf_counter_ns()
            type_service.check_connection(source, target)
            latencies.append(time.perf_counter_ns() - t0)
        elapsed = time.perf_counter() - start
        results.append(
            summarise(
                "check_connection_service",
                name,
                "type_service.check_connection loop",
                latencies,
                elapsed,
            )
        )
    return results


BENCHMARKS = {
    "check_connection_service": service,
    "check_connection_asgi": asgi,
    "check_connection_http": http,
}
