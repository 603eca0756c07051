"""The `bwrap` backend (embedded default): bubblewrap namespaces around the host's interpreter.

Every namespace is unshared (network included), the sandbox user is uid/gid 65534 in a new user
namespace with every capability dropped and further user namespaces disabled; the root is
read-only and /tmp is a tmpfs of `tmp_bytes`. The root holds only what a job needs (contract 8b:
a job sees no host path beyond the code it runs): the interpreter (its binary, libpython and
standard library) at a neutral place, each system library that it and its extension modules
link (found once with `ldd`, bound file by file at its own path) with the C++ runtime that
wheels expect of the system, the host's top-level links (/lib -> usr/lib), and the code (and
its dependencies); no /etc, no host programs, nothing else of /usr.

Memory, process count and CPU come from one cgroup per sandbox (v1 or v2), joined before bwrap
execs. Without writable cgroups, memory falls back to RLIMIT_AS and CPUs to
affinity; the process count then needs RLIMIT_NPROC on a non-root invoking user (as root the
kernel does not apply RLIMIT_NPROC, so the backend refuses).
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import signal
import subprocess
import sys
from functools import cached_property
from pathlib import Path

from calcgraph.workers.sandbox.base import (
    SandboxBackend,
    SandboxError,
    SandboxSpec,
    SandboxUnavailable,
    runner_config,
)
from calcgraph.workers.sandbox.cgroups import CgroupLayout, SandboxCgroup
from calcgraph.workers.sandbox.session import PipeChannel, RunnerSandbox, runner_source, spawn
from calcgraph.workers.sandbox.staging import (
    neutral_interpreter,
    remove_staged,
    stage_code,
    staging_parent,
    user_process_count,
)

SANDBOX_UID = 65534
_PREFIX = Path("/opt/python")
_SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
_WHEEL_RUNTIME = ("libstdc++.so.6", "libgcc_s.so.1")
"""System libraries that binary wheels link without shipping them (manylinux's policy)."""
_NO_DISPLAY = ("_tkinter",)
"""Extension modules of a display, which a sandbox has not: their X11 libraries stay out (the
tkinter package is not in a sandbox's standard library either)."""
# bwrap must be in the sandbox's cgroups before it forks anything: a shell joins them with its own
# pid, then execs bwrap under that same pid (no preexec hook in a threaded worker). The shell
# exports PWD, which bwrap (pid 1 of the sandbox) would keep in its /proc/1/environ: `env -i`
# execs bwrap with an empty environment.
_JOIN_CGROUPS = [
    "/bin/sh",
    "-c",
    'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 111; shift; n=$((n-1)); done;'
    ' exec /usr/bin/env -i "$@"',
    "join-cgroups",
]


def _memory_file(text: str) -> int:
    """A descriptor of an anonymous memory file holding `text`, read from its start."""
    descriptor = os.memfd_create("bwrap-args", os.MFD_CLOEXEC)
    os.write(descriptor, text.encode())
    os.lseek(descriptor, 0, os.SEEK_SET)
    return descriptor


class BwrapBackend(SandboxBackend):
    name = "bwrap"

    def __init__(self, *, bwrap: str | None = None, use_cgroups: bool = True) -> None:
        found = bwrap or shutil.which("bwrap")
        if not found:
            raise SandboxUnavailable("the bwrap program is not on PATH (Debian: bubblewrap)")
        self.bwrap = found
        self.use_cgroups = use_cgroups
        self.prefix = Path(sys.base_prefix).resolve()
        # An interpreter outside /usr (pyenv under /root, say) is mounted at a neutral place, so
        # the sandbox learns nothing of the host's home directories.
        self.mounted_prefix = self.prefix if self.prefix.is_relative_to("/usr") else _PREFIX
        if self.mounted_prefix != self.prefix and os.geteuid() == 0:
            # The sandbox's mount table would name the install folder: bind a copy instead.
            try:
                self.prefix = neutral_interpreter(self.prefix)
            except OSError as exc:
                raise SandboxUnavailable(f"cannot copy the interpreter: {exc}") from exc
        self.python = str(self.mounted_prefix / "bin" / "python3")
        # As root, staged code lives where the process backend stages its own (not /tmp).
        self.stage_dir = staging_parent(os.geteuid() == 0)

    @cached_property
    def _help(self) -> str:
        return subprocess.run(
            [self.bwrap, "--help"], capture_output=True, text=True, check=False
        ).stdout

    @cached_property
    def system_libraries(self) -> tuple[tuple[str, str], ...]:
        """(host file, path in the sandbox) of each system library the interpreter and its
        extension modules link, the loader included, and the wheels' C++ runtime: `ldd` of
        them all, once per backend (its folder links resolved, as the sandbox recreates the
        host's top-level links)."""
        version = f"python{sys.version_info.major}.{sys.version_info.minor}"
        objects = [self.prefix / "bin" / version]
        objects += [
            module
            for module in sorted((self.prefix / "lib" / version / "lib-dynload").glob("*.so"))
            if not module.name.startswith(_NO_DISPLAY)
        ]
        found = subprocess.run(
            ["ldd", *map(str, objects)], capture_output=True, text=True, check=False
        ).stdout
        paths = set()
        for line in found.splitlines():
            words = line.split()
            if "=>" in words and len(words) >= 3 and words[2].startswith("/"):
                paths.add(words[2])
            elif words and words[0].startswith("/") and not words[0].endswith(":"):
                paths.add(words[0])  # the loader
        libc = next((p for p in paths if os.path.basename(p) == "libc.so.6"), None)
        if libc is not None:
            for name in _WHEEL_RUNTIME:
                candidate = os.path.join(os.path.dirname(libc), name)
                if os.path.exists(candidate):
                    paths.add(candidate)
        interpreter = (str(self.prefix), str(Path(sys.base_prefix).resolve()))
        bound = []
        for path in sorted(paths):
            if path.startswith(interpreter):
                continue  # in the interpreter's own bind
            inside = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
            bound.append((os.path.realpath(path), inside))
        return tuple(bound)

    def _interpreter_args(self) -> list[str]:
        """Binds of the interpreter: its whole (neutral) prefix at /opt/python, or for an
        interpreter of /usr only its binary, libpython and standard library."""
        if self.mounted_prefix != self.prefix:
            # Its RUNPATH names the host path: without LD_LIBRARY_PATH the loader would pick
            # another libpython from /usr (the system's, of another patch release) or none.
            return [
                "--ro-bind", str(self.prefix), str(self.mounted_prefix),
                "--setenv", "LD_LIBRARY_PATH", str(self.mounted_prefix / "lib"),
            ]  # fmt: skip
        version = f"python{sys.version_info.major}.{sys.version_info.minor}"
        binary = self.prefix / "bin" / version
        args = ["--ro-bind", str(binary.resolve()), str(binary)]
        args += ["--symlink", version, str(self.prefix / "bin" / "python3")]
        stdlib = self.prefix / "lib" / version
        args += ["--ro-bind", str(stdlib.resolve()), str(stdlib)]
        for library in sorted((self.prefix / "lib").glob(f"lib{version}*.so*")):
            args += ["--ro-bind", str(library.resolve()), str(library)]
        return args

    @cached_property
    def cgroups(self) -> CgroupLayout | None:
        return CgroupLayout.detect() if self.use_cgroups else None

    def mechanisms(self) -> dict[str, str | None]:
        cgroups = self.cgroups
        as_root = os.geteuid() == 0
        cg = f"cgroup v{cgroups.version} per sandbox" if cgroups else None
        return {
            "network": "--unshare-net (only a loopback of its own)",
            "read_only_fs": "read-only binds, root remounted read-only; /tmp the only tmpfs "
            "(no /var/tmp; /dev, with /dev/shm, read-only)",
            "tmp_size": "tmpfs --size" if "--size" in self._help else None,
            "memory": f"{cg}: memory limit, OOM kill" if cg else "RLIMIT_AS (MemoryError)",
            "cpus": f"{cg}: CFS quota" if cg else "sched_setaffinity to the first N CPUs",
            "cpu_priority": f"{cg} and its parent: the matching cpu.weight or cpu.shares"
            if cg
            else None,
            "pids": f"{cg}: pids.max"
            if cg
            else (None if as_root else "RLIMIT_NPROC (counts all the invoking user's processes)"),
            "capabilities": "--cap-drop ALL (CapEff verified 0 at start)",
            "no_new_privileges": "set by bwrap (verified at start)",
            "non_root": f"--unshare-user --uid {SANDBOX_UID} (verified at start)",
            "user_namespaces": "--disable-userns" if "--disable-userns" in self._help else None,
            "environment": "--clearenv, bwrap started with an empty environment (env -i), "
            "own pid namespace",
            "timeout": "host kills bwrap, its pid namespace and its cgroup",
            "output": "captured in the runner, truncated",
        }

    def _args(self, spec: SandboxSpec, code_dir: Path) -> list[str]:
        """bwrap's options (sent through `--args`, see `start`)."""
        limits = spec.limits
        args = [
            "--unshare-all",
            "--unshare-user",
            "--uid", str(SANDBOX_UID),
            "--gid", str(SANDBOX_UID),
            "--disable-userns",
            "--die-with-parent",
            "--new-session",
            "--cap-drop", "ALL",
            "--clearenv",
            "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
            "--setenv", "HOME", "/tmp",
            "--setenv", "TMPDIR", "/tmp",
            "--setenv", "LANG", "C.UTF-8",
            "--hostname", "sandbox",
        ]  # fmt: skip
        for path in _SYSTEM_LINKS:
            if os.path.islink(path):
                args += ["--symlink", os.readlink(path), path]
        args += self._interpreter_args()
        for host, inside in self.system_libraries:
            args += ["--ro-bind", host, inside]
        args += [
            "--proc", "/proc",
            "--dev", "/dev",
            "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp",
            "--ro-bind", str(code_dir), "/code",
        ]  # fmt: skip
        if spec.deps_dir is not None:
            args += ["--ro-bind", str(spec.deps_dir.resolve()), "/deps"]
        # /dev is a tmpfs bwrap populates; once set up, nothing but /tmp stays writable.
        args += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/tmp"]
        return args

    def start(self, spec: SandboxSpec) -> RunnerSandbox:
        self.fail_closed()
        limits = spec.limits
        if not spec.code_dir.is_dir():
            raise SandboxError("infrastructure_error", f"code directory {spec.code_dir} is missing")
        group: SandboxCgroup | None = None
        rlimits = {"NOFILE": limits.open_files, "CORE": 0}
        if self.cgroups is not None:
            try:
                group = self.cgroups.create(limits)
            except OSError as exc:
                raise SandboxError("infrastructure_error", f"cannot create cgroups: {exc}") from exc
        else:
            rlimits["AS"] = limits.memory_bytes
            rlimits["NPROC"] = user_process_count(os.getuid()) + limits.pids
        procs_files = group.procs_files if group else []
        # The code is staged under a neutral folder: the sandbox's mount table shows where its
        # /code comes from, which must not be the worker's code cache.
        try:
            staged = stage_code(spec.code_dir, self.stage_dir)
        except SandboxError:
            if group:
                group.remove()
            raise
        # bwrap is pid 1 of the sandbox: its arguments (host paths among them) would be in the
        # job's /proc/1/cmdline. They go through a memory file instead (`--args`).
        arguments = _memory_file("\0".join(self._args(spec, staged / "code")) + "\0")

        config = runner_config(
            spec,
            limits,
            code_dir="/code",
            deps_dir="/deps",
            rlimits=rlimits,
            cpu_affinity=None if group else math.ceil(limits.cpus),
            no_new_privs=False,  # bwrap has set it already
            user=None,
            workdir="/tmp",
            kill_all=True,  # its own pid namespace: every process but bwrap's init is the job's
        )
        try:
            process = spawn(
                [
                    *_JOIN_CGROUPS,
                    str(len(procs_files)),
                    *procs_files,
                    self.bwrap,
                    "--args",
                    str(arguments),
                    # The command stays here (bwrap wants it last): neutral paths only.
                    *(self.python, "-I", "-S", "-B", "-c", runner_source()),
                ],
                env={},
                cwd="/",
                start_new_session=True,
                pass_fds=(arguments,),
            )
        except (OSError, subprocess.SubprocessError) as exc:
            if group:
                group.remove()
            remove_staged(staged)
            raise SandboxError("infrastructure_error", f"cannot start bwrap: {exc}") from exc
        finally:
            os.close(arguments)
        channel = PipeChannel(process)

        def kill() -> None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            if group:
                group.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)
            channel.close()
            if group:
                group.remove()
            remove_staged(staged)

        def oom_killed() -> bool:
            return group.oom_killed() if group else False

        cgroup_dirs = {k: str(v) for k, v in group.dirs.items()} if group else {}
        details = {"pid": process.pid, "cgroups": cgroup_dirs, "code_dir": str(spec.code_dir)}
        sandbox = RunnerSandbox(
            spec, channel, config, kill=kill, oom_killed=oom_killed, details=details
        )
        sandbox.handshake()
        return sandbox
