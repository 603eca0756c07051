"""The host side of the runner protocol, shared by every backend: a channel to a runner process,
the handshake that verifies the confinement, and one request/response per job."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import selectors
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path
from typing import Any

from calcgraph.workers.sandbox.base import (
    ErrorKind,
    RunError,
    RunResult,
    Sandbox,
    SandboxError,
    SandboxSpec,
    clean_text,
    truncate_logs,
    unstorable,
)

# The kernel's parent-death signal (bwrap --die-with-parent, the runner's PR_SET_PDEATHSIG) fires
# when the *thread* that forked the sandbox exits. Sandboxes outlive the job thread that started
# them (the warm pool hands them to other threads), so every sandbox is forked by one thread that
# lives as long as the worker process.
_spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sandbox-spawner")


def spawn(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """`subprocess.Popen(args, **kwargs)` with pipes for all three streams, on the spawner."""

    def popen() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs
        )

    return _spawner.submit(popen).result()


_INLINED = (
    "from calcgraph.workers.sandbox.confine import confine, proc_status  # inlined in the sandbox\n"
)
_FUTURE = "from __future__ import annotations\n"


@cache
def runner_source() -> str:
    """The bootstrap's source, passed to the sandbox's python with `-c`: `runner.py` with its
    import of `confine.py` (the sandbox has no calcgraph to import) replaced by that module's
    code after its `from __future__` line. Both are standard library only."""
    here = Path(__file__).parent
    runner = (here / "runner.py").read_text(encoding="utf-8")
    confine = (here / "confine.py").read_text(encoding="utf-8")
    if runner.count(_INLINED) != 1 or confine.count(_FUTURE) != 1:
        raise RuntimeError("runner.py or confine.py no longer has the line runner_source expects")
    return runner.replace(_INLINED, confine.partition(_FUTURE)[2])


class ChannelClosed(Exception):
    """The runner's end of the channel is gone (it exited or was killed)."""


_WAKE_SECONDS = 0.25
"""Longest single wait for the runner's output: a channel closed by another thread (a cancel
killing the sandbox) is noticed within this, even when closing it removed the descriptor from
the wait before the end of file reached it."""


class Channel(ABC):
    """A byte pipe to a runner: lines out, lines in, with a deadline."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self.closed = False
        """Set by `close` (from any thread): a reader waiting for a line gives up."""

    @abstractmethod
    def send(self, data: bytes) -> None: ...

    @abstractmethod
    def _read(self, timeout: float) -> bytes | None:
        """Bytes from the runner's stdout; None when nothing came in time; b'' at end of file."""

    @abstractmethod
    def diagnostics(self) -> str:
        """What the sandbox wrote to its own stderr (bwrap or engine errors), bounded."""

    def recv_line(self, deadline: float, limit: int) -> bytes:
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                return line
            if len(self._buffer) > limit:
                raise OverflowError(f"the sandbox sent more than {limit} bytes in one message")
            if self.closed:
                raise ChannelClosed
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            try:
                data = self._read(min(remaining, _WAKE_SECONDS))
            except (OSError, ValueError):
                if self.closed:  # its descriptors were closed under the read
                    raise ChannelClosed from None
                raise
            if data is None:
                continue
            if not data:
                raise ChannelClosed
            self._buffer += data


