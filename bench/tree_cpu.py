"""CPU of this process and every process it starts, sandboxes included, dead or alive.

A sandbox runs in cgroups of its own (memory, pids, cpu) and may be killed before anyone reaps
its runner, so neither `RUSAGE_CHILDREN` nor a walk of /proc sees all it spent. The cpuacct
hierarchy (cgroup v1), which sandboxes do not join, does: this process moves into a cpuacct
cgroup of its own, which every process it starts inherits, and reads its `cpuacct.usage`.
Where that cannot be done (cgroup v2, no write access), the figure is this process's own CPU
plus its reaped children's (`RUSAGE_SELF` + `RUSAGE_CHILDREN`), and says so.
"""

from __future__ import annotations

import contextlib
import os
import resource
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

_CPUACCT = Path("/sys/fs/cgroup/cpuacct")


class TreeCpu:
    """`seconds()`: CPU seconds spent since the start by this process and its descendants."""

    def __init__(self) -> None:
        self.group: Path | None = None
        self.how = "RUSAGE_SELF + RUSAGE_CHILDREN (sandboxes killed unreaped are missed)"
        self._start = 0.0

    def _rusage(self) -> float:
        own = resource.getrusage(resource.RUSAGE_SELF)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    def seconds(self) -> float:
        if self.group is not None:
            usage = int((self.group / "cpuacct.usage").read_text(encoding="ascii"))
            return usage / 1e9 - self._start
        return self._rusage() - self._start

    @contextlib.contextmanager
    def counting(self) -> Iterator[TreeCpu]:
        with contextlib.suppress(OSError):
            if (_CPUACCT / "cpuacct.usage").exists():
                group = _CPUACCT / f"calcgraph-bench-{uuid.uuid4().hex[:8]}"
                group.mkdir()
                try:
                    (group / "cgroup.procs").write_text(str(os.getpid()), encoding="ascii")
                except OSError:
                    group.rmdir()
                    raise
                self.group = group
                self.how = "cpuacct cgroup of the bench process and all it starts"
        self._start = 0.0
        self._start = self.seconds()
        try:
            yield self
        finally:
            if self.group is not None:
                with contextlib.suppress(OSError):
                    (_CPUACCT / "cgroup.procs").write_text(str(os.getpid()), encoding="ascii")
                # Processes still in it (a sandbox being reaped) keep it a moment.
                for _ in range(100):
                    try:
                        self.group.rmdir()
                        break
                    except OSError:
                        time.sleep(0.05)
                self.group = None
