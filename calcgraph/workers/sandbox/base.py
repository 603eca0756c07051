"""The sandbox port: what a backend promises, what a job asks for, what it gets back.

A backend starts *sandboxes*: one long-lived runner process per function version, confined by the
backend, with the handler imported once. A job is one request/response over the sandbox's pipes,
so a warm sandbox runs the next job without a new start (see `pool.py`).

The interface is synchronous and thread-safe per sandbox: Dramatiq actors call it from their worker
threads; async callers wrap it in `asyncio.to_thread`.
"""

from __future__ import annotations

import math
import os
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar, Literal

from calcgraph.domain.jobs.outcome import Outcome
from calcgraph.domain.read_models import from_attributes
from calcgraph.settings.fields import NICENESS_DEFAULT, NICENESS_MAX

ErrorKind = Literal[
    "user_error",
    "timeout",
    "out_of_memory",
    "sandbox_error",
    "infrastructure_error",
    "cancelled",
    "quota_exceeded",
]
Status = Literal["success", "failed"]

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

# Every limit a backend must enforce, by name. A backend that cannot enforce one of them on this
# machine refuses to start, unless the backend documents that limit in `unenforceable`.
LIMIT_NAMES = (
    "network",  # no network at all
    "read_only_fs",  # nothing writable but /tmp
    "tmp_size",  # /tmp holds at most tmp_bytes
    "memory",
    "cpus",
    "cpu_priority",  # below the platform's: niceness, and the cgroup's weight where it has one
    "pids",  # process (task) count
    "capabilities",  # all dropped
    "no_new_privileges",
    "non_root",
    "user_namespaces",  # no new user namespace to regain capabilities inside
    "environment",  # nothing of the host's environment is visible
    "timeout",
    "output",  # captured stdout/stderr capped
)


@dataclass(frozen=True)
class Limits:
    """The specification's worker limits (Limits: worker container, execution timeout)."""

    timeout_seconds: float = 300.0
    memory_bytes: int = 2 * GiB
    cpus: float = 2.0
    tmp_bytes: int = 512 * MiB
    pids: int = 256
    """Not in the specification; enough for a handler with a thread pool, far below a fork bomb."""
    output_bytes: int = 64 * KiB
    """The contract's `logs` cap (section 4)."""
    result_bytes: int = 16 * MiB
    """Largest JSON result a sandbox may send back; protects the worker's memory."""
    open_files: int = 1024
    niceness: int = NICENESS_DEFAULT
    """Not in the specification: niceness steps below the CPU priority of the process that
    starts the sandbox (`CALCGRAPH_SANDBOX_NICENESS`), so that jobs yield the CPU to the
    platform; the sandbox's cgroup weight (and docker's cpu_shares) is lowered to match."""


def declared_limits(worker: Limits, resources: Mapping[str, Any] | None) -> Limits | None:
    """`worker` narrowed by a function's declared `resources` (contract 11): the smaller of
    each; None when it declares none."""
    if not resources:
        return None
    memory = resources.get("memory_mb")
    cpus = resources.get("cpus")
    timeout = resources.get("timeout_s")
    return replace(
        worker,
        memory_bytes=min(worker.memory_bytes, int(memory * MiB))
        if memory is not None
        else worker.memory_bytes,
        cpus=min(worker.cpus, float(cpus)) if cpus is not None else worker.cpus,
        timeout_seconds=min(worker.timeout_seconds, float(timeout))
        if timeout is not None
        else worker.timeout_seconds,
    )


@dataclass(frozen=True)
class SandboxSpec:
    """What a warm sandbox is started for: one function version."""

    code_dir: Path
    """A plain directory with the package's module files (mounted read-only)."""
    handler: str
    """`module:callable`, the module found in `code_dir`."""
    output_ports: tuple[str, ...] = ()
    limits: Limits = field(default_factory=Limits)
    image: str | None = None
    """docker only: the function version's image; the configured base image when unset."""
    deps_dir: Path | None = None
    """Optional directory of installed dependencies, mounted read-only and put on sys.path."""
    tenant: str = ""
    """The user whose jobs this sandbox runs: a warm sandbox is one user's (contract section 8),
    so two users never share its process, memory or /tmp."""


