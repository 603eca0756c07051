"""The parts of the execution path on their own: cache key, result caches, code cache, pool."""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis

from calcgraph.domain.commit_wait.waiting import wait_for_job
from calcgraph.domain.jobs.cache_key import CachedResult, result_key
from calcgraph.domain.jobs.inputs import resolve_inputs
from calcgraph.domain.jobs.views import JobView
from calcgraph.settings import Settings
from calcgraph.workers.code_cache import CodeCache, CodeError
from calcgraph.workers.notify import LocalNotifier, RedisNotifier
from calcgraph.workers.result_cache import InProcessResultCache, RedisResultCache
from calcgraph.workers.sandbox import Limits, RunRequest, WarmPool, create_backend
from tests.execution.conftest import default_sandbox
from tests.execution.test_redis import REDIS_URL

SCHEMA = {"length": {"type": "Length", "required": True}}


def test_the_cache_key_is_the_user_the_version_and_the_si_inputs() -> None:
    a = resolve_inputs({"length": {"value": 1500, "unit": "mm"}}, SCHEMA)
    b = resolve_inputs({"length": 1.5}, SCHEMA)
    assert result_key("u1", "v1", a) == result_key("u1", "v1", b)
    assert result_key("u1", "v1", a) != result_key("u1", "v2", a)
    assert result_key("u1", "v1", a) != result_key("u2", "v1", a)
    assert result_key("u1", "v1", {"x": 1, "y": 2}) == result_key("u1", "v1", {"y": 2, "x": 1})


def test_the_in_process_cache_expires_and_stays_bounded() -> None:
    cache = InProcessResultCache(ttl_seconds=0.2, max_entries=2)
    cache.put("a", CachedResult({"y": 1}))
    assert cache.lookup("a") == CachedResult({"y": 1})
    cache.put("b", CachedResult({"y": 2}))
    cache.put("c", CachedResult({"y": 3}))
    assert cache.lookup("a") is None  # least recently stored goes first
    time.sleep(0.25)
    assert cache.lookup("c") is None


async def test_the_redis_cache_shares_results_with_an_expiry() -> None:
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping()
    except redis.RedisError as exc:
        pytest.skip(f"no Redis at {REDIS_URL}: {exc}")
    prefix = f"test-{uuid.uuid4().hex[:8]}:"
    cache = RedisResultCache(REDIS_URL, ttl_seconds=0.3, prefix=prefix)
    try:
        cache.put("k", CachedResult({"y": 1.5}, "log"))
        assert await cache.get("k") == CachedResult({"y": 1.5}, "log")
        assert cache.lookup("missing") is None
        await asyncio.sleep(0.4)
        assert await cache.get("k") is None
    finally:
        await cache.close()


def _view(job_id: str, status: str) -> JobView:
    now = datetime.now(UTC)
    return JobView(
        job_id, "f", "v", "p", "u", status, {}, None, None, None, False, None, None, now, None, None
    )


class _Job:
    """A job row as `read` sees it, with a count of the reads."""

    def __init__(self, status: str = "queued") -> None:
        self.status, self.reads = status, 0

    async def read(self) -> JobView:
        self.reads += 1
        return _view("j", self.status)


async def test_waiting_for_a_fresh_job_reads_once_it_is_notified() -> None:
    notifier = LocalNotifier()
    job = _Job()

    async def finish_soon() -> None:
        await asyncio.sleep(0.01)
        job.status = "success"
        await asyncio.to_thread(notifier.publish, "j")  # a worker thread publishes

    finishing = asyncio.create_task(finish_soon())
    view = await wait_for_job(notifier, "j", 5.0, job.read, fresh=True)
    await finishing
    assert (view.status, job.reads) == ("success", 1)
    # Not fresh (a job submitted earlier): read at once, then again after the notification.
    job.status, job.reads = "queued", 0
    finishing = asyncio.create_task(finish_soon())
    view = await wait_for_job(notifier, "j2", 0.2, job.read)
    await finishing
    assert job.reads >= 2


