"""One cgroup per sandbox for memory, process count and CPU, on cgroup v2 or the v1 controllers.

CPU priority: under a cgroup's cpu controller a niceness competes only within the cgroup, so the
sandbox's niceness (`Limits.niceness`) is also given as the cgroup's weight, to it and to the
parent that holds every sandbox (which competes with the platform's processes): cpu.weight on v2,
cpu.shares on v1, both the kernel's weight of one process of that niceness.

The sandbox's first process joins its cgroups before it execs (see `join_paths`), so everything it
ever forks is counted. After a kill the cgroups tell an out-of-memory kill from other deaths.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from calcgraph.workers.sandbox.base import Limits

CGROUP_ROOT = Path("/sys/fs/cgroup")
_PERIOD_US = 100_000


# The kernel's weight of one process of each niceness from 0 to 19 (sched_prio_to_weight in
# kernel/sched/core.c): 1024 at 0, about 1.25 times less for each step.
_NICE_WEIGHTS = (
    1024, 820, 655, 526, 423, 335, 272, 215, 172, 137, 110, 87, 70, 56, 45, 36, 29, 23, 18, 15,
)  # fmt: skip


def cpu_shares(niceness: int) -> int:
    """cgroup v1 cpu.shares (and docker's cpu_shares) of one process at `niceness` (0: 1024,
    the default)."""
    return _NICE_WEIGHTS[max(0, min(niceness, len(_NICE_WEIGHTS) - 1))]


def cpu_weight(niceness: int) -> int:
    """cgroup v2 cpu.weight of the same (0: 100, the default), rounded as the kernel does."""
    return max(1, (cpu_shares(niceness) * 100 + 512) // 1024)


def _own_path(controller: str) -> str:
    """This process's cgroup path for a v1 controller ('' for the v2 unified hierarchy)."""
    with open("/proc/self/cgroup", encoding="ascii") as lines:
        for line in lines:
            _, names, path = line.rstrip("\n").split(":", 2)
            if names.split(",") == [controller] or (controller == "" and names == ""):
                return path
    raise FileNotFoundError(controller)


def _write(path: Path, value: str) -> None:
    path.write_text(value, encoding="ascii")


@dataclass(frozen=True)
class CgroupLayout:
    """Where a sandbox's cgroups are created: one parent directory per hierarchy."""

    version: int
    parents: dict[str, Path]
    """controller ('memory', 'pids', 'cpu'; 'unified' on v2) -> parent directory."""

    @classmethod
    def detect(cls, root: Path = CGROUP_ROOT) -> CgroupLayout | None:
        """The writable layout on this machine, or None when cgroups cannot be used."""
        with contextlib.suppress(OSError, ValueError):
            return cls._detect_v1(root)
        with contextlib.suppress(OSError, ValueError):
            return cls._detect_v2(root)
        return None

    @classmethod
    def _detect_v1(cls, root: Path) -> CgroupLayout:
        parents: dict[str, Path] = {}
        for controller in ("memory", "pids", "cpu"):
            mount = root / controller
            if not (mount / "cgroup.procs").exists():
                raise FileNotFoundError(mount)
            # Nest under our own cgroup so that the machine's limits on us still apply.
            parent = mount / _own_path(controller).lstrip("/") / "calcgraph-sandboxes"
            parent.mkdir(exist_ok=True)
            parents[controller] = parent
        layout = cls(1, parents)
        layout.create(Limits(), probe=True).remove()
        layout.remove_stale()
        return layout

    @classmethod
    def _detect_v2(cls, root: Path) -> CgroupLayout:
        controllers = (root / "cgroup.controllers").read_text(encoding="ascii").split()
        if not {"memory", "pids", "cpu"} <= set(controllers):
            raise ValueError("cgroup v2 lacks memory, pids or cpu")
        # The no-internal-process rule: sandboxes live in a dedicated subtree of the root.
        _write(root / "cgroup.subtree_control", "+memory +pids +cpu")
        parent = root / "calcgraph-sandboxes"
        parent.mkdir(exist_ok=True)
        _write(parent / "cgroup.subtree_control", "+memory +pids +cpu")
        layout = cls(2, {"unified": parent})
        layout.create(Limits(), probe=True).remove()
        layout.remove_stale()
        return layout

    def remove_stale(self) -> None:
        """Remove the empty cgroups a crashed worker left behind. The kernel refuses to remove
        a cgroup that still has members, and a minute's age spares one another worker has just
        created and not yet joined."""
        for parent in self.parents.values():
            for child in parent.iterdir():
                if child.is_dir() and child.name.startswith(("sbx-", "probe-")):
                    with contextlib.suppress(OSError):
                        if time.time() - child.stat().st_mtime > 60:
                            child.rmdir()

    def create(self, limits: Limits, probe: bool = False) -> SandboxCgroup:
        name = ("probe-" if probe else "sbx-") + uuid.uuid4().hex[:16]
        dirs = {key: parent / name for key, parent in self.parents.items()}
        group = SandboxCgroup(self.version, dirs)
        try:
            for path in dirs.values():
                path.mkdir()
            group.apply(limits)
        except OSError:
            group.remove()
            raise
        return group


