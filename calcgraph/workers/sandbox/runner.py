"""The bootstrap that runs INSIDE a sandbox. Standard library only: the backends pass this file's
source to the sandbox's own python3 with `-c`, so it runs the same on the host interpreter (bwrap,
process) and in a function image (docker), and needs no mount of its own.

Protocol, one JSON object per line. The host writes a configuration line; the runner confines
itself further (rlimits, CPU affinity, no_new_privs, namespaces, dropping to an unprivileged user,
as the configuration asks), imports the handler once and answers `{"type": "ready", "status":
{...}}` (the process's uid and capability sets, for the host to verify) or `{"type": "failed",
...}`. Then each input line `{"nonce": ..., "inputs": {...}}` is answered by one `{"type":
"result", "nonce": ...}` line.

User code never sees the protocol on its own streams: stdin is /dev/null and stdout/stderr go, per
job, into a pipe drained by a thread (kept from job to job) that keeps at most `output_bytes`. The
protocol's descriptors are not inheritable, but the handler shares this process and could find
them: every message therefore echoes the nonce of the request it answers, a fresh random one per
job, which the host checks. A handler can learn its own job's nonce, never a later job's, so a line
it writes can change no other job's result (the host ignores it and retires the sandbox).
"""

from __future__ import annotations

import importlib
import json
import os
import queue
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from typing import IO, Any

# Frames of this file are the runner's, not the user's: tracebacks leave them out.
_RUNNER_FILES = {"<string>", globals().get("__file__", "<string>")}
_PR_SET_PDEATHSIG = 1
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAPBSET_DROP = 24
_LAST_CAP = 63


class _Drainer:
    """One thread that empties each job's capture pipe in turn: starting a thread per job costs
    more than most handlers. A pipe that never ends (a background process the handler left
    behind holds it open) keeps its thread; the next job gets a new one."""

    def __init__(self) -> None:
        self._captures: queue.SimpleQueue[_Capture] = queue.SimpleQueue()
        thread = threading.Thread(target=self._loop, daemon=True)
        thread.start()
        if thread.native_id is not None:
            _OWN_TASKS.add(thread.native_id)

    def _loop(self) -> None:
        while True:
            capture = self._captures.get()
            capture.drain()
            capture.drained.set()

    def drain(self, capture: _Capture) -> None:
        self._captures.put(capture)


_drainer: _Drainer | None = None
_OWN_TASKS: set[int] = set()
"""Kernel task ids of the runner's own threads (main, drainers) and of the threads the handler's
module started when it was imported: after a job, any other task is one the job left running."""
_PR_SET_CHILD_SUBREAPER = 36
_SWEEP_SECONDS = 2.0


class _Capture:
    """Collects what user code writes to fd 1 and 2 during one job, up to `limit` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.chunks: list[bytes] = []
        self.kept = 0
        self.dropped = 0
        self.read_fd = -1
        self.drained = threading.Event()

    def drain(self) -> None:
        while True:
            try:
                data = os.read(self.read_fd, 65536)
            except OSError:
                return
            if not data:
                return
            room = self.limit - self.kept
            if room > 0:
                self.chunks.append(data[:room])
                self.kept += min(room, len(data))
            self.dropped += max(0, len(data) - max(room, 0))

    def start(self) -> None:
        global _drainer
        read_fd, write_fd = os.pipe()
        self.read_fd = read_fd
        os.dup2(write_fd, 1)
        os.dup2(write_fd, 2)
        os.close(write_fd)
        if _drainer is None:
            _drainer = _Drainer()
        _drainer.drain(self)

    def stop(self, devnull: int) -> str:
        global _drainer
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # a handler may have replaced or closed them
                pass
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        # A background process the handler left behind may hold the pipe open: do not wait.
        if self.drained.wait(timeout=0.5):
            os.close(self.read_fd)
        else:
            _drainer = None
        text = b"".join(self.chunks).decode("utf-8", "replace")
        if self.dropped:
            text += f"\n[calcgraph: {self.dropped} more bytes of output dropped]\n"
        return text


def _children() -> list[int]:
    """The runner's child processes (of every thread of it), from /proc."""
    me = os.getpid()
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                # pid (comm) state ppid ...: comm may hold spaces and parentheses.
                fields = stat.read().rpartition(")")[2].split()
        except OSError:
            continue
        if len(fields) > 1 and fields[1] == str(me):
            found.append(int(entry))
    return found


