"""Hole 2, "a warm sandbox is one user's" (contract section 8).

The author of a public function collected other users' inputs from module globals and /tmp of
the warm sandbox they all shared, and a handler that wrote a line on the runner's result pipe
shifted every later result by one job. Now warm sandboxes are keyed by (function version, user)
and every answer on the result channel carries the nonce of the request it answers.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from calcgraph.domain.runs.chains.service import ChainContext
from calcgraph.workers.sandbox import Limits, RunRequest, SandboxBackend, WarmPool
from tests.execution.conftest import Platform
from tests.execution.factories import deploy
from tests.sandbox.conftest import CodeFactory

# The author's function: it remembers every caller's inputs in a module global and in /tmp, and
# returns everything it has seen.
COLLECTOR = """
import glob, json, os, tempfile
SEEN = []

def main(secret):
    SEEN.append(secret)
    tmp = tempfile.gettempdir()
    with open(os.path.join(tmp, "seen-" + secret), "w") as handle:
        handle.write(secret)
    found = set(SEEN)
    for path in glob.glob(os.path.join(tmp, "seen-*")) + glob.glob("/tmp/seen-*"):
        try:
            found.add(open(path).read())
        except OSError:
            pass
    return {"seen": sorted(found)}
"""

# A handler that writes fake result lines on every descriptor it can find (the runner's result
# pipe among them), in every framing it can think of, now and from a thread later on.
FORGER = """
import json, os, sys, threading, time

def _fake(value, nonce=None):
    message = {"type": "result", "status": "success", "outputs": {"y": value}, "logs": ""}
    if nonce is not None:
        message["nonce"] = nonce
    return (json.dumps(message) + "\\n").encode()

def _spray(value):
    lines = _fake(value) + _fake(value, "0" * 32) + _fake(value, "guess")
    for fd in range(3, 64):
        try:
            os.write(fd, lines)
        except OSError:
            pass
    for fd in os.listdir("/proc/self/fd"):
        try:
            with open(f"/proc/self/fd/{fd}", "wb", buffering=0) as handle:
                handle.write(lines)
        except OSError:
            pass

def main(x, forge=False):
    if forge:
        _spray("forged")
        sys.stdout.write(_fake("forged-stdout").decode())
        def later():
            for _ in range(20):
                time.sleep(0.05)
                _spray("forged-later")
        threading.Thread(target=later, daemon=True).start()
    return {"y": x}
"""


def _request(code_dir: Path, inputs: dict[str, object], tenant: str, limits: Limits) -> RunRequest:
    return RunRequest(code_dir, "job:main", inputs, (), limits, tenant=tenant)


def test_collector_gets_nothing_of_another_user(
    sandbox_backend: SandboxBackend, make_code: CodeFactory, limits: Limits
) -> None:
    code_dir = make_code(job=COLLECTOR)
    pool = WarmPool(sandbox_backend, max_size=10)
    try:
        bob = pool.run("fv", _request(code_dir, {"secret": "bob-secret"}, "bob", limits))
        carol = pool.run("fv", _request(code_dir, {"secret": "carol-secret"}, "carol", limits))
        bob_again = pool.run("fv", _request(code_dir, {"secret": "bob-2"}, "bob", limits))
    finally:
        pool.close()
    assert bob.outputs == {"seen": ["bob-secret"]}, bob
    assert carol.outputs == {"seen": ["carol-secret"]}, carol
    # A user's own warm state stays (that is what a warm sandbox is for), nobody else's.
    assert bob_again.outputs == {"seen": ["bob-2", "bob-secret"]}, bob_again
    assert pool.stats.starts == 2
    assert pool.stats.hits == 1


def test_forged_result_lines_shift_no_result(
    sandbox_backend: SandboxBackend, make_code: CodeFactory, limits: Limits
) -> None:
    code_dir = make_code(job=FORGER)
    pool = WarmPool(sandbox_backend, max_size=10)
    try:
        # One user, one warm sandbox: the worst case for a shifted result.
        forged = pool.run("fv", _request(code_dir, {"x": "bob", "forge": True}, "bob", limits))
        results = [
            pool.run("fv", _request(code_dir, {"x": f"bob-{i}"}, "bob", limits)) for i in range(3)
        ]
        carol = pool.run("fv", _request(code_dir, {"x": "carol"}, "carol", limits))
    finally:
        pool.close()
    assert forged.status == "success", forged
    assert forged.outputs == {"y": "bob"}
    assert "forged-stdout" in forged.logs  # what it prints is a log line, nothing more
    assert [r.outputs for r in results] == [{"y": f"bob-{i}"} for i in range(3)], results
    assert carol.outputs == {"y": "carol"}, carol


def test_handler_without_the_runner_cannot_answer(
    sandbox_backend: SandboxBackend, make_code: CodeFactory, limits: Limits
) -> None:
    """A handler that answers in the runner's place and then blocks forever: its job times out,
    the fake answer is not taken for any job's result."""
    source = FORGER.replace(
        '    return {"y": x}',
        "    if x == 'stall':\n        time.sleep(3600)\n    return {\"y\": x}",
    )
    code_dir = make_code(job=source)
    short = Limits(timeout_seconds=3)
    pool = WarmPool(sandbox_backend, max_size=10)
    try:
        stalled = pool.run("fv", _request(code_dir, {"x": "stall", "forge": True}, "bob", short))
        after = pool.run("fv", _request(code_dir, {"x": "next"}, "bob", limits))
    finally:
        pool.close()
    assert stalled.status == "failed", stalled
    assert stalled.error is not None
    assert stalled.error.kind == "timeout"
    assert after.outputs == {"y": "next"}, after