async def test_a_fresh_job_whose_notification_is_lost_is_still_read() -> None:
    notifier = LocalNotifier()
    job = _Job("success")  # finished, and nobody publishes
    started = time.perf_counter()
    view = await wait_for_job(notifier, "j", 5.0, job.read, fresh=True)
    assert view.status == "success"
    assert time.perf_counter() - started < 1.0  # the first backoff, not the whole wait
    job.status = "running"
    view = await wait_for_job(notifier, "j", 0.0, job.read, fresh=True)
    assert view.status == "running"


async def test_a_redis_notifier_is_steady_only_once_subscribed_for_a_while() -> None:
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping()
    except redis.RedisError as exc:
        pytest.skip(f"no Redis at {REDIS_URL}: {exc}")
    notifier = RedisNotifier(REDIS_URL, f"test-{uuid.uuid4().hex[:8]}:")
    job = _Job()
    try:
        assert not notifier.steady()
        # Just subscribed (by this wait): a notification may predate the subscription.
        await wait_for_job(notifier, "j", 0.01, job.read, fresh=True)
        assert not notifier.steady()
        await asyncio.sleep(1.1)
        assert notifier.steady()

        async def finish_soon() -> None:
            await asyncio.sleep(0.05)
            job.status = "success"
            await asyncio.to_thread(notifier.publish, "j")

        job.reads = 0
        finishing = asyncio.create_task(finish_soon())
        view = await wait_for_job(notifier, "j", 5.0, job.read, fresh=True)
        await finishing
        assert (view.status, job.reads) == ("success", 1)
    finally:
        await notifier.close()


def _blobs(files: dict[str, bytes]) -> tuple[dict[str, str], dict[str, bytes]]:
    digests = {path: hashlib.sha256(content).hexdigest() for path, content in files.items()}
    return digests, {hashlib.sha256(c).hexdigest(): c for c in files.values()}


def test_code_is_staged_once_by_content(tmp_path: Path) -> None:
    cache = CodeCache(tmp_path / "cache")
    files, blobs = _blobs({"main.py": b"x = 1\n", "pkg/util.py": b"y = 2\n"})
    loads: list[list[str]] = []

    def load(digests: list[str]) -> dict[str, bytes]:
        loads.append(digests)
        return blobs

    first = cache.stage(files, load)
    assert (first / "pkg" / "util.py").read_bytes() == b"y = 2\n"
    assert cache.stage(dict(files), load) == first
    assert CodeCache(tmp_path / "cache").stage(files, load) == first  # another worker
    assert len(loads) == 1
    assert not [p for p in (tmp_path / "cache").iterdir() if p.name.startswith(".staging")]


def test_bad_code_is_refused(tmp_path: Path) -> None:
    cache = CodeCache(tmp_path / "cache")
    files, blobs = _blobs({"main.py": b"x = 1\n"})
    with pytest.raises(CodeError, match="does not match"):
        cache.stage(files, lambda digests: {files["main.py"]: b"tampered"})
    with pytest.raises(CodeError, match="missing"):
        cache.stage(files, lambda digests: {})
    with pytest.raises(CodeError, match="refusing"):
        cache.stage({"../evil.py": files["main.py"]}, lambda digests: blobs)
    assert [p.name for p in (tmp_path / "cache").iterdir()] == []


def test_the_warm_pool_serves_concurrent_jobs_of_one_version(tmp_path: Path) -> None:
    """Regression: with two idle sandboxes of one version, taking one mutated the pool's dict
    during iteration (RuntimeError) and the job failed as an infrastructure error."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "main.py").write_text(
        "import time\ndef f(x):\n    time.sleep(0.2)\n    return {'y': x}\n"
    )
    backend = create_backend(Settings(_env_file=None), kind=default_sandbox())  # type: ignore[call-arg, arg-type]
    pool = WarmPool(backend, max_size=10)
    request = RunRequest(code, "main:f", {"x": 1}, ("y",), Limits(timeout_seconds=20))
    try:
        results = []
        threads = [
            threading.Thread(target=lambda: results.append(pool.run("v", request)))
            for _ in range(3)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(pool) == 3
        for _ in range(3):
            assert pool.run("v", request).status == "success"
        assert all(r.status == "success" for r in results), results
    finally:
        pool.close()
        backend.close()