def _reap() -> bool:
    """Collect every child that has exited; True while children remain."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def _sweep(config: Mapping[str, Any]) -> dict[str, int]:
    """End every process the job started, and count the threads it left (contract section 8b:
    when a job ends, every process and thread its handler started is gone before the sandbox
    serves another job).

    The runner is a child subreaper, so whatever the job forked (double forks and `setsid`
    included) stays below it: SIGKILL to every process it may signal (`kill_all`: the sandbox
    has a pid namespace or a uid of its own) or, generation by generation, to its children,
    until none is left to reap. Threads cannot be killed: the host stops a sandbox whose job
    left one (its answer's `stray_threads`)."""
    import signal

    left: dict[str, int] = {}
    if _reap():
        deadline = time.monotonic() + _SWEEP_SECONDS
        killed = 0
        while _reap():
            if time.monotonic() > deadline:
                left["stray_processes"] = len(_children()) or 1
                break
            targets = [-1] if config.get("kill_all") else _children()
            for pid in targets:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.001)
        left["killed_processes"] = killed
    try:
        tasks = {int(task) for task in os.listdir("/proc/self/task")}
    except OSError:
        tasks = set()
    stray = len(tasks - _OWN_TASKS)
    if stray:
        left["stray_threads"] = stray
    return left


def _proc_status() -> dict[str, str]:
    wanted = ("Uid", "Gid", "CapEff", "CapPrm", "CapBnd", "CapAmb", "NoNewPrivs")
    found: dict[str, str] = {}
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                key, _, value = line.partition(":")
                if key in wanted:
                    found[key] = value.strip()
    except OSError as exc:
        found["error"] = str(exc)
    return found


_CLONE_NEWNS = 0x00020000
_CLONE_NEWNET = 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 0x20, 0x1000, 0x4000, 0x40000


def _unshare(config: Mapping[str, Any]) -> None:
    """A network namespace of its own (no route to the host's loopback services) and, over the
    host's shared writable folders, empty read-only tmpfs mounts: asked for by the `process`
    backend when it runs as root, the only case in which the kernel lets it."""
    mounts = bool(
        config.get("hide_dirs") or config.get("private_tmp") or config.get("read_only_root")
    )
    flags = (_CLONE_NEWNET if config.get("unshare_net") else 0) | (_CLONE_NEWNS if mounts else 0)
    if not flags:
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(flags) != 0:
        raise OSError(ctypes.get_errno(), "unshare failed")
    if not mounts:
        return
    # Nothing mounted here may leak back to the host.
    if libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), "cannot make the mounts private")
    tmpfs: list[tuple[str, int, str]] = [
        (path, _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, "size=4k,mode=0555")
        for path in config.get("hide_dirs") or []
    ]
    # Folders the job needs (installed dependencies) that the private /tmp would cover: held
    # open now, bound back read-only at the same path once it is mounted.
    keep: list[tuple[str, int]] = []
    if config.get("private_tmp"):
        size = int(config["private_tmp"])
        tmpfs.append(("/tmp", _MS_NOSUID | _MS_NODEV, f"size={size},mode=1777"))
        for path in config.get("extra_paths") or []:
            real = os.path.realpath(path)
            if real.startswith("/tmp/") and os.path.isdir(real):
                keep.append((real, os.open(real, os.O_PATH | os.O_DIRECTORY)))
    for path, options, data in tmpfs:
        if os.path.isdir(path):
            if libc.mount(b"tmpfs", path.encode(), b"tmpfs", options, data.encode()) != 0:
                raise OSError(ctypes.get_errno(), f"cannot mount a tmpfs on {path}")
    if config.get("read_only_root"):
        _read_only_mounts(libc, keep_writable=("/tmp",))
    for path, fd in keep:
        os.makedirs(path, mode=0o755, exist_ok=True)
        source = f"/proc/self/fd/{fd}".encode()
        if libc.mount(source, path.encode(), None, _MS_BIND | _MS_REC, None) != 0:
            raise OSError(ctypes.get_errno(), f"cannot keep {path}")
        readonly = _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV
        if libc.mount(None, path.encode(), None, readonly, None) != 0:
            raise OSError(ctypes.get_errno(), f"cannot make {path} read-only")
        os.close(fd)