@dataclass(frozen=True)
class RunRequest:
    """One job: a function version's code and handler, and the inputs of this call."""

    code_dir: Path
    handler: str
    inputs: Mapping[str, Any]
    output_ports: tuple[str, ...] = ()
    limits: Limits = field(default_factory=Limits)
    image: str | None = None
    deps_dir: Path | None = None
    tenant: str = ""
    """The user the job runs for (the job's owner)."""

    @property
    def spec(self) -> SandboxSpec:
        return from_attributes(SandboxSpec, self, output_ports=tuple(self.output_ports))


@dataclass(frozen=True)
class RunError:
    kind: ErrorKind
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "message": self.message}


@dataclass(frozen=True)
class RunResult:
    """What a job's row records: `status`, `outputs` or `error`, `logs`, and the wall time."""

    status: Status
    outputs: dict[str, Any] | None = None
    error: RunError | None = None
    logs: str = ""
    duration: float = 0.0

    @classmethod
    def failed(
        cls, kind: ErrorKind, message: str, logs: str = "", duration: float = 0.0
    ) -> RunResult:
        return cls("failed", None, RunError(kind, message), logs, duration)

    def with_duration(self, duration: float) -> RunResult:
        return replace(self, duration=duration)

    def recorded(self) -> Outcome:
        """The outcome as a job's row keeps it: outputs of a success only, the error as JSON."""
        return Outcome(
            self.status,
            self.outputs if self.status == "success" else None,
            self.error.as_dict() if self.error is not None else None,
            self.logs,
        )


class SandboxError(Exception):
    """A sandbox could not be started or broke; carries the error kind a job records."""

    def __init__(self, kind: ErrorKind, message: str, logs: str = "") -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.message = message
        self.logs = logs

    def result(self, duration: float = 0.0) -> RunResult:
        return RunResult.failed(self.kind, self.message, self.logs, duration)


class SandboxUnavailable(Exception):
    """The backend cannot run here with every limit enforced: it refuses (fails closed)."""


def truncate_logs(text: str, limit: int) -> str:
    """Keep the head of the logs within `limit` bytes of UTF-8, saying that the rest was dropped.
    NULs and lone surrogates become U+FFFD: both databases store the same text (section 8)."""
    text = clean_text(text)
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    note = f"\n[calcgraph: logs truncated to {limit} bytes]\n".encode()
    head = data[: max(0, limit - len(note))]
    return (head + note).decode("utf-8", "ignore")


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def clean_text(text: str) -> str:
    """`text` with every NUL and lone surrogate replaced by U+FFFD."""
    return _UNSTORABLE.sub("\ufffd", text)


def unstorable(value: Any, path: str = "") -> str | None:
    """Why a handler's outputs cannot be stored the same on SQLite and PostgreSQL (a NUL or a lone
    surrogate in a string or key, a NaN or infinite float), naming the output; None when fine."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            found = _UNSTORABLE.search(item)
            if found:
                what = "a NUL character" if found.group() == "\x00" else "a lone surrogate"
                return f"the output {where or 'value'!r} holds {what}, which cannot be stored"
        elif isinstance(item, float):
            if math.isnan(item) or math.isinf(item):
                what = "NaN" if math.isnan(item) else "infinite"
                return f"the output {where or 'value'!r} is {what}, which JSON cannot hold"
        elif isinstance(item, Mapping):
            for key, child in item.items():
                key_text = str(key)
                if _UNSTORABLE.search(key_text):
                    return (
                        f"a key of the output {where or 'value'!r} holds a NUL character or a "
                        "lone surrogate, which cannot be stored"
                    )
                stack.append((child, f"{where}/{key_text}" if where else key_text))
        elif isinstance(item, list | tuple):
            stack.extend((child, f"{where}[{i}]") for i, child in enumerate(item))
    return None


def runner_config(
    spec: SandboxSpec, limits: Limits, *, code_dir: str, deps_dir: str, **confinement: Any
) -> dict[str, Any]:
    """The runner's config as every backend sends it (where the code and its dependencies are
    mounted, what it may return, the niceness it takes), plus the backend's own `confinement`
    (rlimits, user, ...)."""
    return {
        "handler": spec.handler,
        "code_dir": code_dir,
        "extra_paths": [deps_dir] if spec.deps_dir else [],
        "output_ports": list(spec.output_ports),
        "output_bytes": limits.output_bytes,
        "result_bytes": limits.result_bytes,
        "niceness": sandbox_niceness(limits),
        **confinement,
    }


NICENESS = "niceness below the worker's, RLIMIT_NICE 0 (verified at start)"
"""How every backend lowers a sandbox's CPU priority (the first part of its `cpu_priority`
mechanism; a backend's `mechanisms` name only what it adds)."""


