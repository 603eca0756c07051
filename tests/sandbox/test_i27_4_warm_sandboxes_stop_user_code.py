"""Issue 27, point 4: warm sandboxes keep running no user code (contract section 8b).

When a job ends, every process and thread its handler started is gone before the sandbox serves
another job: the processes are killed (the sandbox stays warm), and a sandbox whose job left a
thread running (threads cannot be killed) is stopped and the next job gets a fresh one. A warm
sandbox idle for `CALCGRAPH_WARM_IDLE_SECONDS` (600) is stopped. On every backend.
"""

from __future__ import annotations

import os
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from calcgraph.settings import Settings
from calcgraph.workers.sandbox import Limits, SandboxBackend, SandboxSpec, WarmPool, create_pool
from tests.sandbox.conftest import TEST_TIMEOUT

SOURCE = textwrap.dedent(
    """
    import os
    import threading
    import time

    RAN = []


    def _sleep_forever():
        while True:
            time.sleep(0.05)


    def _fork(detach):
        pid = os.fork()
        if pid:
            return pid
        try:
            if detach:  # a daemon: its own session, and its parent gone (double fork)
                os.setsid()
                if os.fork():
                    os._exit(0)
            _sleep_forever()
        finally:
            os._exit(0)


    def _mine():
        # Every process of the sandbox's uid but the runner (and a pid namespace's init).
        me, uid, found = os.getpid(), os.getuid(), []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) in (1, me):
                continue
            try:
                with open(f"/proc/{entry}/status") as status:
                    lines = status.read().splitlines()
            except OSError:
                continue
            uids = [line.split()[1] for line in lines if line.startswith("Uid:")]
            state = [line.split()[1] for line in lines if line.startswith("State:")]
            if uids and int(uids[0]) == uid and state != ["Z"]:
                found.append(int(entry))
        return found


    def main(action):
        RAN.append(action)
        forked = []
        if action in ("fork", "both"):
            forked = [_fork(detach=False), _fork(detach=True)]
        if action in ("thread", "both"):
            threading.Thread(target=_sleep_forever, daemon=True).start()
        return {
            "jobs": len(RAN),
            "processes": _mine(),
            "threads": len(os.listdir("/proc/self/task")),
            "forked": forked,
        }
    """
)


@pytest.fixture
def spec(tmp_path: Path, sandbox_backend: SandboxBackend) -> SandboxSpec:
    if sandbox_backend.name == "process" and os.geteuid() != 0:
        pytest.skip("the process backend run by a non-root user shares its uid with the host")
    code = tmp_path / "code"
    code.mkdir()
    (code / "job.py").write_text(SOURCE)
    return SandboxSpec(code, "job:main", limits=Limits(timeout_seconds=TEST_TIMEOUT), tenant="u1")


def _alive(pid: int) -> bool:
    """Whether host process `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def _job(pool: WarmPool, spec: SandboxSpec, action: str) -> dict[str, Any]:
    result = pool.run_spec("fv", spec, {"action": action})
    assert result.status == "success", result
    assert result.outputs is not None
    return result.outputs


class TestProcessesAJobStartedAreGoneBeforeTheNextJob:
    def test_forked_children_and_daemons_are_killed_and_the_sandbox_stays_warm(
        self, sandbox_backend: SandboxBackend, spec: SandboxSpec
    ) -> None:
        pool = WarmPool(sandbox_backend)
        try:
            before = _job(pool, spec, "look")
            assert before["processes"] == []
            left = _job(pool, spec, "fork")
            if sandbox_backend.name == "process":
                # Its /proc shows no process but the runner's own (hidepid; the children are
                # not dumpable after the uid change): the host looks. No pid namespace, so
                # the job's pids are the host's.
                assert all(not _alive(pid) for pid in left["forked"]), left
            else:
                assert left["processes"]  # while the job ran, its children did
            after = _job(pool, spec, "look")
            # The same warm sandbox (its module state kept), with none of the job's processes.
            assert after["jobs"] == 3
            assert pool.stats.starts == 1
            assert after["processes"] == []
            assert after["threads"] == before["threads"]
        finally:
            pool.close()


class TestThreadsAJobStartedAreGoneBeforeTheNextJob:
    def test_a_sandbox_whose_job_left_a_thread_is_stopped(
        self, sandbox_backend: SandboxBackend, spec: SandboxSpec
    ) -> None:
        pool = WarmPool(sandbox_backend)
        try:
            before = _job(pool, spec, "look")
            sandbox = pool.acquire("fv", spec)
            result = sandbox.run({"action": "both"})
            pool.release("fv", sandbox)
            assert result.status == "success", result
            assert "its sandbox was stopped" in result.logs, result.logs
            assert not sandbox.alive
            after = _job(pool, spec, "look")
            assert after["jobs"] == 1  # a fresh sandbox
            assert after["processes"] == []
            assert after["threads"] == before["threads"]
        finally:
            pool.close()


class TestIdleWarmSandboxesAreStopped:
    def test_the_reaper_stops_a_sandbox_idle_past_the_setting(
        self, sandbox_backend: SandboxBackend, spec: SandboxSpec
    ) -> None:
        pool = WarmPool(sandbox_backend, max_idle_seconds=0.3)
        try:
            sandbox = pool.acquire("fv", spec)
            assert sandbox.run({"action": "look"}).status == "success"
            pool.release("fv", sandbox)
            deadline = time.monotonic() + 30
            while sandbox.alive:
                assert time.monotonic() < deadline, "the idle sandbox was never stopped"
                time.sleep(0.05)
            assert len(pool) == 0
            assert pool.stats.expired == 1
        finally:
            pool.close()

    def test_expire_stops_only_the_sandboxes_idle_long_enough(
        self, sandbox_backend: SandboxBackend, spec: SandboxSpec
    ) -> None:
        pool = WarmPool(sandbox_backend)  # the default: 10 minutes
        try:
            assert pool.max_idle_seconds == 600
            sandbox = pool.acquire("fv", spec)
            pool.release("fv", sandbox)
            assert pool.expire(time.monotonic() + 60) == 0
            assert sandbox.alive
            assert pool.expire(time.monotonic() + 600) == 1
            assert not sandbox.alive
            assert len(pool) == 0
        finally:
            pool.close()


def test_the_setting_reaches_the_pool(sandbox_backend: SandboxBackend) -> None:
    settings = Settings(_env_file=None, warm_idle_seconds=42)  # type: ignore[call-arg]
    assert create_pool(settings, sandbox_backend).max_idle_seconds == 42
    assert Settings(_env_file=None).warm_idle_seconds == 600  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="greater than 0"):
        Settings(_env_file=None, warm_idle_seconds=0)  # type: ignore[call-arg]