_MOUNT_FLAGS = {"nosuid": 2, "nodev": 4, "noexec": 8, "noatime": 0x400, "nodiratime": 0x800}
_MS_RELATIME = 0x200000


def _read_only_mounts(libc: Any, keep_writable: tuple[str, ...]) -> None:
    """In the runner's own mount namespace: every mount but `keep_writable` (and what lies
    under them) remounted read-only, keeping its other flags, and a /proc of its own that
    shows only the processes of the sandbox's uid (`hidepid`): the host's files stay readable
    where their modes allow, never writable, and no other process's command line shows."""
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as table:
        entries = [line.split() for line in table]
    for fields in entries:
        point = fields[4].encode().decode("unicode_escape")
        if any(point == w or point.startswith(w + "/") for w in keep_writable):
            continue
        if point == "/proc" or point.startswith("/proc/"):
            continue
        flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY
        for option in fields[5].split(","):
            flags |= _MOUNT_FLAGS.get(option, 0) | (_MS_RELATIME if option == "relatime" else 0)
        if libc.mount(None, point.encode(), None, flags, None) != 0:
            import ctypes
            import errno

            if ctypes.get_errno() == errno.ENOENT:  # under a folder a tmpfs now covers
                continue
            raise OSError(ctypes.get_errno(), f"cannot make {point} read-only")
    proc = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    for hidepid in (b"hidepid=invisible", b"hidepid=2"):  # the name, then older kernels' number
        if libc.mount(b"proc", b"/proc", b"proc", proc, hidepid) == 0:
            return
    import ctypes

    raise OSError(ctypes.get_errno(), "cannot mount a /proc of its own")


def _confine(config: Mapping[str, Any]) -> None:
    import ctypes
    import signal

    # Orphans of what a job forks come back to the runner, which ends them after the job.
    if ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError("prctl(PR_SET_CHILD_SUBREAPER) failed")

    # Past RLIMIT_FSIZE a write must fail with EFBIG, not kill the runner with SIGXFSZ.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    rlimits: Mapping[str, int] = config.get("rlimits") or {}
    if rlimits:
        import resource

        for name, value in rlimits.items():
            resource.setrlimit(getattr(resource, "RLIMIT_" + name), (value, value))
    cpus = config.get("cpu_affinity")
    if cpus:
        allowed = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, set(allowed[: int(cpus)]))
    _unshare(config)
    user = config.get("user")
    if config.get("no_new_privs") or user:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if user and os.geteuid() == 0:
            # Empty the bounding set while still privileged, so nothing can come back later.
            for cap in range(_LAST_CAP + 1):
                libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if user:
        uid, gid = int(user[0]), int(user[1])
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    if config.get("die_with_parent"):
        import ctypes

        # Set after the uid change, which clears it: a crashed worker takes its runners along.
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != config["die_with_parent"]:  # it died before the signal was armed
            os._exit(1)
    os.umask(0o077)
    workdir = config.get("workdir")
    if workdir:
        os.chdir(workdir)


def _load_handler(config: Mapping[str, Any]) -> Callable[..., Any]:
    for path in reversed([config.get("code_dir"), *(config.get("extra_paths") or [])]):
        if path:
            sys.path.insert(0, str(path))
    module_name, sep, attribute = str(config["handler"]).partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"handler {config['handler']!r} is not of the form module:callable")
    target: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise TypeError(f"handler {config['handler']!r} is not callable")
    return target  # type: ignore[no-any-return]


