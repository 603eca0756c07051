"""The `process` backend: a plain subprocess with rlimits, for a single trusted user on a machine
with neither Docker nor bubblewrap. It runs only when named (`CALCGRAPH_SANDBOX=process`) and
says at every start that isolation is weak.

Run by root it drops the runner to a uid of its own (so RLIMIT_NPROC counts that sandbox alone,
the host's files, the worker's code cache and the Docker socket are out of reach, and a final
kill(-1) as that uid removes every process the job left), empties the capability bounding set and
sets no_new_privs; before that, the runner takes a network namespace of its own (no loopback route
to the API, Redis or PostgreSQL) and a mount namespace in which /var/tmp, /dev/shm and /run (the
services' unix sockets) are empty read-only tmpfs mounts and /tmp a private tmpfs of `tmp_bytes`
(the code is staged under /var/lib/calcgraph/sandboxes instead); every other mount is remounted
read-only there, and /proc is a fresh one that shows only the sandbox's own processes
(`hidepid`). It cannot hide host files whose mode lets anyone read them, or stop the handler
from creating a user namespace. Run by a
non-root user it can do none of the namespaces, nor give the runner a uid of its own:
RLIMIT_NPROC then counts all that user's processes, the network is reachable, /tmp is the host's
(RLIMIT_FSIZE bounds each file), and files of that user (the host environment of its other
processes through /proc included) are readable.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

from calcgraph.workers.sandbox.base import (
    SandboxBackend,
    SandboxError,
    SandboxSpec,
    SandboxUnavailable,
    runner_config,
)
from calcgraph.workers.sandbox.session import PipeChannel, RunnerSandbox, runner_source, spawn
from calcgraph.workers.sandbox.staging import (
    allocate_uid,
    remove_staged,
    stage_code,
    staging_parent,
    traversable_by_others,
    user_process_count,
)

log = logging.getLogger(__name__)

_ALWAYS_UNENFORCEABLE = frozenset({"user_namespaces"})
# Shared writable folders of the host, and /run with its service sockets (PostgreSQL's among
# them), that a root-run sandbox sees as empty read-only mounts.
HIDDEN_DIRS = ("/var/tmp", "/dev/shm", "/run")
WEAK_WARNING = (
    "CALCGRAPH_SANDBOX=process: the `process` sandbox is for a SINGLE TRUSTED USER only. Jobs run "
    "as plain subprocesses with rlimits; not enforced: %s. Jobs can read every host file its "
    "mode lets any user read (%s). For other users' code install "
    "bubblewrap (apt-get install bubblewrap) and use the default CALCGRAPH_SANDBOX=bwrap, or start "
    "Docker and use CALCGRAPH_SANDBOX=docker."
)
_SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"


class ProcessBackend(SandboxBackend):
    name = "process"
    resource_refusal = (
        "the process sandbox cannot enforce a function's declared resources (memory as a "
        "cgroup, a fraction of a CPU); run it with CALCGRAPH_SANDBOX=bwrap or docker"
    )

    def __init__(self, *, python: str | None = None, uid_base: int = 1_900_000_000) -> None:
        self.as_root = os.geteuid() == 0
        if self.as_root and not _namespaces_allowed():
            # Root without the power to make namespaces (a container without CAP_SYS_ADMIN):
            # every job would fail its confinement, so the backend refuses to start instead.
            raise SandboxUnavailable(
                "the process sandbox runs as root here, but the kernel refuses it a mount and "
                "network namespace (a container without CAP_SYS_ADMIN?), so it cannot confine "
                "jobs: use CALCGRAPH_SANDBOX=bwrap (the default) or docker"
            )
        self.uid_base = uid_base
        self.unenforceable = _ALWAYS_UNENFORCEABLE | (
            frozenset()
            if self.as_root
            else frozenset({"pids", "environment", "network", "tmp_size", "read_only_fs"})
        )
        self.python = python or self._pick_python()
        # As root, code is staged outside /tmp: the sandbox gets a private /tmp of its own.
        self.stage_dir = staging_parent(self.as_root)
        seen = (
            "read-only, in a mount namespace with a /proc of the sandbox's own processes"
            if self.as_root
            else "writable where the invoking user may write, and every process's command "
            "line and environment of that user"
        )
        log.warning(WEAK_WARNING, ", ".join(sorted(self.unenforceable)), seen)

    def _pick_python(self) -> str:
        candidates = [Path(sys.base_prefix) / "bin" / "python3", Path("/usr/bin/python3")]
        if not self.as_root:
            return str(candidates[0])
        # The runner's uid has no relation to the worker's: it must reach the interpreter.
        for candidate in candidates:
            if candidate.exists() and traversable_by_others(candidate):
                return str(candidate)
        raise SandboxError(
            "infrastructure_error", "no python3 that an unprivileged uid can execute"
        )

    def mechanisms(self) -> dict[str, str | None]:
        return {
            "network": "a network namespace of its own (unshare CLONE_NEWNET)"
            if self.as_root
            else None,
            "tmp_size": "a private tmpfs /tmp of tmp_bytes (mount namespace)"
            if self.as_root
            else None,
            "read_only_fs": "a mount namespace of its own: every mount remounted read-only "
            "but a private /tmp, and a /proc showing only the sandbox's own processes"
            if self.as_root
            else None,
            "memory": "RLIMIT_AS (a MemoryError past the limit)",
            "cpus": "sched_setaffinity to the first N CPUs",
            "pids": "RLIMIT_NPROC on the sandbox's own uid" if self.as_root else None,
            "capabilities": (
                "setuid to an unprivileged uid, bounding set emptied"
                if self.as_root
                else "runs as the invoking non-root user"
            )
            + " (CapEff verified 0 at start)",
            "no_new_privileges": "prctl(PR_SET_NO_NEW_PRIVS), verified at start",
            "non_root": "own uid per sandbox" if self.as_root else "the invoking non-root user",
            "environment": "empty environment; /proc of other uids unreadable"
            if self.as_root
            else None,
            "timeout": "host kills the process group"
            + (" and every process of the sandbox's uid" if self.as_root else ""),
            "output": "captured in the runner, truncated",
        }

    def start(self, spec: SandboxSpec) -> RunnerSandbox:
        self.fail_closed()
        limits = spec.limits
        uid = allocate_uid(self.uid_base) if self.as_root else os.getuid()
        staged = stage_code(spec.code_dir, self.stage_dir, gid=uid if self.as_root else None)
        tmp = staged / "tmp"
        tmp.mkdir(mode=0o700)
        if self.as_root:
            os.chown(tmp, uid, uid)
        nproc = limits.pids if self.as_root else user_process_count(uid) + limits.pids
        config = runner_config(
            spec,
            limits,
            code_dir=str(staged / "code"),
            deps_dir=str(spec.deps_dir),
            rlimits={
                "AS": limits.memory_bytes,
                "FSIZE": limits.tmp_bytes,
                "NPROC": nproc,
                "NOFILE": limits.open_files,
                "CORE": 0,
            },
            cpu_affinity=math.ceil(limits.cpus),
            no_new_privs=True,
            die_with_parent=os.getpid(),  # the worker: the runner's expected parent
            user=[uid, uid] if self.as_root else None,
            workdir="/tmp" if self.as_root else str(tmp),
            private_tmp=limits.tmp_bytes if self.as_root else None,
            unshare_net=self.as_root,
            hide_dirs=list(HIDDEN_DIRS) if self.as_root else [],
            read_only_root=self.as_root,
            # As root the sandbox has a uid of its own: every process of that uid is the job's.
            kill_all=self.as_root,
        )
        home = "/tmp" if self.as_root else str(tmp)
        env = {"PATH": _SANDBOX_PATH, "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8"}
        try:
            process = spawn(
                [self.python, "-I", "-S", "-B", "-c", runner_source()],
                env=env,
                cwd=str(tmp),
                start_new_session=True,
            )
        except OSError as exc:
            remove_staged(staged)
            raise SandboxError("infrastructure_error", f"cannot start python: {exc}") from exc
        channel = PipeChannel(process)

        def kill() -> None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            if self.as_root:
                # kill(-1) from the sandbox's uid reaches every process of that uid, including
                # ones that left the process group with setsid.
                subprocess.run(
                    [self.python, "-I", "-S", "-c", "import os; os.kill(-1, 9)"],
                    user=uid,
                    group=uid,
                    extra_groups=[],
                    check=False,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)
            channel.close()
            remove_staged(staged)

        details = {"pid": process.pid, "uid": uid, "code_dir": str(staged / "code")}
        sandbox = RunnerSandbox(
            spec, channel, config, kill=kill, oom_killed=lambda: False, details=details
        )
        sandbox.handshake()
        return sandbox


_NAMESPACE_PROBE = (
    "import ctypes, sys; libc = ctypes.CDLL(None, use_errno=True); "
    "sys.exit(0 if libc.unshare(0x00020000 | 0x40000000) == 0 else 1)"
)


def _namespaces_allowed() -> bool:
    """Whether a child of this process may unshare a mount and a network namespace, as the
    runner does for every job when the backend runs as root (asked once, in a child)."""
    try:
        probe = subprocess.run(
            [sys.executable, "-I", "-S", "-c", _NAMESPACE_PROBE],
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0