def sandbox_niceness(limits: Limits) -> int:
    """The niceness a sandbox's processes run at: `limits.niceness` steps below this process's
    own (the platform's), the kernel's lowest (19) at most."""
    return min(NICENESS_MAX, os.getpriority(os.PRIO_PROCESS, 0) + limits.niceness)


class Sandbox(ABC):
    """A started sandbox for one function version: the handler is imported, jobs go over pipes."""

    spec: SandboxSpec
    started_at: float

    @property
    @abstractmethod
    def alive(self) -> bool: ...

    @abstractmethod
    def run(self, inputs: Mapping[str, Any]) -> RunResult:
        """Run one job. Never raises for the job's own failures: they are the result's `error`.
        After a timeout or an out-of-memory kill the sandbox is gone (`alive` is False)."""

    @abstractmethod
    def close(self) -> None:
        """Kill the sandbox and release everything it held; idempotent."""

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SandboxBackend(ABC):
    """One way to confine a runner process (docker, bwrap, process)."""

    name: ClassVar[str]
    unenforceable: frozenset[str] = frozenset()
    """Limits this backend documents as not enforced (docs/sandboxes.md); a backend may
    narrow or widen it per machine (the process backend running as root or not)."""
    resource_refusal: ClassVar[str | None] = None
    """Why this backend cannot enforce a function's declared `resources` (contract 11), or
    None when it enforces them: a job of such a function then fails, never runs unconfined."""

    def enforcement(self) -> dict[str, str]:
        """For each limit in LIMIT_NAMES, the mechanism that enforces it on this machine, or
        `"NOT ENFORCED"` for one in `unenforceable`. Raises SandboxUnavailable otherwise
        (`check_enforcement` of `mechanisms`, asked once a backend: the machine does not change
        under a running worker)."""
        return dict(self._enforcement)

    @cached_property
    def _enforcement(self) -> dict[str, str]:
        found = self.mechanisms()
        # Every backend's runner lowers its own niceness (`confine`); a backend names only what
        # it adds to that (a cgroup's or a container's weight).
        found["cpu_priority"] = "; ".join(filter(None, (NICENESS, found.get("cpu_priority"))))
        return check_enforcement(self.name, found, self.unenforceable)

    @abstractmethod
    def mechanisms(self) -> dict[str, str | None]:
        """For each limit in LIMIT_NAMES, what enforces it on this machine; None (or missing)
        where nothing does."""

    @abstractmethod
    def start(self, spec: SandboxSpec) -> Sandbox:
        """Start a warm sandbox; raises SandboxError (with kind) when it cannot."""

    def run(self, request: RunRequest) -> RunResult:
        """A cold run: start a sandbox, run one job, tear it down."""
        began = time.monotonic()
        try:
            sandbox = self.start(request.spec)
        except SandboxError as exc:
            return exc.result(time.monotonic() - began)
        try:
            return sandbox.run(request.inputs).with_duration(time.monotonic() - began)
        finally:
            sandbox.close()

    def fail_closed(self) -> None:
        """Refuse to start a sandbox when a limit is neither enforced nor documented."""
        try:
            self.enforcement()
        except SandboxUnavailable as exc:
            raise SandboxError("sandbox_error", str(exc)) from exc

    def close(self) -> None:  # noqa: B027 - most backends hold nothing to release
        """Release backend-wide resources (clients, connections)."""


NOT_ENFORCED = "NOT ENFORCED"


def check_enforcement(
    backend_name: str, found: dict[str, str | None], allowed: frozenset[str]
) -> dict[str, str]:
    """Fail closed: every limit needs a mechanism unless the backend documents it unenforceable."""
    missing = [name for name in LIMIT_NAMES if not found.get(name) and name not in allowed]
    if missing:
        raise SandboxUnavailable(
            f"the {backend_name} sandbox cannot enforce {', '.join(missing)} on this machine; "
            "refusing to run jobs without them"
        )
    return {name: found.get(name) or NOT_ENFORCED for name in LIMIT_NAMES}
