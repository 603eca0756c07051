"""The confinement a sandbox's runner applies to itself before it imports the handler: rlimits,
CPU affinity, a lower CPU priority, a child subreaper, namespaces and read-only mounts,
no_new_privs, dropping to an unprivileged user (as the configuration asks); and the status (uid,
capability sets, niceness) it reports for the host to verify.

Standard library only, like `runner.py`: the sandbox gets no copy of calcgraph, so
`session.runner_source()` puts this module's code in place of the runner's import of it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

_PR_SET_PDEATHSIG = 1
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAPBSET_DROP = 24
_LAST_CAP = 63
_PR_SET_CHILD_SUBREAPER = 36


def proc_status() -> dict[str, str]:
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
    found["Nice"] = str(os.getpriority(os.PRIO_PROCESS, 0))
    return found


def _lower_priority(niceness: int) -> None:
    """Every thread of the runner at `niceness` at least (the threads and processes a job
    starts inherit it), and RLIMIT_NICE 0: without CAP_SYS_NICE, which no sandbox holds, nothing
    in the sandbox can raise its priority back."""
    import resource

    resource.setrlimit(resource.RLIMIT_NICE, (0, 0))
    for task in os.listdir("/proc/self/task"):
        if os.getpriority(os.PRIO_PROCESS, int(task)) < niceness:
            os.setpriority(os.PRIO_PROCESS, int(task), niceness)


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


def _mounted(point: str) -> bool:
    """Whether `point` is a mount point of this namespace now."""
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as table:
        return any(line.split()[4].encode().decode("unicode_escape") == point for line in table)


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

            error = ctypes.get_errno()
            if error == errno.ENOENT:  # under a folder a tmpfs now covers
                continue
            if error == errno.EINVAL and not _mounted(point):
                # Unmounted since the table was read: the host's unmounts reach this
                # namespace (a container's overlay, gone as the job started).
                continue
            raise OSError(error, f"cannot make {point} read-only")
    proc = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    for hidepid in (b"hidepid=invisible", b"hidepid=2"):  # the name, then older kernels' number
        if libc.mount(b"proc", b"/proc", b"proc", proc, hidepid) == 0:
            return
    import ctypes

    raise OSError(ctypes.get_errno(), "cannot mount a /proc of its own")


def confine(config: Mapping[str, Any]) -> None:
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
    if config.get("niceness") is not None:
        _lower_priority(int(config["niceness"]))
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