def _shape_outputs(value: Any, ports: list[str]) -> dict[str, Any]:
    """A mapping of output ports, or a bare value for a function with exactly one output port."""
    if isinstance(value, Mapping) and all(isinstance(key, str) for key in value):
        if not ports or set(value) <= set(ports):
            return dict(value)
    if len(ports) == 1:
        return {ports[0]: value}
    if not ports:
        return {"result": value}
    raise TypeError(
        f"the handler returned {type(value).__name__}; expected a mapping of the output ports "
        f"{', '.join(ports)}"
        + (
            f" (unknown keys: {sorted(set(value) - set(ports))})"
            if isinstance(value, Mapping)
            else ""
        )
    )


def _describe(exc: BaseException) -> tuple[str, str]:
    """The error message and a traceback without the runner's own frames."""
    summary = traceback.TracebackException.from_exception(exc)
    summary.stack = traceback.StackSummary.from_list(
        [frame for frame in summary.stack if frame.filename not in _RUNNER_FILES]
    )
    message = "".join(summary.format_exception_only()).strip()
    return message[:2000], "".join(summary.format())


def _error(exc: BaseException) -> tuple[dict[str, str], str]:
    message, trace = _describe(exc)
    kind = "out_of_memory" if isinstance(exc, MemoryError) else "user_error"
    if isinstance(exc, SystemExit):
        message = f"the handler called exit({exc.code!r})"
    return {"kind": kind, "message": message}, trace


def _run_job(
    handler: Callable[..., Any], request: Mapping[str, Any], config: Mapping[str, Any], devnull: int
) -> dict[str, Any]:
    nonce = request.get("nonce")
    inputs: Mapping[str, Any] = request.get("inputs") or {}
    capture = _Capture(int(config["output_bytes"]))
    capture.start()
    began = time.perf_counter()
    reply: dict[str, Any]
    trace = ""
    try:
        outputs = _shape_outputs(handler(**inputs), list(config.get("output_ports") or []))
        # NaN, infinities, NULs and lone surrogates pass: the host refuses them, naming the port.
        encoded = json.dumps(outputs)
        if len(encoded) > int(config["result_bytes"]):
            raise ValueError(
                f"the outputs are {len(encoded)} bytes of JSON, over the limit of "
                f"{config['result_bytes']}"
            )
        reply = {"type": "result", "status": "success", "outputs": json.loads(encoded)}
    except BaseException as exc:  # the handler's failure is the job's result, whatever it is
        error, trace = _error(exc)
        reply = {"type": "result", "status": "failed", "error": error}
    # Before the capture ends: a process the job left may hold its pipe open.
    reply.update(_sweep(config))
    logs = capture.stop(devnull)
    reply["logs"] = logs + trace
    reply["duration"] = time.perf_counter() - began
    reply["nonce"] = nonce
    return reply


def _send(out: IO[bytes], message: Mapping[str, Any]) -> None:
    out.write(json.dumps(message).encode() + b"\n")
    out.flush()


def main() -> None:
    sys.dont_write_bytecode = True
    # Not inheritable (os.dup), so no process the handler starts holds them.
    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    config: dict[str, Any] = json.loads(proto_in.readline() or b"{}")
    if not config:
        return
    nonce = config.pop("nonce", None)
    # A failing confinement is the sandbox's problem, not the user's.
    try:
        _confine(config)
    except BaseException as exc:
        _send(
            proto_out,
            {
                "type": "failed",
                "error": {"kind": "sandbox_error", "message": f"confinement failed: {exc!r}"},
                "nonce": nonce,
            },
        )
        return
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    status = _proc_status()
    capture = _Capture(int(config["output_bytes"]))
    capture.start()
    try:
        handler = _load_handler(config)
    except BaseException as exc:
        error, trace = _error(exc)
        logs = capture.stop(devnull)
        failed = {"type": "failed", "error": error, "logs": logs + trace, "status": status}
        _send(proto_out, {**failed, "nonce": nonce})
        return
    logs = capture.stop(devnull)
    # What the import left running belongs to the sandbox; jobs are measured against it.
    _sweep(config)
    _OWN_TASKS.update(int(task) for task in os.listdir("/proc/self/task"))
    ready = {"type": "ready", "status": status, "logs": logs, "python": sys.version}
    _send(proto_out, {**ready, "nonce": nonce})
    del nonce
    for line in proto_in:
        _send(proto_out, _run_job(handler, json.loads(line), config, devnull))


if __name__ == "__main__":
    main()