@dataclass(frozen=True)
class SandboxCgroup:
    version: int
    dirs: dict[str, Path]

    def apply(self, limits: Limits) -> None:
        quota = max(1000, int(limits.cpus * _PERIOD_US))
        if self.version == 2:
            d = self.dirs["unified"]
            _write(d / "memory.max", str(limits.memory_bytes))
            with contextlib.suppress(FileNotFoundError):  # absent without swap accounting
                _write(d / "memory.swap.max", "0")
            _write(d / "pids.max", str(limits.pids))
            _write(d / "cpu.max", f"{quota} {_PERIOD_US}")
            for group in (d, d.parent):
                _write(group / "cpu.weight", str(cpu_weight(limits.niceness)))
            return
        memory = self.dirs["memory"]
        _write(memory / "memory.limit_in_bytes", str(limits.memory_bytes))
        # Without this, a limited cgroup would swap instead of failing where the machine has swap.
        with contextlib.suppress(FileNotFoundError):
            _write(memory / "memory.memsw.limit_in_bytes", str(limits.memory_bytes))
        _write(self.dirs["pids"] / "pids.max", str(limits.pids))
        _write(self.dirs["cpu"] / "cpu.cfs_period_us", str(_PERIOD_US))
        _write(self.dirs["cpu"] / "cpu.cfs_quota_us", str(quota))
        for group in (self.dirs["cpu"], self.dirs["cpu"].parent):
            _write(group / "cpu.shares", str(cpu_shares(limits.niceness)))

    @property
    def procs_files(self) -> list[str]:
        """The files a starting process writes its pid to (from a preexec hook: plain strings)."""
        return [str(path / "cgroup.procs") for path in self.dirs.values()]

    def _members(self) -> set[int]:
        pids: set[int] = set()
        for path in self.dirs.values():
            with contextlib.suppress(OSError):
                text = (path / "cgroup.procs").read_text(encoding="ascii")
                pids.update(int(p) for p in text.split())
        return pids

    def oom_killed(self) -> bool:
        if self.version == 2:
            name, d = "memory.events", self.dirs["unified"]
        else:
            name, d = "memory.oom_control", self.dirs["memory"]
        with contextlib.suppress(OSError):
            for line in (d / name).read_text(encoding="ascii").splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill" and int(value) > 0:
                    return True
        return False

    def kill(self) -> None:
        """SIGKILL every member until none is left (members may still be forking)."""
        if self.version == 2:
            with contextlib.suppress(OSError):
                _write(self.dirs["unified"] / "cgroup.kill", "1")
        for _ in range(200):
            members = self._members()
            if not members:
                return
            for pid in members:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)

    def remove(self) -> None:
        for path in self.dirs.values():
            for _ in range(100):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    # Killed tasks leave the cgroup asynchronously; give them a moment.
                    time.sleep(0.01)