def test_chain_does_not_hold_a_sandbox_across_users(
    sandbox_backend: SandboxBackend, make_code: CodeFactory, limits: Limits
) -> None:
    """A chain's held sandbox (and the pool it returns to) serves its run owner only."""
    from calcgraph.workers.chains import _Held

    class _Runtime:
        def __init__(self, pool: WarmPool) -> None:
            self.pool = pool

    code_dir = make_code(job=COLLECTOR)
    pool = WarmPool(sandbox_backend, max_size=10)
    held = _Held(_Runtime(pool))  # type: ignore[arg-type]
    try:
        bob = held.run("fv", _request(code_dir, {"secret": "bob-secret"}, "bob", limits))
        carol = held.run("fv", _request(code_dir, {"secret": "carol-secret"}, "carol", limits))
        held.release()
        other = _Held(_Runtime(pool))  # type: ignore[arg-type]
        dave = other.run("fv", _request(code_dir, {"secret": "dave-secret"}, "dave", limits))
        other.release()
    finally:
        held.release()
        pool.close()
    assert bob.outputs == {"seen": ["bob-secret"]}
    assert carol.outputs == {"seen": ["carol-secret"]}, carol
    assert dave.outputs == {"seen": ["dave-secret"]}, dave
    assert ChainContext.__dataclass_fields__["user_id"]  # the owner the chain runs for


PUBLIC_COLLECTOR = {
    "main.py": COLLECTOR.replace("def main(secret):", "def collect(secret):"),
}


@pytest.mark.db
async def test_public_function_callers_never_share_state(any_sandbox_platform: Platform) -> None:
    """End to end, on both databases: bob and carol call alice's public collector through the
    API; neither ever receives the other's input."""
    platform = any_sandbox_platform
    alice = await platform.user("alice")
    await platform.user("bob")
    await platform.user("carol")
    deployed = await deploy(
        platform.database,
        alice,
        files=PUBLIC_COLLECTOR,
        functions={
            "collect": {
                "handler": "main:collect",
                "inputs": {"secret": {"type": "String", "required": True}},
                "outputs": {"seen": {"type": "list[String]"}},
            }
        },
        visibility="public",
    )
    path = f"/packages/{deployed.package_name}/functions/collect/execute"
    seen: dict[str, set[str]] = {"bob": set(), "carol": set()}
    for round_ in range(2):
        for user in ("bob", "carol"):
            secret = f"{user}-{round_}-{uuid.uuid4().hex[:6]}"
            response = await platform.execute(
                path, {"secret": secret}, wait=20, headers=platform.headers(user)
            )
            assert response.status_code == 200, response.text
            body = response.json()
            assert body["status"] == "success", body
            seen[user] |= set(body["outputs"]["seen"])
    for user, secrets in seen.items():
        assert secrets, seen
        assert all(s.startswith(f"{user}-") for s in secrets), seen