class PipeChannel(Channel):
    """The stdin/stdout/stderr pipes of a local child process (bwrap and process backends)."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        super().__init__()
        assert process.stdin
        assert process.stdout
        assert process.stderr
        self.process = process
        self._stdout = process.stdout.fileno()
        self._stderr = process.stderr.fileno()
        os.set_blocking(self._stderr, False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._stdout, selectors.EVENT_READ)

    def send(self, data: bytes) -> None:
        assert self.process.stdin
        try:
            self.process.stdin.write(data)
            self.process.stdin.flush()
        except (BrokenPipeError, ValueError) as exc:
            raise ChannelClosed from exc

    def _read(self, timeout: float) -> bytes | None:
        if not self._selector.select(timeout):
            return None
        return os.read(self._stdout, 1 << 16)

    def diagnostics(self) -> str:
        with contextlib.suppress(OSError, TypeError):
            return (os.read(self._stderr, 1 << 16) or b"").decode("utf-8", "replace").strip()
        return ""

    def close(self) -> None:
        self.closed = True
        self._selector.close()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            with contextlib.suppress(OSError):
                if stream:
                    stream.close()


def _hex_zero(value: str | None) -> bool:
    return value is not None and int(value, 16) == 0


def verify_status(status: Mapping[str, str], niceness: int | None = None) -> str | None:
    """Why a runner's self-report breaks the limits (capabilities, privileges, uid, a CPU
    priority above `niceness`), or None."""
    uids = (status.get("Uid") or "0").split()
    if any(int(uid) == 0 for uid in uids):
        return f"the sandbox runs as root (Uid: {status.get('Uid')})"
    for name in ("CapEff", "CapPrm", "CapAmb"):
        if name in status and not _hex_zero(status.get(name)):
            return f"the sandbox holds capabilities ({name}: {status.get(name)})"
    if "CapEff" not in status:
        return "the sandbox could not report its capabilities"
    if status.get("NoNewPrivs") != "1":
        return f"no_new_privs is not set (NoNewPrivs: {status.get('NoNewPrivs')})"
    if niceness is not None and int(status.get("Nice") or -20) < niceness:
        return f"it runs at niceness {status.get('Nice')}, not {niceness} or lower in priority"
    return None


def _left_running(reply: Mapping[str, Any]) -> str:
    """What a job left running that its runner could not end (threads cannot be killed), as
    words; empty when nothing."""
    parts = []
    for key, noun in (("stray_threads", "thread"), ("stray_processes", "process")):
        count = reply.get(key)
        if isinstance(count, int) and count > 0:
            parts.append(
                f"{count} {noun}{'es' if noun == 'process' else 's'}" if count > 1 else f"1 {noun}"
            )
    return " and ".join(parts)


class RunnerSandbox(Sandbox):
    """A runner reached over a channel. Backends give it how to kill and inspect the sandbox."""

    def __init__(
        self,
        spec: SandboxSpec,
        channel: Channel,
        config: dict[str, Any],
        *,
        kill: Callable[[], None],
        oom_killed: Callable[[], bool],
        details: dict[str, Any] | None = None,
    ) -> None:
        self.spec = spec
        self.started_at = time.monotonic()
        self.jobs = 0
        self.status: dict[str, str] = {}
        self.details: dict[str, Any] = details or {}
        """Where the sandbox lives (pid, cgroup directories, container id): for operators."""
        self._channel = channel
        self._config = config
        self._kill = kill
        self._oom_killed = oom_killed
        self._lock = threading.Lock()
        self._alive = True
        self.foreign_lines = 0
        """Lines on the result channel that answered no request of ours: a handler wrote them."""

    @property
    def alive(self) -> bool:
        return self._alive

    def handshake(self) -> None:
        """Send the configuration and wait for the handler to be imported; verify confinement."""
        limits = self.spec.limits
        deadline = time.monotonic() + limits.timeout_seconds
        nonce = secrets.token_hex(16)
        try:
            self._channel.send(json.dumps({**self._config, "nonce": nonce}).encode() + b"\n")
            reply = self._receive(deadline, nonce)
        except SandboxError:
            self.close()
            raise
        if reply.get("type") != "ready":
            self.close()
            error = reply.get("error") or {}
            raise SandboxError(
                error.get("kind", "sandbox_error"),
                clean_text(str(error.get("message", "the sandbox did not start"))),
                truncate_logs(str(reply.get("logs", "")), limits.output_bytes),
            )
        self.status = dict(reply.get("status") or {})
        problem = verify_status(self.status, self._config.get("niceness"))
        if problem:
            self.close()
            raise SandboxError(
                "sandbox_error", f"refusing a sandbox that breaks its limits: {problem}"
            )

    def _receive(self, deadline: float, nonce: str) -> dict[str, Any]:
        """The runner's answer to the request sent with `nonce`; any other line is skipped."""
        while True:
            message = self._receive_line(deadline)
            if message.get("nonce") == nonce:
                return message
            self.foreign_lines += 1

    def _receive_line(self, deadline: float) -> dict[str, Any]:
        limits = self.spec.limits
        try:
            line = self._channel.recv_line(deadline, limits.result_bytes + limits.output_bytes * 2)
        except TimeoutError:
            self.close()
            raise SandboxError(
                "timeout",
                f"the job ran longer than {limits.timeout_seconds:g} s; the sandbox was killed",
            ) from None
        except ChannelClosed:
            diagnostics = self._channel.diagnostics()
            oom = self._oom_killed()  # before the kill, which removes the evidence
            self.close()
            if oom:
                raise SandboxError(
                    "out_of_memory",
                    f"the sandbox went over its memory limit of {limits.memory_bytes} bytes "
                    "and was killed",
                ) from None
            raise SandboxError(
                "sandbox_error",
                "the sandbox exited unexpectedly"
                + (f": {diagnostics[:2000]}" if diagnostics else ""),
            ) from None
        except OverflowError as exc:
            self.close()
            raise SandboxError("sandbox_error", str(exc)) from None
        try:
            message = json.loads(line)
        except ValueError:
            self.close()
            raise SandboxError("sandbox_error", "the sandbox answered garbage") from None
        if not isinstance(message, dict):
            self.close()
            raise SandboxError("sandbox_error", "the sandbox answered garbage")
        return message

    def run(self, inputs: Mapping[str, Any]) -> RunResult:
        began = time.monotonic()
        limits = self.spec.limits
        with self._lock:
            if not self._alive:
                return RunResult.failed("sandbox_error", "the sandbox is gone")
            self.jobs += 1
            nonce = secrets.token_hex(16)
            try:
                request = json.dumps({"nonce": nonce, "inputs": dict(inputs)}).encode()
                self._channel.send(request + b"\n")
                reply = self._receive(began + limits.timeout_seconds, nonce)
            except ChannelClosed:
                self.close()
                return RunResult.failed(
                    "sandbox_error", "the sandbox is gone", duration=time.monotonic() - began
                )
            except SandboxError as exc:
                return exc.result(time.monotonic() - began)
            except (TypeError, ValueError) as exc:  # inputs that are not JSON
                return RunResult.failed("infrastructure_error", f"inputs are not JSON: {exc}")
            left = _left_running(reply)
            if self.foreign_lines or left:
                # Whatever wrote them may write again, and a thread cannot be killed: the next
                # job gets a fresh sandbox (contract section 8b).
                self.close()
        duration = time.monotonic() - began
        logs = truncate_logs(str(reply.get("logs", "")), limits.output_bytes)
        if left:
            logs += f"\n[calcgraph: the job left {left} running; its sandbox was stopped]\n"
        if self.foreign_lines:
            logs += (
                f"\n[calcgraph: ignored {self.foreign_lines} line(s) written on the runner's "
                "result channel; they are not results]\n"
            )
        outputs = reply.get("outputs")
        if reply.get("status") == "success" and isinstance(outputs, dict):
            problem = unstorable(outputs)
            if problem is None:
                return RunResult("success", outputs, None, logs, duration)
            return RunResult("failed", None, RunError("user_error", problem), logs, duration)
        error = reply.get("error") or {}
        kind: ErrorKind = "sandbox_error"
        if error.get("kind") == "user_error":
            kind = "user_error"
        elif error.get("kind") == "out_of_memory":
            kind = "out_of_memory"
        if kind == "out_of_memory":
            # A MemoryError can leave the interpreter half-broken: the next job gets a fresh one.
            self.close()
        message = clean_text(str(error.get("message", "")))
        return RunResult("failed", None, RunError(kind, message), logs, duration)

    def close(self) -> None:
        if not self._alive:
            return
        self._alive = False
        self._kill()
