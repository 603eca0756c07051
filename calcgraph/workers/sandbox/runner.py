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

from calcgraph.workers.sandbox.confine import confine, proc_status  # inlined in the sandbox

# Frames of this file are the runner's, not the user's: tracebacks leave them out.
_RUNNER_FILES = {"<string>", globals().get("__file__", "<string>")}


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
        confine(config)
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
    status = proc_status()
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
